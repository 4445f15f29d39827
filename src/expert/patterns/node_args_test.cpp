// Reading a node's arguments: negative dims, positional-or-keyword ints and bools with their fallbacks, the
// getitem users of a tuple, short per-dim lists and a node's tensor input.
#include "expert/patterns/node_args.h"

#include <gtest/gtest.h>

#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

Arg Int(int64_t value) { return Arg::OfInt(value); }
Arg Bool(bool value) { return Arg::OfBool(value); }
Arg Float(double value) { return Arg::OfFloat(value); }

TEST(NodeArgsTest, NegativeDimsCountFromTheEnd) {
  EXPECT_EQ(NormalizeDim(-1, 4), 3);
  EXPECT_EQ(NormalizeDim(-4, 4), 0);
  EXPECT_EQ(NormalizeDim(2, 4), 2) << "a non-negative dim is kept";
  EXPECT_EQ(NormalizeDim(-1, 0), 0) << "a scalar's dim -1 is its only position";
  EXPECT_EQ(NormalizeDim(0, 0), 0);
}

TEST(NodeArgsTest, IntArgReadsAPositionThenAKeywordThenFallsBack) {
  Node node;
  node.args = {Arg{}, Int(3), Float(2.5)};
  node.kwargs["keepdim"] = Int(7);
  EXPECT_EQ(IntArg(node, 1, "dim", -9), 3);
  EXPECT_EQ(IntArg(node, 5, "keepdim", -9), 7) << "past the positional args: the keyword";
  EXPECT_EQ(IntArg(node, 5, "missing", -9), -9);
  EXPECT_EQ(IntArg(node, 5, "", -9), -9) << "no key, no keyword look-up";
  EXPECT_EQ(IntArg(node, 0, "keepdim", -9), -9) << "a None positional arg is not replaced by the keyword";
  EXPECT_EQ(IntArg(node, 2, "", -9), -9) << "a float is not an int";
}

TEST(NodeArgsTest, BoolArgReadsOnlyBools) {
  Node node;
  node.args = {Bool(true), Int(1)};
  node.kwargs["align_corners"] = Bool(false);
  EXPECT_TRUE(BoolArg(node, 0, "", false));
  EXPECT_TRUE(BoolArg(node, 1, "", true)) << "an int is not a bool: the fallback";
  EXPECT_FALSE(BoolArg(node, 1, "", false));
  EXPECT_FALSE(BoolArg(node, 2, "align_corners", true));
  EXPECT_TRUE(BoolArg(node, 2, "other", true));
}

TEST(NodeArgsTest, ExpandToRepeatsTheLastValue) {
  EXPECT_EQ(ExpandTo({3}, 2, 0), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(ExpandTo({2, 5}, 3, 0), (std::vector<int64_t>{2, 5, 5}));
  EXPECT_EQ(ExpandTo({}, 2, 1), (std::vector<int64_t>{1, 1})) << "empty: the fallback, repeated";
  EXPECT_EQ(ExpandTo({4, 5, 6}, 2, 0), (std::vector<int64_t>{4, 5, 6})) << "longer lists are not cut";
  EXPECT_EQ(ExpandTo({}, 0, 9), (std::vector<int64_t>{9})) << "never empty";
}

// max_pool2d_with_indices of x [1, 2, 4, 4], whose indices (element 1) alone are read.
Graph PoolWithIndices() {
  const Json out = Meta({1, 2, 2, 2});
  return LoadGraph(GraphJson(
      {Input("x", 0, Meta({1, 2, 4, 4}))},
      {NodeJson("pool", "aten.max_pool2d_with_indices.default",
                {Ref("x"), Json::array({2, 2}), Json::array({2, 2})},
                Json::array({out, Meta({1, 2, 2, 2}, "int64")})),
       NodeJson("indices", "getitem", {Ref("pool"), 1}, Meta({1, 2, 2, 2}, "int64")),
       NodeJson("far", "getitem", {Ref("pool"), 4}, Meta({1, 2, 2, 2}, "int64")),
       NodeJson("neg", "aten.neg.default", Json::array({Ref("indices")}), Meta({1, 2, 2, 2}, "int64"))},
      {"neg"}));
}

TEST(NodeArgsTest, TupleOutputsMapsEachUsedElementToItsGetitem) {
  const Graph graph = PoolWithIndices();
  const Node& pool = graph.nodes[0];
  const std::vector<int> outputs = TupleOutputs(graph, pool, 2);
  ASSERT_EQ(outputs.size(), 2U);
  EXPECT_EQ(outputs[0], -1) << "the pooled values are not read";
  EXPECT_EQ(outputs[1], graph.nodes[1].value);
  EXPECT_EQ(ValueAt(graph, outputs[1]).name, "indices");
  const std::vector<int> wide = TupleOutputs(graph, pool, 5);
  EXPECT_EQ(wide[4], graph.nodes[2].value) << "element 4 read by `far`";
  EXPECT_EQ(wide[2], -1);
  EXPECT_TRUE(TupleOutputs(graph, graph.nodes[1], 1) == std::vector<int>{-1})
      << "neg reads `indices` but is no getitem";
}

TEST(NodeArgsTest, TensorInputIsTheFirstArgumentWhenItIsATensor) {
  const Graph graph = PoolWithIndices();
  const Value* input = TensorInput(graph, graph.nodes[0]);
  ASSERT_NE(input, nullptr);
  EXPECT_EQ(input->name, "x");
  EXPECT_EQ(TensorInput(graph, graph.nodes[1]), nullptr) << "the tuple itself has no tensor meta";
  Node scalar_first;
  scalar_first.args = {Int(1), Arg{}};
  EXPECT_EQ(TensorInput(graph, scalar_first), nullptr);
  EXPECT_EQ(TensorInput(graph, Node{}), nullptr) << "no arguments";
}

}  // namespace
}  // namespace egg::expert
