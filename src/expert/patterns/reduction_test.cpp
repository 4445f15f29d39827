#include "expert/patterns/reduction.h"

#include <gtest/gtest.h>

#include "expert/ir/test_graphs.h"
#include "expert/ir/test_nodes.h"

namespace egg::expert {
namespace {

using testing::Fixture;
using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::NodeWithOp;
using testing::Ref;
using testing::ValueNamed;

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

// x [4, 16] through aten.max.dim (or min) over dim 1, the graph returning `read` of its values and indices (a
// capture has no getitem for an element nothing reads).
Graph MaxOverDim(const std::string& op, const std::vector<std::string>& read) {
  std::vector<Json> nodes = {
      NodeJson("max", op, {Ref("x"), 1}, Json::array({Meta({4}), Meta({4}, "int64")}))};
  for (const std::string& name : read) {
    nodes.push_back(name == "values" ? NodeJson("values", "getitem", {Ref("max"), 0}, Meta({4}))
                                     : NodeJson("indices", "getitem", {Ref("max"), 1}, Meta({4}, "int64")));
  }
  return LoadGraph(GraphJson({Input("x", 0, Meta({4, 16}))}, nodes, read));
}

TEST(ReductionPatternTest, AMaxOverADimWhoseIndexNobodyReadsIsAPlainMax) {
  Graph graph = MaxOverDim("aten.max.dim", {"values", "indices"});
  auto spec = ParseReduction(graph, NodeWithOp(graph, "aten.max.dim"));
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->kind, ReductionKind::kMaxWithIndex);
  EXPECT_EQ(spec->outputs, (std::vector<int>{ValueNamed(graph, "values"), ValueNamed(graph, "indices")}));
  graph = MaxOverDim("aten.max.dim", {"values"});
  spec = ParseReduction(graph, NodeWithOp(graph, "aten.max.dim"));
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->kind, ReductionKind::kMax) << "x.max(1)[0]: no (value, index) pairs";
  EXPECT_EQ(spec->outputs, std::vector<int>{ValueNamed(graph, "values")});
  graph = MaxOverDim("aten.min.dim", {"values"});
  spec = ParseReduction(graph, NodeWithOp(graph, "aten.min.dim"));
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->kind, ReductionKind::kMin);
  graph = MaxOverDim("aten.max.dim", {"indices"});
  spec = ParseReduction(graph, NodeWithOp(graph, "aten.max.dim"));
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->kind, ReductionKind::kMaxWithIndex) << "only the index read: still the pair";
  EXPECT_EQ(spec->outputs, (std::vector<int>{-1, ValueNamed(graph, "indices")}));
}

TEST(ReductionPatternTest, OtherOpsAreNoReductions) {
  const Graph graph = Fixture("level1_23_Softmax");
  EXPECT_FALSE(ParseReduction(graph, NodeWithOp(graph, "aten.exp.default")));
}

}  // namespace
}  // namespace egg::expert
