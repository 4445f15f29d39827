// Fusion: which roots share a kernel under each fusion option, what a fused kernel leaves in memory, and the
// kernels' order in the plan's steps.
#include <gtest/gtest.h>

#include <algorithm>

#include "expert/ir/test_graphs.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

using testing::Fixture;

size_t KernelsOfKind(const Plan& plan, KernelKind kind) {
  return static_cast<size_t>(std::count_if(plan.kernels.begin(), plan.kernels.end(),
                                           [&](const KernelPlan& kernel) { return kernel.kind == kind; }));
}

TEST(FusionTest, EpiloguesJoinTheirProducerOnlyWhenAllowed) {
  const Graph graph = Fixture("level2_12_Gemm_Multiply_LeakyReLU");
  const Plan fused = MakePlan(graph, {});
  ASSERT_EQ(fused.kernels.size(), 1U);
  EXPECT_EQ(fused.kernels[0].kind, KernelKind::kMatmul);
  EXPECT_GT(fused.kernels[0].roots.size(), 1U) << "the product and its multiply and leaky ReLU";
  EXPECT_EQ(fused.kernels[0].stores.size(), 1U) << "only the output reaches memory";

  PlanOptions options;
  options.fuse_epilogues = false;
  const Plan apart = MakePlan(graph, options);
  EXPECT_GT(apart.kernels.size(), fused.kernels.size());
  EXPECT_EQ(KernelsOfKind(apart, KernelKind::kMatmul), 1U);
  EXPECT_EQ(apart.kernels[0].kind, KernelKind::kMatmul) << "the producer comes first";
  EXPECT_EQ(apart.kernels[0].roots.size(), 1U) << "the product alone";
  EXPECT_EQ(apart.memory.size(), fused.memory.size() + 1) << "the product is stored for its epilogue";
  const auto stored = [&](const Plan& plan, const std::string& name) {
    return std::any_of(plan.memory.begin(), plan.memory.end(),
                       [&](int value) { return graph.values[static_cast<size_t>(value)].name == name; });
  };
  EXPECT_FALSE(stored(fused, "addmm")) << "read in registers by the fused epilogue";
  EXPECT_TRUE(stored(apart, "addmm"));
  EXPECT_TRUE(stored(fused, "x") && stored(fused, "p_gemm_weight")) << "inputs and parameters";
  EXPECT_TRUE(apart.extern_ops.empty());
}

TEST(FusionTest, SameRowReductionsShareAKernelOnlyWhenAllowed) {
  const Graph graph = Fixture("level1_23_Softmax");
  const Plan fused = MakePlan(graph, {});
  ASSERT_EQ(fused.kernels.size(), 1U);
  EXPECT_EQ(fused.kernels[0].reductions.size(), 2U);

  PlanOptions options;
  options.fuse_reductions = false;
  const Plan apart = MakePlan(graph, options);
  EXPECT_GE(apart.kernels.size(), 2U);
  for (const KernelPlan& kernel : apart.kernels) {
    EXPECT_LE(kernel.reductions.size(), 1U) << kernel.name;
  }
  EXPECT_FALSE(apart.kernels[0].online_candidate) << "online softmax needs the max and the sum together";
}

TEST(FusionTest, StepsRunEveryKernelOnceInOrderAndMemoryBeforeGrowsWithThem) {
  const Graph graph = Fixture("level1_35_GroupNorm_");
  PlanOptions options;
  options.fuse_epilogues = false;
  options.fuse_reductions = false;
  const Plan plan = MakePlan(graph, options);
  ASSERT_EQ(plan.memory_before.size(), plan.kernels.size());
  int expected = 0;
  for (const Step& step : plan.steps) {
    if (step.kind == Step::Kind::kKernel) {
      EXPECT_EQ(step.index, expected++);
    }
  }
  EXPECT_EQ(expected, static_cast<int>(plan.kernels.size()));
  for (size_t k = 1; k < plan.kernels.size(); ++k) {
    EXPECT_GE(plan.memory_before[k].size(), plan.memory_before[k - 1].size()) << k;
  }
}

}  // namespace
}  // namespace egg::expert
