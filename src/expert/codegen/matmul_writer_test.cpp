// Matrix products in tl.dot tiles: the grouped tile grid, a K loop in BLOCK_K steps over operands read
// through their views, operands computed in registers zeroed where masked, addmm's bias and scales, fused
// epilogues, split-K partials and their combine, aligned operand copies, the gemv form, the K loop skipped
// for tiles a triangular where drops, and half operands kept in their type for tl.dot.
#include <gtest/gtest.h>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/ir/test_graphs.h"
#include "expert/kir/analysis.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

using testing::Has;

// The plan's only kernel, a matrix product, written with its planned design changed by `edit`.
KernelSource WriteProduct(const Graph& graph, void (*edit)(KernelDesign&) = nullptr) {
  return testing::WriteOnlyKernel(graph, KernelKind::kMatmul, [&](KernelPlan& kernel) {
    if (edit != nullptr) {
      edit(kernel.design);
    }
  });
}

// The design's tiles: BLOCK_M 32, BLOCK_N 64, BLOCK_K 32.
void Tiles(KernelDesign& design) {
  design.xblock = 32;
  design.yblock = 64;
  design.rblock = 32;
}

void SplitK(KernelDesign& design) {
  Tiles(design);
  design.algorithm = Algorithm::kSplitK;
  design.split = 2;
}

void Aligned(KernelDesign& design) {
  Tiles(design);
  design.algorithm = Algorithm::kAligned;
}

void KMajor(KernelDesign& design) {
  Tiles(design);
  design.algorithm = Algorithm::kKMajor;
  design.precision = Precision::kTf32x3;
}

void Gemv(KernelDesign& design) {
  Tiles(design);
  design.algorithm = Algorithm::kGemv;
  design.split = 0;
}

TEST(MatmulWriterTest, ATransposedOperandIsReadThroughItsView) {
  // mm(a.T, b): a [64, 32] read as [32, 64], b [64, 48]
  const Graph graph = testing::Fixture("level1_16_Matmul_with_transposed_A");
  const KernelSource source = WriteProduct(graph, Tiles);
  ASSERT_EQ(source.launches.size(), 1U);
  const KernelLaunch& launch = source.launches[0];
  EXPECT_EQ(launch.grid, "(1, 1)") << "one 32 x 64 tile covers 32 x 48";
  EXPECT_EQ(launch.constexprs,
            (std::map<std::string, int64_t>{{"BLOCK_M", 32}, {"BLOCK_N", 64}, {"BLOCK_K", 32}}));
  EXPECT_TRUE(Has(source.code, "# 1 x [32 x 64] @ [64 x 48]")) << source.code;
  EXPECT_TRUE(Has(source.code, "for k0 in range(0, 64, BLOCK_K):")) << source.code;
  EXPECT_TRUE(Has(source.code, "nmask = nindex < 48")) << source.code;
  EXPECT_TRUE(Has(source.code, "(32*kaindex + mindex), mmask & kamask, other=0.0)"))
      << "a's transpose: " << source.code;
  EXPECT_TRUE(Has(source.code, "(48*kbindex + nindex), nmask & kbmask, other=0.0)")) << source.code;
  EXPECT_EQ(source.a_tile_loads, 1);
  EXPECT_EQ(source.b_tile_loads, 1);
  EXPECT_FALSE(Has(source.code, "tl.where(mmask & kamask")) << "loaded tiles are already zero where masked";
  EXPECT_TRUE(Has(source.code, "(48*mindex + nindex), product, omask)")) << source.code;
  EXPECT_TRUE(source.scratch.empty());
}

