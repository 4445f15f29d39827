// The matmul family: seeds per precision for a GEMM, the gemv form of a mat-vec, the direct form of a small
// depthwise convolution; the legality of each algorithm, what code generation cannot write, the shared-
// memory ring, and the moves of each stage.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/design/legality.h"
#include "expert/families/family.h"
#include "expert/families/test_moves.h"
#include "expert/ir/test_graphs.h"
#include "expert/kir/analysis.h"

namespace egg::expert {
namespace {

using testing::RecordingSink;

const KernelFamily& Matmul() { return FamilyOf(KernelKind::kMatmul); }

KernelPlan Gemm(int64_t m, int64_t n, int64_t k, DType dtype = DType::kFloat32) {
  KernelPlan kernel;
  kernel.name = "k";
  kernel.kind = KernelKind::kMatmul;
  kernel.matmul = MatmulSpec{};
  kernel.matmul->m = m;
  kernel.matmul->n = n;
  kernel.matmul->k = k;
  kernel.matmul->dtype = dtype;
  kernel.design = Matmul().DefaultDesign(kernel, 0, Precision::kUnset);
  return kernel;
}

// A depthwise 3x3 convolution of 64 channels over 32x32: n 1, K 9 a group.
KernelPlan Depthwise() {
  ConvShape conv;
  conv.in_channels = conv.out_channels = conv.groups = 64;
  conv.kernel = {3, 3};
  conv.stride = conv.dilation = {1, 1};
  conv.padding = {1, 1};
  conv.in_size = conv.out_size = {32, 32};
  KernelPlan kernel = Gemm(32 * 32, 1, 9);
  kernel.matmul->conv = conv;
  kernel.design = Matmul().DefaultDesign(kernel, 0, Precision::kUnset);
  return kernel;
}

RecordingSink Moves(SearchStage stage, const KernelPlan& kernel) {
  RecordingSink sink;
  Matmul().Moves(stage, kernel, sink);
  return sink;
}

TEST(MatmulFamilyTest, DefaultDesignsBySeedPrecisionAndShape) {
  const KernelPlan gemm = Gemm(1024, 1024, 1024);
  const KernelDesign ieee = Matmul().DefaultDesign(gemm, 0, Precision::kUnset);
  EXPECT_EQ(ieee.algorithm, Algorithm::kTiled);
  EXPECT_EQ(ieee.precision, Precision::kIeee);
  EXPECT_EQ(ieee.xblock, 64);
  EXPECT_EQ(ieee.yblock, 64);
  const KernelDesign tf32x3 = Matmul().DefaultDesign(gemm, 0, Precision::kTf32x3);
  EXPECT_EQ(tf32x3.xblock, 128);
  EXPECT_EQ(tf32x3.num_stages, 4);
  EXPECT_EQ(Matmul().DefaultDesign(gemm, 2, Precision::kIeee).rblock, 16);
  EXPECT_EQ(Matmul().DefaultDesign(Gemm(64, 64, 65536), 0, Precision::kUnset).algorithm, Algorithm::kSplitK);
  EXPECT_EQ(Matmul().DefaultDesign(Gemm(1024, 1024, 1027), 0, Precision::kUnset).algorithm,
            Algorithm::kAligned);  // misaligned rows and enough work for the copies
  EXPECT_EQ(Matmul().DefaultDesign(Gemm(1024, 1024, 1027), 1, Precision::kUnset).algorithm,
            Algorithm::kTiled);

  // tf32 over a big product: B N-contiguous is transposed K-major (kmajor); both K-contiguous in place keep
  // the tiles kmajor reads its copy in (tiled, 128x256x32 of 8 warps); small products keep the seed table's
  KernelPlan big = Gemm(4096, 4096, 4096);
  big.matmul->b_n_major = true;
  const KernelDesign copied = Matmul().DefaultDesign(big, 0, Precision::kTf32);
  EXPECT_EQ(copied.algorithm, Algorithm::kKMajor);
  EXPECT_EQ(copied.yblock, 256);
  big.matmul->b_n_major = false;
  big.matmul->a_k_major = big.matmul->b_k_major = true;
  const KernelDesign in_place = Matmul().DefaultDesign(big, 0, Precision::kTf32);
  EXPECT_EQ(in_place.algorithm, Algorithm::kTiled);
  EXPECT_EQ(in_place.xblock, 128);
  EXPECT_EQ(in_place.yblock, 256);
  EXPECT_EQ(in_place.num_warps, 8);
  EXPECT_EQ(Matmul().DefaultDesign(big, 0, Precision::kTf32x3).yblock, 64) << "tf32x3 keeps its table's tile";
  big.matmul->a_k_major = false;
  EXPECT_EQ(Matmul().DefaultDesign(big, 0, Precision::kTf32).yblock, 64) << "A read through a view";
  KernelPlan small = Gemm(256, 256, 256);
  small.matmul->a_k_major = small.matmul->b_k_major = true;
  EXPECT_EQ(Matmul().DefaultDesign(small, 0, Precision::kTf32).yblock, 64);
  KernelPlan mlp = Gemm(128, 16384, 16384);  // 64 wide tiles: half a wave
  mlp.matmul->a_k_major = mlp.matmul->b_k_major = true;
  EXPECT_EQ(Matmul().DefaultDesign(mlp, 0, Precision::kTf32).yblock, 64);

  const KernelPlan matvec = Gemm(1024, 1, 4096);
  EXPECT_EQ(matvec.design.algorithm, Algorithm::kGemv);
  EXPECT_EQ(matvec.design.xblock, 16);
  EXPECT_EQ(matvec.design.yblock, 1);
  EXPECT_EQ(matvec.design.rblock, 512);
  EXPECT_EQ(Matmul().DefaultDesign(matvec, 1, Precision::kUnset).algorithm, Algorithm::kTiled);

  const KernelPlan conv = Depthwise();
  EXPECT_EQ(conv.design.algorithm, Algorithm::kDirect);
  EXPECT_EQ(conv.design.xblock, 1024);
  EXPECT_EQ(conv.design.precision, Precision::kIeee);
  const KernelDesign implicit = Matmul().DefaultDesign(conv, 1, Precision::kUnset);
  EXPECT_EQ(implicit.algorithm, Algorithm::kTiled);
  EXPECT_EQ(implicit.yblock, 16);
  EXPECT_EQ(implicit.xblock, 256);  // the narrow N tile's area given to rows
  for (const KernelPlan& kernel : {gemm, matvec, conv}) {
    for (int seed = 0; seed < 3; ++seed) {
      EXPECT_TRUE(DesignFits(kernel, Matmul().DefaultDesign(kernel, seed, Precision::kTf32))) << seed;
    }
  }
}

TEST(MatmulFamilyTest, FitsEachAlgorithmWhereTheProductAllowsIt) {
  const KernelPlan gemm = Gemm(64, 64, 65536);
  KernelDesign design = gemm.design;  // splitk
  EXPECT_TRUE(Matmul().Fits(gemm, design));
  design.split = 1;
  EXPECT_FALSE(Matmul().Fits(gemm, design));
  design = gemm.design;
  design.xblock = 8;  // below tl.dot's 16
  EXPECT_FALSE(Matmul().Fits(gemm, design));
  design.xblock = 512;
  EXPECT_FALSE(Matmul().Fits(gemm, design));
  design = gemm.design;
  design.precision = Precision::kUnset;
  EXPECT_FALSE(Matmul().Fits(gemm, design));
  design = Gemm(1024, 1, 4096).design;  // gemv, on a product with 64 columns
  EXPECT_FALSE(Matmul().Fits(gemm, design));
  design.algorithm = Algorithm::kAligned;
  design.yblock = design.xblock = 64;
  design.rblock = 32;
  EXPECT_FALSE(Matmul().Fits(Gemm(1024, 1024, 1024), design));  // aligned rows already
  EXPECT_TRUE(Matmul().Fits(Gemm(1024, 1024, 1027), design));

  const KernelPlan matvec = Gemm(1024, 1, 4096);
  design = matvec.design;
  design.split = 2;
  EXPECT_TRUE(Matmul().Fits(matvec, design));
  design.split = 1;
  EXPECT_FALSE(Matmul().Fits(matvec, design));
  design.split = 0;
  design.precision = Precision::kTf32;  // FMA products only
  EXPECT_FALSE(Matmul().Fits(matvec, design));

  const KernelPlan conv = Depthwise();
  design = conv.design;
  EXPECT_TRUE(Matmul().Fits(conv, design));
  design.precision = Precision::kTf32;
  EXPECT_FALSE(Matmul().Fits(conv, design));
  EXPECT_FALSE(Matmul().Fits(gemm, conv.design));          // a GEMM has no direct form
  EXPECT_FALSE(Matmul().Fits(KernelPlan{}, gemm.design));  // no product
  EXPECT_NE(Matmul().Rule().find("splitk (split >= 2 and K >= split * rblock)"), std::string::npos);
}

TEST(MatmulFamilyTest, UnwritableDesignsSayWhy) {
  const KernelPlan gemm = Gemm(1024, 1024, 1024);
  KernelDesign design = gemm.design;
  EXPECT_EQ(Matmul().Unwritable(gemm, design), "");
  design.xblock = 48;
  EXPECT_EQ(Matmul().Unwritable(gemm, design), "xblock 48 is not a power of two");
  design.xblock = 64;
  design.yblock = 48;
  EXPECT_EQ(Matmul().Unwritable(gemm, design),
            "algorithm tiled takes tl.dot tiles, but yblock 48 and rblock 32 are not both powers of two");
  design.yblock = 64;
  design.algorithm = Algorithm::kSplitK;
  design.split = 1;
  EXPECT_EQ(Matmul().Unwritable(gemm, design), "algorithm splitk needs split >= 2, not 1");
  EXPECT_EQ(Matmul().Unwritable(Depthwise(), Depthwise().design), "");  // no tl.dot tiles to divide by
}

TEST(MatmulFamilyTest, FitsResourcesRefusesAnOversizedRing) {
  const KernelPlan gemm = Gemm(1024, 1024, 1024);
  KernelDesign design = gemm.design;
  design.xblock = design.yblock = 128;
  design.rblock = 64;
  design.num_stages = 2;  // 2 x 256 x 64 floats: 128 KiB
  EXPECT_TRUE(Matmul().FitsResources(gemm, design));
  design.num_stages = 5;  // 320 KiB
  EXPECT_FALSE(Matmul().FitsResources(gemm, design));
  const KernelPlan half = Gemm(1024, 1024, 1024, DType::kBFloat16);
  EXPECT_TRUE(Matmul().FitsResources(half, design));  // half the bytes: 160 KiB
  design.num_stages = 2;
  design.xblock = 256;
  design.num_warps = 4;  // 256 x 128 accumulators over 128 threads
  EXPECT_FALSE(Matmul().FitsResources(gemm, design));
}

TEST(MatmulFamilyTest, MovesPerStage) {
  const KernelPlan gemm = Gemm(1024, 1024, 1024);
  EXPECT_EQ(Moves(SearchStage::kAlgorithm, gemm).all_moves, std::vector<std::string>{"algorithm k tiled"});
  EXPECT_EQ(Moves(SearchStage::kMapping, gemm).all_moves.size(), 7U);
  EXPECT_EQ(Moves(SearchStage::kMapping, gemm).all_moves[0], "tile k 128x128");
  // 128x256 and 256x128 need 8 warps for their accumulators: the move brings them (from the default's 4)
  const RecordingSink mapping = Moves(SearchStage::kMapping, gemm);
  for (const RecordingSink::Recorded& move : mapping.moves) {
    EXPECT_TRUE(Matmul().FitsResources(gemm, move.design)) << move.move;
    const bool wide = move.design.xblock * move.design.yblock > 128 * 128;
    EXPECT_EQ(move.design.num_warps, wide ? 8 : gemm.design.num_warps) << move.move;
  }
  EXPECT_EQ(mapping.all_moves[4], "tile k 128x256 8w " + std::to_string(gemm.design.num_stages) + "s");
  EXPECT_EQ(Moves(SearchStage::kTiling, gemm).all_moves,
            (std::vector<std::string>{"tile k block_k 16", "tile k block_k 64", "tile k block_k 128"}));
  const RecordingSink memory = Moves(SearchStage::kMemory, gemm);
  ASSERT_EQ(memory.all_moves.size(), 8U);  // 4 or 8 warps x 2..5 stages but its own, then the precision
  EXPECT_EQ(memory.all_moves.back(), "precision k tf32x3");
  EXPECT_EQ(Moves(SearchStage::kMemory, Gemm(1024, 1024, 1024, DType::kBFloat16)).all_moves.size(), 7U);

  const KernelPlan tiled_matvec = [] {
    KernelPlan kernel = Gemm(1024, 1, 4096);
    kernel.design = Matmul().DefaultDesign(kernel, 1, Precision::kUnset);
    return kernel;
  }();
  EXPECT_EQ(Moves(SearchStage::kAlgorithm, tiled_matvec).all_moves.at(0), "algorithm k gemv");
  const KernelPlan matvec = Gemm(1024, 1, 4096);
  EXPECT_EQ(Moves(SearchStage::kAlgorithm, matvec).all_moves,
            (std::vector<std::string>{"algorithm k tiled", "algorithm k gemv split 0",
                                      "algorithm k gemv split 0", "algorithm k gemv split 2"}));
  EXPECT_EQ(Moves(SearchStage::kMapping, matvec).all_moves.at(0), "rows per program k 8");

  const KernelPlan conv = Depthwise();
  EXPECT_EQ(Moves(SearchStage::kAlgorithm, conv).all_moves, std::vector<std::string>{"algorithm k tiled"});
  EXPECT_TRUE(Moves(SearchStage::kMapping, conv).all_moves.empty());
  EXPECT_EQ(Moves(SearchStage::kTiling, conv).all_moves.at(0), "tile k xblock 512");
  const RecordingSink warps = Moves(SearchStage::kMemory, conv);  // warps alone, no precision to toggle
  EXPECT_EQ(warps.all_moves.size(), 4U);
}

TEST(MatmulFamilyTest, LowersThePlannedProduct) {
  using testing::Meta;
  using testing::Ref;
  const Graph graph = testing::LoadGraph(testing::GraphJson(
      {testing::Input("a", 0, Meta({32, 64})), testing::Input("b", 1, Meta({64, 48}))},
      {testing::NodeJson("out", "aten.mm.default", Json::array({Ref("a"), Ref("b")}), Meta({32, 48}))},
      {"out"}));
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kMatmul);
  const std::map<int, TensorMeta> layouts = testing::DenseStores(graph, kernel);
  const KernelSource source = Matmul().Lower(graph, kernel, plan.memory_before[0], layouts);
  EXPECT_EQ(source.name, kernel.name);
  // one product, folded into acc in the K loop at the design's precision (unset: ieee)
  const kir::Kernel program = Matmul().LowerProgram(graph, kernel, plan.memory_before[0], layouts);
  ASSERT_EQ(program.functions.size(), 1U);
  const std::vector<kir::UpdateSite> products = kir::Products(program.functions[0]);
  ASSERT_EQ(products.size(), 1U) << source.code;
  EXPECT_EQ(products[0].statement.name, "acc");
  EXPECT_EQ(products[0].statement.product->precision, DotPrecision(kernel.design.precision));
  EXPECT_EQ(products[0].loops, std::vector<std::string>{"k0"});
  EXPECT_EQ(kir::Updates(program.functions[0]).size(), 1U) << "no update but the product";
  EXPECT_NE(source.code.find(kir::Print(products[0].statement).substr(8)), std::string::npos) << source.code;
}

TEST(MatmulFamilyTest, ATileThatReducesTheColumnsSpansThem) {
  const Graph graph = testing::Fixture("level2_25_Conv2d_Min_Tanh_Tanh");
  KernelPlan kernel = MakePlan(graph, {}).kernels.at(0);
  ASSERT_EQ(kernel.reductions.size(), 1U);
  kernel.matmul->n = 96;  // as if 96 output channels: a 128-wide tile
  const KernelFamily& family = FamilyOf(KernelKind::kMatmul);
  for (int seed = 0; seed < 3; ++seed) {
    const KernelDesign design = family.DefaultDesign(kernel, seed, Precision::kTf32);
    EXPECT_EQ(design.yblock, 128) << seed;
    EXPECT_TRUE(family.Fits(kernel, design)) << seed;
    EXPECT_TRUE(family.FitsResources(kernel, design)) << seed;
  }
  KernelDesign narrow = family.DefaultDesign(kernel, 0, Precision::kTf32);
  narrow.yblock = 64;
  EXPECT_FALSE(family.Fits(kernel, narrow));
  EXPECT_NE(family.Unwritable(kernel, narrow).find("one tl.dot tile must span them"), std::string::npos);
  KernelDesign direct = narrow;
  direct.algorithm = Algorithm::kDirect;
  EXPECT_FALSE(family.Fits(kernel, direct));
  EXPECT_FALSE(family.Unwritable(kernel, direct).empty());
  kernel.reductions.clear();
  EXPECT_TRUE(family.Unwritable(kernel, narrow).empty()) << "a product alone takes any tile";
}

}  // namespace
}  // namespace egg::expert
