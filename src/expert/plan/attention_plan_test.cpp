// Attention planned as one flash kernel, or unfused on request or when its scores are read.
#include <gtest/gtest.h>

#include <algorithm>

#include "expert/codegen/candidate_file.h"
#include "expert/design/candidate.h"
#include "expert/design/defaults.h"
#include "expert/design/design_space.h"
#include "expert/design/legality.h"
#include "expert/ir/test_graphs.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::Fixture;
using testing::FixtureJson;
using testing::LoadGraph;
using testing::Scaled;

const KernelPlan* AttentionKernel(const Plan& plan) {
  for (const KernelPlan& kernel : plan.kernels) {
    if (kernel.kind == KernelKind::kAttention) {
      return &kernel;
    }
  }
  return nullptr;
}

bool HasKind(const Plan& plan, KernelKind kind) {
  return std::any_of(plan.kernels.begin(), plan.kernels.end(),
                     [&](const KernelPlan& kernel) { return kernel.kind == kind; });
}

const Node& NodeNamed(const Graph& graph, const std::string& name) {
  return *std::find_if(graph.nodes.begin(), graph.nodes.end(),
                       [&](const Node& node) { return node.name == name; });
}

TEST(AttentionPlanTest, AttentionIsOneFlashKernel) {
  // SDPA (1_97 reduced: 2 x 2 heads x 64 x 32): the scale split onto Q and K, _safe_softmax's guard
  const Graph sdpa = Fixture("level1_97_ScaledDotProductAttention");
  const Plan plan = MakePlan(sdpa, {});
  const KernelPlan* flash = AttentionKernel(plan);
  ASSERT_NE(flash, nullptr);
  EXPECT_FALSE(HasKind(plan, KernelKind::kReduction));
  EXPECT_FALSE(HasKind(plan, KernelKind::kMatmul));
  const AttentionSpec& at = *flash->attention;
  EXPECT_TRUE(at.safe);
  EXPECT_EQ(at.batch, 4);
  EXPECT_EQ(at.lq, 64);
  EXPECT_EQ(at.lk, 64);
  EXPECT_EQ(at.d, 32);
  EXPECT_EQ(at.dv, 32);
  const KernelDesign seed = DefaultDesign(*flash, 0);
  EXPECT_EQ(seed.algorithm, Algorithm::kFlash);
  EXPECT_EQ(seed.precision, Precision::kTf32x3);  // never ieee
  EXPECT_TRUE(DesignFits(*flash, seed));
  KernelDesign ieee = seed;
  ieee.precision = Precision::kIeee;
  EXPECT_FALSE(DesignFits(*flash, ieee));
  EXPECT_EQ(plan.unfused_attention, 0);
  KernelPlan wide = *flash;
  wide.attention->d = 256;  // K and V tiles of 256 columns: fewer keys a step, one stage
  EXPECT_EQ(DefaultDesign(wide, 0).yblock, 32);
  EXPECT_EQ(DefaultDesign(wide, 0).num_stages, 1);

  // MinGPT (3_43, reduced): the scale on the scores, masked_fill(bias == 0, -inf), plain softmax
  const Plan gpt = MakePlan(Fixture("level3_43_MinGPTCausalAttention"), {});
  const KernelPlan* causal = AttentionKernel(gpt);
  ASSERT_NE(causal, nullptr);
  EXPECT_FALSE(causal->attention->safe);
  EXPECT_GE(causal->attention->mask, 0);  // masked_fill(bias == 0, -inf): masked key blocks are skipped
  EXPECT_TRUE(causal->attention->masked_when);
  EXPECT_EQ(at.mask, -1);
  EXPECT_EQ(causal->attention->d, 16);
  EXPECT_FALSE(HasKind(gpt, KernelKind::kReduction));
}

