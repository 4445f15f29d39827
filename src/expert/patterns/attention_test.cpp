#include "expert/patterns/attention.h"

#include <gtest/gtest.h>

#include "expert/ir/test_graphs.h"
#include "expert/ir/test_nodes.h"

namespace egg::expert {
namespace {

TEST(AttentionPatternTest, ScaledDotProductAttentionEndsAtTheSecondBmm) {
  const Graph graph = testing::Fixture("level1_97_ScaledDotProductAttention");  // q, k, v [2, 2, 64, 32]
  EXPECT_FALSE(ParseAttention(graph, testing::NodeWithOp(graph, "aten.bmm.default", 0))) << "S = Q K^T";
  const Node& pv = testing::NodeWithOp(graph, "aten.bmm.default", 1);
  const auto at = ParseAttention(graph, pv);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->node, static_cast<int>(&pv - graph.nodes.data()));
  EXPECT_EQ(at->batch, 4);
  EXPECT_EQ(at->lq, 64);
  EXPECT_EQ(at->lk, 64);
  EXPECT_EQ(at->d, 32);
  EXPECT_EQ(at->dv, 32);
  EXPECT_EQ(at->mask, -1);
  EXPECT_TRUE(at->absorbed.count(at->scores) == 1) << "S is computed inside the kernel";
}

}  // namespace
}  // namespace egg::expert
