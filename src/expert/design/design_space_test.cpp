// The expert backend's design spaces: seeds per tolerance, stage moves that change one decision and are
// pruned, the CUDA-graph move, matmul stage moves and repairs that get more conservative. Candidates are
// generated through codegen (tests may include it; design/ itself asks codegen only through
// lowering_probe.h).
#include "expert/design/design_space.h"

#include <gtest/gtest.h>

#include <set>

#include "expert/codegen/candidate_file.h"
#include "expert/design/candidate.h"
#include "expert/design/legality.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::BigSoftmax;
using testing::FixtureJson;
using testing::LoadGraph;
using testing::Scaled;
using testing::Retyped;

TEST(DesignSpaceTest, StageMovesChangeOneDecisionAndArePruned) {
  const Graph graph = BigSoftmax();
  const Candidate incumbent = GenerateCandidate(graph, "", "softmax", SeedDesign(0, 1e-2).design);
  ASSERT_TRUE(incumbent.source);
  const KernelPlan& kernel = incumbent.plan.kernels[0];
  for (const std::string stage : {"stage1.algorithm", "stage2.mapping", "stage2.tiling", "stage2.memory"}) {
    const auto moves = StageMoves(graph, stage, incumbent, "", 5);
    EXPECT_FALSE(moves.empty()) << stage;
    EXPECT_LE(moves.size(), 5U);
    std::set<std::string> designs;
    for (const DesignMove& move : moves) {
      EXPECT_TRUE(designs.insert(move.design.ToJson().dump()).second) << "duplicate move in " << stage;
      EXPECT_NE(move.design.ToJson(), incumbent.design.ToJson());
      const auto found = move.design.kernels.find(kernel.name);
      if (found != move.design.kernels.end()) {
        EXPECT_TRUE(WorthMeasuring(kernel, found->second)) << move.move;
      }
    }
  }
  for (const DesignMove& move : StageMoves(graph, "stage2.tiling", incumbent, "", 3)) {
    int changed = 0;
    for (const auto& [name, design] : move.design.kernels) {
      const KernelDesign& before = incumbent.design.kernels.at(name);
      if (design == before) {
        continue;
      }
      ++changed;
      EXPECT_EQ(design.algorithm, before.algorithm) << move.move;
      EXPECT_TRUE(design.rblock != before.rblock || design.xblock != before.xblock) << move.move;
    }
    EXPECT_EQ(changed, 1) << move.move;
  }
}

TEST(DesignSpaceTest, PruningRejectsTilesThatSpillOrIdle) {
  const Graph graph = BigSoftmax();
  const Candidate candidate = GenerateCandidate(graph, "", "softmax", {});
  const KernelPlan& kernel = candidate.plan.kernels[0];
  KernelDesign design = kernel.design;
  design.rblock = 16384;
  design.xblock = 16;
  design.num_warps = 1;  // 8192 elements per thread
  EXPECT_FALSE(WorthMeasuring(kernel, design));
  design = kernel.design;
  design.rblock = 16;
  design.xblock = 1;
  design.num_warps = 16;  // 512 threads for 16 elements
  EXPECT_FALSE(WorthMeasuring(kernel, design));
}

// x @ W.T + b with its epilogue, M scaled from 48 to 512 so that every seed tile fits inside it.
Graph BigGemm() { return LoadGraph(Scaled(FixtureJson("level2_12_Gemm_Multiply_LeakyReLU"), 48, 512)); }

std::string MatmulPrecision(const Candidate& candidate) {
  for (const KernelPlan& kernel : candidate.plan.kernels) {
    if (kernel.kind == KernelKind::kMatmul) {
      return NameText(kernel.design.precision);
    }
  }
  return "none";
}

