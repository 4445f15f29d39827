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

}  // namespace
}  // namespace egg::expert