TEST(AttentionPlanTest, AttentionUnfusedOnRequestOrWhenItsScoresAreRead) {
  const Graph sdpa = Fixture("level1_97_ScaledDotProductAttention");
  PlanOptions options;
  options.fuse_attention = false;
  const Plan unfused = MakePlan(sdpa, options);
  EXPECT_EQ(AttentionKernel(unfused), nullptr);
  EXPECT_TRUE(HasKind(unfused, KernelKind::kReduction));
  EXPECT_EQ(unfused.unfused_attention, 1);
  // the switch is in the design record only when false, and reads back
  CandidateDesign design;
  design.plan = options;
  EXPECT_EQ(design.ToJson()["plan"]["fuse_attention"], false);
  EXPECT_FALSE(CandidateDesign::FromJson(design.ToJson()).plan.fuse_attention);
  EXPECT_FALSE(CandidateDesign{}.ToJson()["plan"].contains("fuse_attention"));
  const Candidate seed1 = GenerateCandidate(sdpa, "", "sdpa", SeedDesign(1, 1e-4).design);
  EXPECT_FALSE(seed1.design.plan.fuse_attention);
  const Candidate seed0 = GenerateCandidate(sdpa, "", "sdpa", SeedDesign(0, 1e-2).design);
  ASSERT_TRUE(seed0.source.has_value()) << seed0.problem;
  EXPECT_EQ(Count(*seed0.source, "tl.dot("), 2U);
  EXPECT_EQ(Count(*seed0.source, "input_precision=\"tf32\""), 2U);  // the tolerance's products
  const Candidate softmax =
      GenerateCandidate(Fixture("level1_23_Softmax"), "", "softmax", SeedDesign(1, 1e-4).design);
  EXPECT_TRUE(softmax.design.plan.fuse_attention);  // no attention: nothing recorded

  // the scores are also a graph output: they must be stored, no flash kernel
  Json ir = FixtureJson("level1_97_ScaledDotProductAttention");
  ir["outputs"].push_back(Json{{"node", "bmm"}});
  EXPECT_EQ(AttentionKernel(MakePlan(LoadGraph(ir), {})), nullptr);
  // a head dim over 256 does not fit the flash kernel's registers
  const Graph wide = LoadGraph(Scaled(FixtureJson("level1_97_ScaledDotProductAttention"), 32, 512));
  EXPECT_FALSE(ParseAttention(wide, NodeNamed(wide, "bmm_1")));
  EXPECT_TRUE(ParseAttention(sdpa, NodeNamed(sdpa, "bmm_1")));
}

TEST(AttentionPlanTest, AttentionDesignMovesSwitchFlashAndUnfused) {
  const Graph sdpa = Fixture("level1_97_ScaledDotProductAttention");
  const Candidate flash = GenerateCandidate(sdpa, "", "sdpa", SeedDesign(0, 1e-4).design);
  ASSERT_TRUE(flash.source.has_value()) << flash.problem;
  const auto algorithm = StageMoves(sdpa, "stage1.algorithm", flash, "", 8);
  ASSERT_FALSE(algorithm.empty());
  EXPECT_FALSE(algorithm.front().design.plan.fuse_attention);
  const Candidate unfused = GenerateCandidate(sdpa, "", "sdpa", algorithm.front().design);
  ASSERT_TRUE(unfused.source.has_value()) << unfused.problem;
  EXPECT_EQ(AttentionKernel(unfused.plan), nullptr);
  const auto back = StageMoves(sdpa, "stage1.algorithm", unfused, "", 8);
  EXPECT_TRUE(std::any_of(back.begin(), back.end(), [](const DesignMove& move) {
    return move.design.plan.fuse_attention && move.move == "algorithm attention flash";
  }));
  const std::string name = AttentionKernel(flash.plan)->name;
  for (const std::string stage : {"stage2.mapping", "stage2.tiling", "stage2.memory"}) {
    const auto moves = StageMoves(sdpa, stage, flash, name, 8);
    EXPECT_FALSE(moves.empty()) << stage;
    for (const DesignMove& move : moves) {
      const KernelDesign& design = move.design.kernels.at(name);
      EXPECT_EQ(design.algorithm, Algorithm::kFlash) << move.move;
      EXPECT_TRUE(GenerateCandidate(sdpa, "", "sdpa", move.design).source.has_value()) << move.move;
    }
  }
}

}  // namespace
}  // namespace egg::expert
