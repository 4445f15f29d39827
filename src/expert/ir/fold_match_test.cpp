// The fold matchers alone: what a match records (the nodes it removes, the windows of a cropped transposed
// convolution) before the graph is rebuilt (fold_test.cpp checks the rebuilt graphs).
#include "expert/ir/fold_match.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expert/ir/test_graphs.h"

namespace egg::expert::fold_detail {
namespace {

using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

// x [2, 3, 5] through a 1-D transposed convolution with w [3, 4, 3] (stride 2, dilation 1) at `padding` and
// `output_padding`, then its mean over the positions (keepdim).
Graph PooledLine(int64_t padding, int64_t output_padding) {
  const int64_t out = (5 - 1) * 2 - 2 * padding + 2 + output_padding + 1;
  Json json =
      GraphJson({Input("x", 0, Meta({2, 3, 5})), Input("w", 1, Meta({3, 4, 3}))},
                {NodeJson("conv", "aten.convolution.default",
                          {Ref("x"), Ref("w"), nullptr, {2}, {padding}, {1}, true, {output_padding}, 1},
                          Meta({2, 4, out})),
                 NodeJson("mean", "aten.mean.dim", {Ref("conv"), {2}, true}, Meta({2, 4, 1}))},
                {"mean"});
  return LoadGraph(json);
}

const Node& NodeNamed(const Graph& graph, const std::string& name) {
  for (const Node& node : graph.nodes) {
    if (node.name == name) {
      return node;
    }
  }
  throw std::out_of_range(name);
}

TEST(FoldMatchTest, AnUncroppedPooledConvolutionNeedsNoWindow) {
  const Graph graph = PooledLine(0, 0);  // 11 positions: every (i, k) lands inside
  const auto fold = MatchPooledConvolution(graph, NodeNamed(graph, "conv"));
  ASSERT_TRUE(fold);
  EXPECT_TRUE(fold->convolution);
  EXPECT_TRUE(fold->mean);
  EXPECT_EQ(fold->positions, 11);
  ASSERT_EQ(fold->windows.size(), 1U);
  EXPECT_TRUE(fold->windows[0].empty());
  EXPECT_EQ(fold->nodes.size(), 2U) << "the convolution and the mean, removed";
}

TEST(FoldMatchTest, PaddingAndOutputPaddingMarkThePairsOutsideTheOutput) {
  // padding 1: position 2i - 1 + k in [0, 9); (0, 0) lands at -1, every other pair inside (i = 4, k = 2 at 9
  // is past the 9 positions)
  const Graph cropped = PooledLine(1, 0);
  const auto fold = MatchPooledConvolution(cropped, NodeNamed(cropped, "conv"));
  ASSERT_TRUE(fold);
  EXPECT_EQ(fold->positions, 9);
  ASSERT_EQ(fold->windows.size(), 1U);
  EXPECT_EQ(fold->windows[0], (std::vector<double>{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}));
  // output padding 1 keeps position 9: only (0, 0) is cropped
  const Graph padded = PooledLine(1, 1);
  const auto wider = MatchPooledConvolution(padded, NodeNamed(padded, "conv"));
  ASSERT_TRUE(wider);
  EXPECT_EQ(wider->positions, 10);
  EXPECT_EQ(wider->windows[0], (std::vector<double>{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
}

TEST(FoldMatchTest, ANodeThatIsNoProductMatchesNothing) {
  const Graph graph = PooledLine(0, 0);
  EXPECT_FALSE(MatchPooledConvolution(graph, NodeNamed(graph, "mean")));
  EXPECT_FALSE(MatchSummedProduct(graph, NodeNamed(graph, "conv"))) << "a convolution is no matrix product";
}

}  // namespace
}  // namespace egg::expert::fold_detail
