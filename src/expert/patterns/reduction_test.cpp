#include "expert/patterns/reduction.h"

#include <gtest/gtest.h>

#include "expert/ir/test_graphs.h"
#include "expert/ir/test_nodes.h"

namespace egg::expert {
namespace {

using testing::Fixture;
using testing::NodeWithOp;

TEST(ReductionPatternTest, SoftmaxRowsAreTheKeptDimensions) {
  const Graph graph = Fixture("level1_23_Softmax");  // x [48, 64], softmax over dim 1
  const auto amax = ParseReduction(graph, NodeWithOp(graph, "aten.amax.default"));
  ASSERT_TRUE(amax);
  EXPECT_EQ(amax->kind, ReductionKind::kMax);
  EXPECT_EQ(amax->dims, std::vector<int64_t>{1});
  EXPECT_EQ(amax->Rows(), 48);
  EXPECT_EQ(amax->Length(), 64);
  const auto sum = ParseReduction(graph, NodeWithOp(graph, "aten.sum.dim_IntList"));
  ASSERT_TRUE(sum);
  EXPECT_EQ(sum->kind, ReductionKind::kSum);
  EXPECT_EQ(sum->input, NodeWithOp(graph, "aten.exp.default").value);
}

TEST(ReductionPatternTest, OnlinePairsFindSoftmaxsMaxAndSumOfExponentials) {
  const Graph graph = Fixture("level1_23_Softmax");
  const std::vector<ReductionSpec> specs = {
      *ParseReduction(graph, NodeWithOp(graph, "aten.amax.default")),
      *ParseReduction(graph, NodeWithOp(graph, "aten.sum.dim_IntList"))};
  EXPECT_EQ(OnlinePairs(graph, specs), (std::vector<std::pair<size_t, size_t>>{{0, 1}}));
  EXPECT_TRUE(OnlinePairs(graph, {specs[1], specs[0]}).empty()) << "the max must come first";
  EXPECT_TRUE(OnlinePairs(graph, {specs[1]}).empty());
}

TEST(ReductionPatternTest, OtherOpsAreNoReductions) {
  const Graph graph = Fixture("level1_23_Softmax");
  EXPECT_FALSE(ParseReduction(graph, NodeWithOp(graph, "aten.exp.default")));
}

}  // namespace
}  // namespace egg::expert