TEST(DesignSpaceTest, MatmulProductsTakeTheFastestPrecisionTheToleranceAllows) {
  const Graph graph = BigGemm();
  const Candidate loose = GenerateCandidate(graph, "", "gemm", SeedDesign(0, 1e-2).design);
  ASSERT_TRUE(loose.source) << loose.problem;
  EXPECT_EQ(MatmulPrecision(loose), "tf32");
  EXPECT_NE(loose.source->find("input_precision=\"tf32\""), std::string::npos);
  EXPECT_EQ(MatmulPrecision(GenerateCandidate(graph, "", "gemm", SeedDesign(2, 1e-3).design)), "tf32");
  // seed 1 keeps ieee products at any tolerance; at KernelBench's 1e-4 the others take tf32x3 (float32
  // accuracy on the tensor cores), each in the tile measured fastest for its products
  EXPECT_EQ(MatmulPrecision(GenerateCandidate(graph, "", "gemm", SeedDesign(1, 1e-2).design)), "ieee");
  for (int seed = 0; seed < kSeedFamilies; ++seed) {
    const Candidate exact = GenerateCandidate(graph, "", "gemm", SeedDesign(seed, 1e-4).design);
    ASSERT_TRUE(exact.source) << exact.problem;
    EXPECT_EQ(MatmulPrecision(exact), seed == 1 ? "ieee" : "tf32x3") << seed;
    const KernelDesign& tile = exact.plan.kernels.at(0).design;
    if (seed == 0) {
      EXPECT_EQ(std::make_tuple(tile.xblock, tile.yblock, tile.num_warps, tile.num_stages),
                std::make_tuple(int64_t{128}, int64_t{64}, 4, 4));
      EXPECT_NE(exact.source->find("input_precision=\"tf32x3\""), std::string::npos);
    } else if (seed == 1) {
      EXPECT_EQ(std::make_tuple(tile.xblock, tile.yblock, tile.num_warps),
                std::make_tuple(int64_t{64}, int64_t{64}, 4));
    }
  }
  // A tf32 candidate that mismatches is repaired first with ieee products, its tiles kept.
  const auto repairs = RepairMoves(loose, "mismatch", "not allclose");
  ASSERT_FALSE(repairs.empty());
  EXPECT_EQ(repairs[0].move, "ieee products");
  const Candidate exact = GenerateCandidate(graph, "", "gemm", repairs[0].design);
  EXPECT_EQ(MatmulPrecision(exact), "ieee");
  EXPECT_EQ(exact.plan.kernels.at(0).design.xblock, loose.plan.kernels.at(0).design.xblock);
  for (const DesignMove& move : RepairMoves(loose, "compile_error", "OutOfResources: shared memory")) {
    EXPECT_NE(move.move, "ieee products");
  }
}

