#include "expert/families/lowering_probe.h"

#include <gtest/gtest.h>

#include "expert/codegen/test_kernels.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::DenseStores;

TEST(LoweringProbeTest, APlannedSoftmaxLowersAndReadsOnlyItsInput) {
  const Graph graph = testing::Fixture("level1_23_Softmax");
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const LoweringProbe probe =
      ProbeLowering(graph, plan.kernels[0], plan.memory_before[0], DenseStores(graph, plan.kernels[0]));
  EXPECT_TRUE(probe.lowers) << probe.problem;
  EXPECT_EQ(probe.loaded, std::set<int>{graph.Inputs()[0]});
}

TEST(LoweringProbeTest, ASplitReductionReadsItsInputsAndNotItsScratch) {
  const Graph graph = testing::Fixture("level1_94_MSELoss");
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  KernelPlan kernel = plan.kernels[0];
  kernel.design.algorithm = Algorithm::kSplit;
  kernel.design.split = 4;
  kernel.design.rblock = 256;
  const LoweringProbe probe = ProbeLowering(graph, kernel, plan.memory_before[0], DenseStores(graph, kernel));
  EXPECT_TRUE(probe.lowers) << probe.problem;
  EXPECT_EQ(probe.loaded, (std::set<int>{graph.Inputs()[0], graph.Inputs()[1]}));
}

TEST(LoweringProbeTest, AKernelReadingWhatIsNotInMemoryDoesNotLowerAndSaysWhy) {
  const Graph graph = testing::Fixture("level1_3_Batched_matrix_multiplication");
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const LoweringProbe probe = ProbeLowering(graph, plan.kernels[0], {}, DenseStores(graph, plan.kernels[0]));
  EXPECT_FALSE(probe.lowers);
  EXPECT_FALSE(probe.problem.empty());
}

TEST(LoweringProbeTest, AMatrixProductStagesOneTileOfEachOperand) {
  const Graph graph = testing::Fixture("level1_3_Batched_matrix_multiplication");
  const Plan plan = MakePlan(graph, {});
  const LoweringProbe probe =
      ProbeLowering(graph, plan.kernels[0], plan.memory_before[0], DenseStores(graph, plan.kernels[0]));
  ASSERT_TRUE(probe.lowers) << probe.problem;
  EXPECT_EQ(probe.a_tile_loads, 1);
  EXPECT_EQ(probe.b_tile_loads, 1);
  EXPECT_EQ(probe.loaded.size(), 2U);
}

}  // namespace
}  // namespace egg::expert