TEST(MatmulWriterTest, KMajorCopiesBTransposedAndReadsItsTilesAlongK) {
  // 8 x [32 x 48] @ [48 x 64]: A copied as [256 x 48] rows, B transposed into [512 x 48] rows, both at a
  // stride of 64 floats; the product reads B's tile [BLOCK_K x BLOCK_N] with K contiguous
  const KernelSource source =
      WriteProduct(testing::Fixture("level1_3_Batched_matrix_multiplication"), KMajor);
  ASSERT_EQ(source.launches.size(), 3U);
  EXPECT_TRUE(source.launches[0].function.ends_with("_aligned_a")) << source.launches[0].function;
  EXPECT_TRUE(source.launches[1].function.ends_with("_kmajor_b")) << source.launches[1].function;
  ASSERT_EQ(source.scratch.size(), 2U);
  EXPECT_EQ(source.scratch[0].numel, 8 * 32 * 64);
  EXPECT_EQ(source.scratch[1].numel, 8 * 64 * 64);
  EXPECT_TRUE(Has(source.code, "B transposed into K-contiguous rows of a 32-float stride")) << source.code;
  // the repack reads B[b, k, n] (strides 3072, 64, 1) at its row b * 64 + n and column k
  EXPECT_TRUE(Has(source.code, "tl.load(ptr0 + ((pindex % 64) + 3072*(pindex // 64) + 64*cindex), mask"))
      << source.code;
  EXPECT_EQ(Count(source.code, "tl.store(ptr1 + (pindex * 64 + cindex)"), 2U)
      << "A's copy and B's, 64 floats a row";
  EXPECT_TRUE(
      Has(source.code, "b = tl.load(ptr1 + (4096*bindex + kbindex + 64*nindex), kbmask & nmask, other=0.0)"))
      << source.code;
  EXPECT_TRUE(Has(source.code, "input_precision=\"tf32x3\"")) << source.code;
}

TEST(MatmulWriterTest, ABatchedProductRunsABatchPerProgramColumn) {
  const KernelSource source = WriteProduct(testing::Fixture("level1_3_Batched_matrix_multiplication"), Tiles);
  ASSERT_EQ(source.launches.size(), 1U);
  EXPECT_EQ(source.launches[0].grid, "(1, 8)");
  EXPECT_TRUE(Has(source.code, "bindex = tl.program_id(1)")) << source.code;
  EXPECT_TRUE(Has(source.code, "# 8 x [32 x 48] @ [48 x 64]")) << source.code;
  EXPECT_TRUE(Has(source.code, "for k0 in range(0, 48, BLOCK_K):")) << source.code;
}