TEST(DesignSpaceTest, ManyLaunchesMakeACudaGraphTheFirstMemoryMove) {
  // 38_LSTMBidirectional reduced: 6 layers x 2 directions of projection and time-loop launches, then a
  // linear layer.
  const Graph graph = testing::Fixture("level3_38_LSTMBidirectional");
  const Candidate incumbent = GenerateCandidate(graph, "", "lstm", SeedDesign(0, 1e-2).design);
  ASSERT_TRUE(incumbent.source) << incumbent.problem;
  EXPECT_EQ(incumbent.source->find("_egg_graphed"), std::string::npos);  // never without the move
  const auto moves = StageMoves(graph, "stage2.memory", incumbent, "", 5);
  ASSERT_FALSE(moves.empty());
  EXPECT_EQ(moves.front().move, "cuda graph");
  EXPECT_NE(moves.front().description.find("25 launches"), std::string::npos) << moves.front().description;
  EXPECT_TRUE(moves.front().design.plan.cuda_graph);
  EXPECT_EQ(moves.front().design.kernels, incumbent.design.kernels);  // nothing else changes

  const Candidate graphed = GenerateCandidate(graph, "", "lstm", moves.front().design);
  ASSERT_TRUE(graphed.source) << graphed.problem;
  const std::string& source = *graphed.source;
  EXPECT_NE(source.find("        return _egg_graphed(self, self._egg_forward, (x, h0, c0,))\n\n"
                        "    def _egg_forward(self, x, h0, c0):\n"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("with torch.cuda.graph(graph):"), std::string::npos);
  EXPECT_TRUE(graphed.design.plan.cuda_graph);  // the design record says so, and regenerates the file
  EXPECT_EQ(*GenerateCandidate(graph, "", "lstm", graphed.design).source, source);
  for (const DesignMove& move : StageMoves(graph, "stage2.memory", graphed, "", 20)) {
    EXPECT_NE(move.move, "cuda graph");
  }
  // A graphed candidate that fails is first repaired without the graph, its kernels kept; the other repairs
  // follow.
  const auto repairs =
      RepairMoves(graphed, "runtime_error", "operation not permitted when stream is capturing");
  ASSERT_GE(repairs.size(), 3U);
  EXPECT_EQ(repairs.front().move, "no cuda graph");
  EXPECT_FALSE(repairs.front().design.plan.cuda_graph);
  EXPECT_EQ(repairs.front().design.kernels, graphed.design.kernels);
  EXPECT_EQ(repairs.back().move, "unfused streaming");
  // A forward with few launches keeps them.
  const Graph softmax = BigSoftmax();
  const Candidate single = GenerateCandidate(softmax, "", "softmax", SeedDesign(0, 1e-2).design);
  for (const DesignMove& move : StageMoves(softmax, "stage2.memory", single, "", 20)) {
    EXPECT_NE(move.move, "cuda graph");
  }
}

TEST(DesignSpaceTest, MatmulStagesMoveTilesPipelineDepthAndPrecision) {
  const Graph graph = BigGemm();
  const Candidate incumbent = GenerateCandidate(graph, "", "gemm", SeedDesign(0, 1e-4).design);
  ASSERT_TRUE(incumbent.source) << incumbent.problem;
  const KernelPlan& kernel = incumbent.plan.kernels.at(0);
  ASSERT_EQ(kernel.kind, KernelKind::kMatmul);
  const KernelDesign& before = kernel.design;
  std::set<Precision> precisions;
  int pipelined = 0;
  for (const std::string stage : {"stage2.mapping", "stage2.tiling", "stage2.memory"}) {
    const auto moves = StageMoves(graph, stage, incumbent, "", 20);
    EXPECT_FALSE(moves.empty()) << stage;
    for (const DesignMove& move : moves) {
      const KernelDesign& after = move.design.kernels.at(kernel.name);
      EXPECT_TRUE(WorthMeasuring(kernel, after)) << move.move;
      EXPECT_FALSE(after == before) << move.move;
      if (stage == "stage2.mapping") {  // output tile only
        EXPECT_EQ(after.rblock, before.rblock) << move.move;
        EXPECT_LE(after.xblock, 512) << move.move;
      } else if (stage == "stage2.tiling") {  // K step only
        EXPECT_EQ(after.xblock, before.xblock) << move.move;
        EXPECT_EQ(after.yblock, before.yblock) << move.move;
        EXPECT_NE(after.rblock, before.rblock) << move.move;
      } else {
        EXPECT_EQ(after.xblock, before.xblock) << move.move;
        pipelined += after.num_stages > 1 ? 1 : 0;
        precisions.insert(after.precision);
      }
    }
  }
  EXPECT_GT(pipelined, 0);
  EXPECT_EQ(precisions, (std::set<Precision>{Precision::kIeee, Precision::kTf32x3}));
  // Pruned before measuring: a 256x256 accumulator over 128 threads (512 registers each), and an operand ring
  // of 5 x (256 + 128) x 128 floats (960 KB of shared memory).
  KernelDesign design = before;
  design.xblock = 256;
  design.yblock = 256;
  design.num_warps = 4;
  EXPECT_FALSE(WorthMeasuring(kernel, design));
  design = before;
  design.xblock = 256;
  design.yblock = 128;
  design.rblock = 128;
  design.num_warps = 8;
  design.num_stages = 5;
  EXPECT_FALSE(WorthMeasuring(kernel, design));
}

TEST(DesignSpaceTest, HalfProductsTakeWideTilesStagedInHalfAndNoPrecisionMoves) {
  const Graph graph = LoadGraph(
      Retyped(Scaled(Scaled(FixtureJson("level2_12_Gemm_Multiply_LeakyReLU"), 48, 256), 64, 512), "float32",
              "bfloat16"));  // [256 x 512] @ [512 x 512] in bf16
  const Candidate incumbent = GenerateCandidate(graph, "", "gemm", SeedDesign(0, 1e-2).design);
  ASSERT_TRUE(incumbent.source) << incumbent.problem;
  const KernelPlan& kernel = incumbent.plan.kernels.at(0);
  ASSERT_EQ(kernel.kind, KernelKind::kMatmul);
  ASSERT_EQ(kernel.matmul->dtype, DType::kBFloat16);
  // 128x256x64 of 8 warps: three stages of bf16 operand tiles (147 KB) fit, where float32 ones would not
  EXPECT_EQ(std::make_tuple(kernel.design.xblock, kernel.design.yblock, kernel.design.rblock,
                            kernel.design.num_warps, kernel.design.num_stages),
            std::make_tuple(int64_t{128}, int64_t{256}, int64_t{64}, 8, 3));
  EXPECT_TRUE(WorthMeasuring(kernel, kernel.design));
  // both operands loaded in bf16 and handed to tl.dot as loaded
  const std::string& source = *incumbent.source;
  const std::string loop = source.substr(source.find("for k0 in"), source.find("tl.dot(") - source.find("for k0 in"));
  EXPECT_EQ(testing::Count(loop, ", other=0.0)"), 2U) << loop;
  EXPECT_EQ(loop.find("float32"), std::string::npos) << loop;
  for (const DesignMove& move : StageMoves(graph, "stage2.memory", incumbent, "", 20)) {
    EXPECT_EQ(move.design.kernels.at(kernel.name).precision, kernel.design.precision) << move.move;
  }
}

TEST(DesignSpaceTest, RepairsGetMoreConservative) {
  const Graph graph = BigSoftmax();
  const Candidate failing = GenerateCandidate(graph, "", "softmax", {});
  const auto moves =
      RepairMoves(failing, "compile_error", "triton.runtime.errors.OutOfResources: shared memory");
  ASSERT_EQ(moves.size(), 3U);
  EXPECT_EQ(moves[0].move, "halve tiles");
  EXPECT_FALSE(moves.back().design.plan.fuse_epilogues);
  EXPECT_EQ(RepairMoves(failing, "mismatch", "not allclose").size(), 2U);
}

TEST(DesignSpaceTest, AFoldedSumIsUnfoldedFirstOnAMismatchAndTheAlgorithmStageMovesBetweenThem) {
  const Graph graph = testing::Fixture("level2_14_Gemm_Divide_Sum_Scaling");
  const Candidate folded = GenerateCandidate(graph, "", "sum", SeedDesign(0, 1e-4).design);
  ASSERT_TRUE(folded.source) << folded.problem;
  ASSERT_NE(folded.graph, nullptr);
  EXPECT_TRUE(folded.foldable);
  EXPECT_GT(folded.graph->nodes.size(), graph.nodes.size()) << "the plan indexes the rewritten graph";
  const auto repairs = RepairMoves(folded, "mismatch", "not allclose");
  ASSERT_FALSE(repairs.empty());
  EXPECT_EQ(repairs[0].move, "unfold summed products");
  EXPECT_FALSE(repairs[0].design.plan.fold_summed_products);
  EXPECT_NE(RepairMoves(folded, "compile_error", "OutOfResources").front().move, "unfold summed products");

  const Candidate whole = GenerateCandidate(graph, "", "sum", SeedDesign(1, 1e-4).design);
  ASSERT_TRUE(whole.source) << whole.problem;
  EXPECT_EQ(whole.graph, nullptr);
  EXPECT_EQ(whole.design.ToJson()["plan"]["fold_summed_products"], false);
  const auto has = [&graph](const Candidate& from, const std::string& name) {
    for (const DesignMove& move : StageMoves(graph, "stage1.algorithm", from, "", 30)) {
      if (move.move == name) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(has(whole, "fold summed products"));
  EXPECT_TRUE(has(folded, "unfold summed products"));
  const Candidate softmax = GenerateCandidate(BigSoftmax(), "", "softmax", SeedDesign(1, 1e-4).design);
  EXPECT_FALSE(softmax.foldable);
  EXPECT_FALSE(softmax.design.ToJson()["plan"].contains("fold_summed_products"))
      << "said only where it applies";
}

TEST(DesignSpaceTest, AProductsColumnReductionMovesBetweenItsTileAndAKernelOfItsOwn) {
  const Graph graph = testing::Fixture("level2_25_Conv2d_Min_Tanh_Tanh");  // conv 16->8, min over channels
  const Candidate fused = GenerateCandidate(graph, "", "min", SeedDesign(0, 1e-4).design);
  ASSERT_TRUE(fused.source) << fused.problem;
  ASSERT_EQ(fused.plan.kernels.size(), 1U);
  EXPECT_FALSE(fused.design.ToJson()["plan"].contains("reduce_in_products")) << "recorded only when false";
  const Candidate apart = GenerateCandidate(graph, "", "min", SeedDesign(1, 1e-4).design);
  ASSERT_TRUE(apart.source) << apart.problem;
  EXPECT_EQ(apart.plan.kernels.size(), 2U);
  EXPECT_TRUE(apart.plan.products_reduced_apart);
  EXPECT_EQ(apart.design.ToJson()["plan"]["reduce_in_products"], false);
  const auto moves = [&graph](const Candidate& from) {
    std::set<std::string> names;
    for (const DesignMove& move : StageMoves(graph, "stage1.algorithm", from, "", 30)) {
      names.insert(move.move);
    }
    return names;
  };
  EXPECT_EQ(moves(fused).count("reduce products apart"), 1U);
  EXPECT_EQ(moves(apart).count("reduce in products"), 1U);
  const Candidate softmax = GenerateCandidate(BigSoftmax(), "", "softmax", SeedDesign(1, 1e-4).design);
  EXPECT_FALSE(softmax.design.ToJson()["plan"].contains("reduce_in_products"))
      << "said only where it applies";
  EXPECT_EQ(moves(softmax).count("reduce in products"), 0U);
}

}  // namespace
}  // namespace egg::expert
