// Pooling kernels: one output per lane over an unrolled window, padding masked out (-inf for a max, nothing
// for a sum), the average's divisor (uniform, cut at the edges, overridden or adaptive) and epilogues on the
// pooled value.
#include <gtest/gtest.h>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

using testing::Has;

// The plan's only kernel, a pool, written with its default design.
KernelSource WritePool(const Graph& graph) { return testing::WriteOnlyKernel(graph, KernelKind::kPool); }

// `op`(x, args...) of x [2, 3, `in`, `in`] to [2, 3, `out`, `out`].
Graph Pool(const std::string& op, const Json& args, int64_t in, int64_t out) {
  Json all = Json::array({Ref("x")});
  for (const Json& arg : args) {
    all.push_back(arg);
  }
  return LoadGraph(GraphJson({Input("x", 0, Meta({2, 3, in, in}))},
                             {NodeJson("pool", op, all, Meta({2, 3, out, out}))}, {"pool"}));
}

TEST(PoolWriterTest, AMaxPoolUnrollsItsWindowAndMasksThePadding) {
  const Graph graph = testing::Fixture("level1_42_Max_Pooling_2D");  // 4x4 window, stride 1, padding 1
  const KernelSource source = WritePool(graph);
  EXPECT_TRUE(Has(source.code, "acc = tl.full([XBLOCK], float('-inf'), tl.float32)")) << source.code;
  EXPECT_TRUE(Has(source.code, "for k0 in tl.static_range(4):")) << source.code;
  EXPECT_TRUE(Has(source.code, "for k1 in tl.static_range(4):")) << source.code;
  EXPECT_TRUE(Has(source.code, "valid = ")) << source.code;
  EXPECT_TRUE(Has(source.code, ", float('-inf'))")) << "a padded position never wins: " << source.code;
  EXPECT_TRUE(Has(source.code, "acc = tl.maximum(acc, ")) << source.code;
  EXPECT_TRUE(Has(source.code, "# max pooling over a 4x4 window, 21600 outputs")) << source.code;
  EXPECT_EQ(Count(source.code, "tl.store("), 1U);
  EXPECT_EQ(source.computed.count(0), 1U) << "the pool node";
  ASSERT_EQ(source.launches.size(), 1U);
  EXPECT_EQ(source.launches[0].grid,
            "(triton.cdiv(21600, " + std::to_string(source.launches[0].constexprs.at("XBLOCK")) + "),)");
}

TEST(PoolWriterTest, AnUnpaddedAverageDividesByTheWindowSize) {
  const KernelSource source =
      WritePool(Pool("aten.avg_pool2d.default", {Json::array({3, 3}), Json::array({2, 2})}, 9, 4));
  EXPECT_FALSE(Has(source.code, "valid")) << "every window lies inside: " << source.code;
  EXPECT_TRUE(Has(source.code, "acc = acc + ")) << source.code;
  EXPECT_TRUE(Has(source.code, "pooled = (acc / 9.0).to(tl.float32)")) << source.code;
  EXPECT_TRUE(Has(source.code, "# avg pooling over a 3x3 window")) << source.code;
}

TEST(PoolWriterTest, PaddingCountedInTheAverageKeepsAUniformDivisor) {
  // 3x3, stride 1, padding 1 over 8: every window of the padded input is whole.
  const KernelSource source = WritePool(
      Pool("aten.avg_pool2d.default", {Json::array({3, 3}), Json::array({1, 1}), Json::array({1, 1})}, 8, 8));
  EXPECT_TRUE(Has(source.code, "valid = ")) << "padded positions read nothing: " << source.code;
  EXPECT_TRUE(Has(source.code, ", 0.0)")) << source.code;
  EXPECT_TRUE(Has(source.code, "pooled = (acc / 9.0).to(tl.float32)")) << source.code;
}

TEST(PoolWriterTest, PaddingLeftOutOfTheAverageCountsOnlyInsidePositions) {
  const KernelSource source =
      WritePool(Pool("aten.avg_pool2d.default",
                     {Json::array({3, 3}), Json::array({1, 1}), Json::array({1, 1}), false, false}, 8, 8));
  EXPECT_FALSE(Has(source.code, "acc / 9.0")) << source.code;
  EXPECT_EQ(Count(source.code, "tl.maximum("), 2U)
      << "each dim's first position clamped at 0: " << source.code;
  EXPECT_TRUE(Has(source.code, ").to(tl.float32)).to(tl.float32)")) << source.code;
}

TEST(PoolWriterTest, ADivisorOverrideReplacesTheCount) {
  const KernelSource source =
      WritePool(Pool("aten.avg_pool2d.default",
                     {Json::array({3, 3}), Json::array({1, 1}), Json::array({1, 1}), false, false, 5}, 8, 8));
  EXPECT_TRUE(Has(source.code, "pooled = (acc / 5.0).to(tl.float32)")) << source.code;
}

TEST(PoolWriterTest, AdaptiveWindowsRunFromTheirStartToTheirEnd) {
  // 7 -> 3: windows [0, 3), [2, 5), [4, 7): three positions at most.
  const KernelSource source =
      WritePool(Pool("aten._adaptive_avg_pool2d.default", {Json::array({3, 3})}, 7, 3));
  EXPECT_TRUE(Has(source.code, "for k0 in tl.static_range(3):")) << source.code;
  EXPECT_TRUE(Has(source.code, "valid = ")) << "positions past the window's end: " << source.code;
  EXPECT_FALSE(Has(source.code, "acc / 9.0")) << "windows differ: divided by each one's own size";
  EXPECT_TRUE(Has(source.code, ".to(tl.float32)).to(tl.float32)")) << source.code;
}

TEST(PoolWriterTest, AnEpilogueUsesThePooledValue) {
  const Graph graph = LoadGraph(
      GraphJson({Input("x", 0, Meta({2, 3, 8, 8}))},
                {NodeJson("pool", "aten.avg_pool2d.default",
                          {Ref("x"), Json::array({2, 2}), Json::array({2, 2})}, Meta({2, 3, 4, 4})),
                 NodeJson("neg", "aten.neg.default", Json::array({Ref("pool")}), Meta({2, 3, 4, 4}))},
                {"neg"}));
  const KernelSource source = WritePool(graph);
  EXPECT_EQ(Count(source.code, "tl.store("), 1U) << "the pool itself is not stored";
  EXPECT_TRUE(Has(source.code, "(-pooled)")) << source.code;
  EXPECT_EQ(source.computed, (std::set<int>{0, 1}));
}

}  // namespace
}  // namespace egg::expert
