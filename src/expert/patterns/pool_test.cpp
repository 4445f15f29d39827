#include "expert/patterns/pool.h"

#include <gtest/gtest.h>

#include "expert/ir/test_graphs.h"
#include "expert/ir/test_nodes.h"

namespace egg::expert {
namespace {

TEST(PoolPatternTest, MaxPoolWithIndicesIsATwoDimensionalMaxPool) {
  const Graph graph = testing::Fixture("level1_42_Max_Pooling_2D");
  const Node& node = testing::NodeWithOp(graph, "aten.max_pool2d_with_indices.default");
  const auto pool = ParsePool(graph, node);
  ASSERT_TRUE(pool);
  EXPECT_EQ(pool->kind, PoolKind::kMax);
  EXPECT_EQ(pool->spatial, 2);
  EXPECT_EQ(pool->kernel.size(), 2U);
  EXPECT_EQ(pool->input, node.args[0].value);
  EXPECT_FALSE(pool->adaptive);
  EXPECT_EQ(pool->output, testing::NodeWithOp(graph, "getitem").value) << "the pooled values, item 0";
}

// adaptive_max_pool2d(x [2, 3, 7, 9], (3, 4)) with its values read (and its indices too when `indices`).
Graph AdaptiveMax(bool indices) {
  using testing::Meta;
  using testing::NodeJson;
  using testing::Ref;
  std::vector<Json> nodes = {
      NodeJson("pool", "aten.adaptive_max_pool2d.default", Json::array({Ref("x"), Json::array({3, 4})}),
               Json::array({Meta({2, 3, 3, 4}), Meta({2, 3, 3, 4}, "int64")})),
      NodeJson("values", "getitem", Json::array({Ref("pool"), 0}), Meta({2, 3, 3, 4}))};
  std::vector<std::string> outputs = {"values"};
  if (indices) {
    nodes.push_back(
        NodeJson("indices", "getitem", Json::array({Ref("pool"), 1}), Meta({2, 3, 3, 4}, "int64")));
    outputs.push_back("indices");
  }
  return testing::LoadGraph(testing::GraphJson({testing::Input("x", 0, Meta({2, 3, 7, 9}))}, nodes, outputs));
}

TEST(PoolPatternTest, AdaptiveMaxPoolIsAMaxOverAdaptiveWindowsWhenItsIndicesAreUnused) {
  const Graph graph = AdaptiveMax(false);
  const auto pool = ParsePool(graph, testing::NodeWithOp(graph, "aten.adaptive_max_pool2d.default"));
  ASSERT_TRUE(pool);
  EXPECT_EQ(pool->kind, PoolKind::kMax);
  EXPECT_TRUE(pool->adaptive);
  EXPECT_EQ(pool->spatial, 2);
  // the widest window: rows 7 over 3 outputs span [0, 3), [2, 5), [4, 7); columns 9 over 4 span up to 3
  EXPECT_EQ(pool->kernel, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(pool->output, testing::NodeWithOp(graph, "getitem").value);

  const Graph with_indices = AdaptiveMax(true);
  EXPECT_FALSE(ParsePool(with_indices, testing::NodeWithOp(with_indices, "aten.adaptive_max_pool2d.default")))
      << "the indices are used: PyTorch computes them";
}

}  // namespace
}  // namespace egg::expert