TEST(MatmulWriterTest, AddmmAddsItsBiasAndRunsItsEpilogueBeforeOneStore) {
  // x @ W.T + b, then * 2 and leaky_relu(0.1)
  const Graph graph = testing::Fixture("level2_12_Gemm_Multiply_LeakyReLU");
  const KernelSource source = WriteProduct(graph);
  EXPECT_TRUE(Has(source.code, "product = acc + (")) << source.code;
  EXPECT_TRUE(Has(source.code, "(product * 2.0)")) << source.code;
  EXPECT_TRUE(Has(source.code, "* 0.1)")) << source.code;
  EXPECT_EQ(Count(source.code, "tl.store("), 1U) << "the product itself is not stored";
  EXPECT_EQ(source.loaded, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(source.computed.size(), graph.nodes.size());
}

TEST(MatmulWriterTest, AddmmScalesTheProductAndTheBias) {
  Json node = NodeJson("out", "aten.addmm.default", {Ref("bias"), Ref("a"), Ref("b")}, Meta({32, 48}));
  node["kwargs"] = {{"beta", 0.5}, {"alpha", 3.0}};
  const Graph graph = LoadGraph(
      GraphJson({Input("bias", 0, Meta({48})), Input("a", 1, Meta({32, 64})), Input("b", 2, Meta({64, 48}))},
                {node}, {"out"}));
  const KernelSource source = WriteProduct(graph, Tiles);
  EXPECT_TRUE(Has(source.code, "product = (acc * 3.0) + ((")) << source.code;
  EXPECT_TRUE(Has(source.code, ").to(tl.float32) * 0.5)")) << source.code;
}

TEST(MatmulWriterTest, AComputedOperandIsZeroedWhereMasked) {
  const Graph graph =
      LoadGraph(GraphJson({Input("a", 0, Meta({40, 24})), Input("b", 1, Meta({24, 40}))},
                          {NodeJson("e", "aten.exp.default", Json::array({Ref("a")}), Meta({40, 24})),
                           NodeJson("out", "aten.mm.default", {Ref("e"), Ref("b")}, Meta({40, 40}))},
                          {"out"}));
  const KernelSource source = WriteProduct(graph, Tiles);
  // exp(0) = 1 in the padding: both tiles selected so that masked lanes add nothing
  EXPECT_TRUE(Has(source.code, "a = tl.where(mmask & kamask, (")) << source.code;
  EXPECT_TRUE(Has(source.code, "b = tl.where(kbmask & nmask, (")) << source.code;
  EXPECT_TRUE(Has(source.code, "tl.exp(")) << source.code;
  EXPECT_EQ(source.computed.count(0), 1U) << "exp computed in the product's kernel";
}

TEST(MatmulWriterTest, SplitKWritesPartialsAndSumsThemInOrder) {
  const Graph graph = testing::Fixture("level1_16_Matmul_with_transposed_A");  // K 64 in 2 slices of 32
  const KernelSource source = WriteProduct(graph, SplitK);
  ASSERT_EQ(source.launches.size(), 2U);
  EXPECT_EQ(source.launches[0].function, source.name + "_partial");
  EXPECT_EQ(source.launches[0].grid, "(1, 1, 2)") << "a program per tile, batch and slice";
  EXPECT_EQ(source.launches[1].function, source.name);
  EXPECT_EQ(source.launches[1].grid, "(1, 1)");
  ASSERT_EQ(source.scratch.size(), 1U);
  EXPECT_EQ(source.scratch[0].numel, 2 * 32 * 48) << "a partial product per slice";
  EXPECT_EQ(std::count(source.launches[0].pointers.begin(), source.launches[0].pointers.end(), ScratchId(0)),
            1);
  EXPECT_EQ(std::count(source.launches[1].pointers.begin(), source.launches[1].pointers.end(), ScratchId(0)),
            1);
  EXPECT_TRUE(Has(source.code, "split = tl.program_id(2)")) << source.code;
  EXPECT_TRUE(Has(source.code, "for k0 in range(split * 32, tl.minimum(split * 32 + 32, 64), BLOCK_K):"))
      << source.code;
  EXPECT_TRUE(Has(source.code, "for split in range(2):")) << source.code;
  EXPECT_EQ(Count(source.code, "tl.dot("), 1U) << "the combine only adds: " << source.code;
}

// The product in the kernel IR, its design changed by `edit`.
kir::Kernel LowerProduct(const Graph& graph, void (*edit)(KernelDesign&)) {
  return testing::LowerOnlyKernel(graph, KernelKind::kMatmul,
                                  [&](KernelPlan& kernel) { edit(kernel.design); });
}

TEST(MatmulWriterTest, KMajorReadsADenseAlignedAInPlace) {
  // 8 x [32 x 64] @ [64 x 64]: A's rows of 64 floats already start on 32-float lines, so only B is copied
  const Graph graph = testing::LoadGraph(
      testing::Scaled(testing::FixtureJson("level1_3_Batched_matrix_multiplication"), 48, 64));
  const KernelSource source = WriteProduct(graph, KMajor);
  ASSERT_EQ(source.launches.size(), 2U);
  EXPECT_TRUE(source.launches[0].function.ends_with("_kmajor_b")) << source.launches[0].function;
  ASSERT_EQ(source.scratch.size(), 1U);
  EXPECT_EQ(source.scratch[0].numel, 8 * 64 * 64);
  EXPECT_EQ(source.launches[0].pointers, (std::vector<int>{1, ScratchId(0)}));
  const std::vector<int>& gemm = source.launches[1].pointers;
  EXPECT_EQ(std::count(gemm.begin(), gemm.end(), 0), 1) << "the product reads A itself";
  EXPECT_EQ(std::count(gemm.begin(), gemm.end(), ScratchId(0)), 1) << "and B's copy";
  const kir::Kernel program = LowerProduct(graph, KMajor);
  EXPECT_EQ(kir::Reads(program), (std::set<int>{0, 1}));
  EXPECT_EQ(kir::StagedTileLoads(program).a, 1);
  EXPECT_EQ(kir::StagedTileLoads(program).b, 1);
}

TEST(MatmulWriterTest, TheProgramAnswersWhatItReadsWritesAndStagesPerKStep) {
  const Graph graph = testing::Fixture("level1_16_Matmul_with_transposed_A");
  const kir::Kernel tiled = LowerProduct(graph, Tiles);
  ASSERT_EQ(tiled.functions.size(), 1U);
  EXPECT_EQ(tiled.functions[0].domain.kind, kir::Domain::Kind::kTiles);
  EXPECT_EQ(tiled.functions[0].domain.size, 32) << "M";
  EXPECT_EQ(tiled.functions[0].domain.columns, 48) << "N";
  EXPECT_EQ(kir::Reads(tiled), (std::set<int>{0, 1}));
  EXPECT_EQ(kir::Writes(tiled).size(), 1U);
  const kir::StagedTiles staged = kir::StagedTileLoads(tiled);
  EXPECT_EQ(staged.a, 1) << "A's tile, read through its transpose";
  EXPECT_EQ(staged.b, 1);
  // split-K: the partial and combine functions share the tile order; only the partial one has a K loop
  const kir::Kernel split = LowerProduct(graph, SplitK);
  ASSERT_EQ(split.functions.size(), 2U);
  EXPECT_EQ(split.functions[0].name, split.name + "_partial");
  EXPECT_EQ(split.functions[1].domain.tiles.group_size, split.functions[0].domain.tiles.group_size);
  EXPECT_EQ(kir::StagedTileLoads(split).a, 1);
  const std::vector<kir::LoopNest> partial_loops = kir::Loops(split.functions[0]);
  ASSERT_EQ(partial_loops.size(), 1U);
  EXPECT_EQ(partial_loops[0].variable, "k0");
  EXPECT_EQ(partial_loops[0].range.start.rfind("split * ", 0), 0U) << "the program's slice of K";
  EXPECT_EQ(partial_loops[0].range.step, "BLOCK_K");
  const std::vector<kir::LoopNest> combine_loops = kir::Loops(split.functions[1]);
  ASSERT_EQ(combine_loops.size(), 1U);
  EXPECT_EQ(combine_loops[0].variable, "split") << "the combine walks the partials, no K";
  EXPECT_EQ(combine_loops[0].range.stop, "2");
  ASSERT_EQ(split.scratch.size(), 1U);
  EXPECT_EQ(kir::Reads(split), (std::set<int>{0, 1})) << "scratch is no graph value";
  // aligned: two copies over panels, the product's K step loads from them (A and B sides, typed)
  const kir::Kernel aligned = LowerProduct(graph, Aligned);
  ASSERT_EQ(aligned.functions.size(), 3U);
  EXPECT_EQ(aligned.functions[0].domain.kind, kir::Domain::Kind::kPanels);
  EXPECT_EQ(aligned.functions[1].domain.kind, kir::Domain::Kind::kPanels);
  EXPECT_EQ(kir::Reads(aligned), (std::set<int>{0, 1})) << "the copies read the operands";
  EXPECT_EQ(kir::StagedTileLoads(aligned).a, 1);
  EXPECT_EQ(kir::StagedTileLoads(aligned).b, 1);
}

TEST(MatmulWriterTest, AlignedCopiesPadRowsTo32Floats) {
  const Graph graph = testing::Fixture("level1_16_Matmul_with_transposed_A");  // K 64, N 48
  const KernelSource source = WriteProduct(graph, Aligned);
  ASSERT_EQ(source.launches.size(), 3U);
  EXPECT_EQ(source.launches[0].function, source.name + "_aligned_a");
  EXPECT_EQ(source.launches[1].function, source.name + "_aligned_b");
  EXPECT_EQ(source.launches[2].function, source.name);
  ASSERT_EQ(source.scratch.size(), 2U);
  EXPECT_EQ(source.scratch[0].numel, 32 * 64) << "A [32 x 64]: 64 is already aligned";
  EXPECT_EQ(source.scratch[1].numel, 64 * 64) << "B [64 x 48]: rows of 64";
  EXPECT_EQ(source.launches[0].pointers, (std::vector<int>{0, ScratchId(0)}));
  EXPECT_EQ(source.launches[1].pointers, (std::vector<int>{1, ScratchId(1)}));
  EXPECT_TRUE(Has(source.code, "(pindex * 64 + cindex)")) << source.code;
  EXPECT_TRUE(Has(source.code, "(64*kbindex + nindex), kbmask & nmask, other=0.0)")) << source.code;
  const std::vector<int>& gemm = source.launches[2].pointers;
  EXPECT_EQ(std::count(gemm.begin(), gemm.end(), 0), 0) << "the product reads the copies";
  EXPECT_EQ(std::count(gemm.begin(), gemm.end(), 1), 0);
}

TEST(MatmulWriterTest, AGemvSumsFmaProductsAfterTheKLoop) {
  const kir::Kernel gemv = LowerProduct(testing::Fixture("level1_16_Matmul_with_transposed_A"), Gemv);
  ASSERT_EQ(gemv.functions.size(), 1U);
  const kir::Function& function = gemv.functions[0];
  const std::vector<kir::Statement> tiles = kir::RegisterTiles(function);
  ASSERT_EQ(tiles.size(), 1U);
  EXPECT_EQ(tiles[0].shape, (std::vector<std::string>{"BLOCK_M", "BLOCK_K"})) << "a lane per K step";
  const std::vector<kir::UpdateSite> updates = kir::Updates(function);
  ASSERT_EQ(updates.size(), 1U);
  EXPECT_EQ(updates[0].statement.data, "a * tl.trans(b)") << "products on the CUDA cores";
  EXPECT_EQ(updates[0].loops, std::vector<std::string>{"k0"});
  const std::vector<kir::UpdateSite> sums = kir::Reductions(function);
  ASSERT_EQ(sums.size(), 1U);
  EXPECT_TRUE(sums[0].loops.empty()) << "the K lanes summed after the loop";
  EXPECT_EQ(sums[0].statement.reduction->operands, std::vector<std::string>{"acc"});
  EXPECT_EQ(sums[0].statement.reduction->combine, kir::Combine::kAdd);
  EXPECT_TRUE(kir::Products(function).empty()) << "no tl.dot";
}

TEST(MatmulWriterTest, TilesATriangularWhereDropsSkipTheKLoop) {
  // where(j - i >= 0, a @ b, 0): torch.triu of a product
  const Graph graph = LoadGraph(
      GraphJson({Input("a", 0, Meta({64, 32})), Input("b", 1, Meta({32, 64}))},
                {NodeJson("out", "aten.mm.default", {Ref("a"), Ref("b")}, Meta({64, 64})),
                 NodeJson("rows", "aten.arange.default", Json::array({64}), Meta({64}, "int64")),
                 NodeJson("cols", "aten.arange.default", Json::array({64}), Meta({64}, "int64")),
                 NodeJson("column", "aten.unsqueeze.default", {Ref("rows"), 1}, Meta({64, 1}, "int64")),
                 NodeJson("diff", "aten.sub.Tensor", {Ref("cols"), Ref("column")}, Meta({64, 64}, "int64")),
                 NodeJson("cond", "aten.ge.Scalar", {Ref("diff"), 0}, Meta({64, 64}, "bool")),
                 NodeJson("zero", "aten.scalar_tensor.default", Json::array({0.0}), Meta({})),
                 NodeJson("triu", "aten.where.self", {Ref("cond"), Ref("out"), Ref("zero")}, Meta({64, 64}))},
                {"triu"}));
  const KernelSource source = WriteProduct(graph, Tiles);
  EXPECT_TRUE(Has(source.code, "k_end = tl.where(tl.max(tl.where(omask & (")) << source.code;
  EXPECT_TRUE(Has(source.code, "), 1, 0)) > 0, 32, 0)")) << source.code;
  EXPECT_TRUE(Has(source.code, "for k0 in range(0, k_end, BLOCK_K):")) << source.code;
}

TEST(MatmulWriterTest, HalfOperandsReachTheDotInTheirType) {
  const Graph graph = LoadGraph(
      testing::Retyped(testing::FixtureJson("level1_16_Matmul_with_transposed_A"), "float32", "float16"));
  const KernelSource source = WriteProduct(graph, Tiles);
  EXPECT_TRUE(Has(source.code, "tl.dot(a.to(tl.float16), b.to(tl.float16)")) << source.code;
  EXPECT_TRUE(Has(source.code, "a = tmp0\n")) << "the tile as loaded: " << source.code;
  EXPECT_EQ(Count(source.code, ".to(tl.float16)"), 3U) << "both dot operands and the store: " << source.code;
}

}  // namespace
}  // namespace egg::expert
