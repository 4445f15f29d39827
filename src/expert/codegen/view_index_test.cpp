#include "expert/codegen/view_index.h"

#include <gtest/gtest.h>

#include "expert/ir/ops.h"
#include "expert/ir/test_graphs.h"
#include "expert/ir/test_nodes.h"

namespace egg::expert {
namespace {

using testing::Fixture;
using testing::NodeWithOp;

TEST(ViewIndexTest, PermuteSwapsTheIndexIntoItsSource) {
  const Graph graph = Fixture("level1_16_Matmul_with_transposed_A");  // permute(a [64, 32], [1, 0])
  const Index i = Index::Var("i", 32);
  const Index j = Index::Var("j", 64);
  const std::vector<Index> source = ViewSourceIndex(graph, NodeWithOp(graph, "aten.permute.default"), {i, j});
  ASSERT_EQ(source.size(), 2U);
  EXPECT_EQ(source[0], j);
  EXPECT_EQ(source[1], i);
}

TEST(ViewIndexTest, SliceSelectAndUnsqueezeAreOffsetsAndFixedPositions) {
  const Graph graph = Fixture("level1_92_cumsum_exclusive");  // x [64, 64]
  const Index r = Index::Var("r", 64);
  const Index c = Index::Var("c", 63);
  const auto sliced = ViewSourceIndex(graph, NodeWithOp(graph, "aten.slice.Tensor"), {r, c});
  EXPECT_EQ(sliced[0], r);
  EXPECT_EQ(sliced[1], c);  // x[:, 0:63]: start 0, step 1
  const auto selected = ViewSourceIndex(graph, NodeWithOp(graph, "aten.select.int"), {r});
  ASSERT_EQ(selected.size(), 2U);
  EXPECT_EQ(selected[1], Index(0));
  const auto unsqueezed = ViewSourceIndex(graph, NodeWithOp(graph, "aten.unsqueeze.default"), {r, Index(0)});
  ASSERT_EQ(unsqueezed.size(), 1U);
  EXPECT_EQ(unsqueezed[0], r);
}

TEST(ViewIndexTest, AnOpThatIsNoViewIsRefused) {
  const Graph graph = Fixture("level1_92_cumsum_exclusive");
  const Index r = Index::Var("r", 64);
  EXPECT_THROW(ViewSourceIndex(graph, NodeWithOp(graph, "aten.cumsum.default"), {r, r}), NotFusable);
}

TEST(ViewIndexTest, BroadcastFixesSizeOneDimensionsAndAlignsRight) {
  const Index a = Index::Var("a", 4);
  const Index b = Index::Var("b", 8);
  const auto index = BroadcastIndex({a, b}, {4, 8}, {1, 8});
  EXPECT_EQ(index[0], Index(0));
  EXPECT_EQ(index[1], b);
  const auto right = BroadcastIndex({a, b}, {4, 8}, {8});
  ASSERT_EQ(right.size(), 1U);
  EXPECT_EQ(right[0], b);
}

TEST(ViewIndexTest, RepeatReadsItsInputAtTheIndexModItsSize) {
  using testing::Meta;
  using testing::NodeJson;
  using testing::Ref;
  // x [4, 5].repeat(2, 1, 3): [2, 4, 15], the leading dim added by the repeats, dim 1 repeated once
  const Graph graph = testing::LoadGraph(
      testing::GraphJson({testing::Input("x", 0, Meta({4, 5}))},
                         {NodeJson("repeat", "aten.repeat.default",
                                   Json::array({Ref("x"), Json::array({2, 1, 3})}), Meta({2, 4, 15}))},
                         {"repeat"}));
  const Index n = Index::Var("n", 2);
  const Index r = Index::Var("r", 4);
  const Index c = Index::Var("c", 15);
  const auto source = ViewSourceIndex(graph, NodeWithOp(graph, "aten.repeat.default"), {n, r, c});
  ASSERT_EQ(source.size(), 2U);
  EXPECT_EQ(source[0], r) << "repeated once: the index as it is";
  EXPECT_EQ(source[1], c.Mod(5));
  EXPECT_EQ(source[1].Hi(), 4);
}

}  // namespace
}  // namespace egg::expert
