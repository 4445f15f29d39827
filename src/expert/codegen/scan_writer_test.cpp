// Scan kernels: cumsum and cumprod along any dim, in one tile or a loop of tiles carrying the row's running
// value, in the accumulator type of their result; sort and topk: one tl.sort of packed keys, topk storing its
// first k.
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

// The plan's only scan kernel, written under `algorithm` (unset: its default design).
KernelSource WriteScan(const Graph& graph, Algorithm algorithm = Algorithm::kUnset) {
  return testing::WriteOnlyKernel(graph, KernelKind::kScan, [&](KernelPlan& kernel) {
    if (algorithm != Algorithm::kUnset) {
      kernel.design.algorithm = algorithm;
    }
  });
}

// `op`(x, dim) of x `shape` in `dtype`, its result of `out_dtype`.
Graph Cumulative(const std::string& op, const std::vector<int64_t>& shape, int64_t dim,
                 const std::string& dtype = "float32", const std::string& out_dtype = "float32") {
  return LoadGraph(GraphJson({Input("x", 0, Meta(shape, dtype))},
                             {NodeJson("scan", op, {Ref("x"), dim}, Meta(shape, out_dtype))}, {"scan"}));
}

TEST(ScanWriterTest, ASingleTileScanAddsTheRowsCarryOnce) {
  const KernelSource source = WriteScan(Cumulative("aten.cumsum.default", {4, 100}, 1), Algorithm::kSingle);
  EXPECT_TRUE(Has(source.code, "carry = tl.full([XBLOCK, 1], 0, tl.float32)")) << source.code;
  EXPECT_TRUE(Has(source.code, "scanned = tl.cumsum(element, 1) + carry")) << source.code;
  EXPECT_FALSE(Has(source.code, "for roffset in range(")) << "no loop over the row";
  EXPECT_TRUE(Has(source.code, "# cumulative sum, 4 rows x 100, single")) << source.code;
  EXPECT_EQ(Count(source.code, "tl.store("), 1U);
  ASSERT_EQ(source.launches.size(), 1U);
  EXPECT_EQ(source.launches[0].constexprs.count("XBLOCK"), 1U);
  EXPECT_EQ(source.launches[0].constexprs.count("RBLOCK"), 1U);
  EXPECT_EQ(source.launches[0].grid,
            "(triton.cdiv(4, " + std::to_string(source.launches[0].constexprs.at("XBLOCK")) + "),)");
}

TEST(ScanWriterTest, ALoopedScanCarriesTheRunningSumAcrossTiles) {
  const KernelSource source = WriteScan(Cumulative("aten.cumsum.default", {4, 100}, 1), Algorithm::kBlocked);
  EXPECT_TRUE(Has(source.code, "for roffset in range(0, 100, RBLOCK):")) << source.code;
  EXPECT_TRUE(Has(source.code, "carry = carry + tl.sum(element, 1)[:, None]")) << source.code;
  EXPECT_TRUE(Has(source.code, "element = tl.where(mask, ")) << "lanes past the row add nothing";
}

TEST(ScanWriterTest, CumprodMultipliesFromOne) {
  const KernelSource source =
      WriteScan(Cumulative("aten.cumprod.default", {4, 100}, -1), Algorithm::kBlocked);
  EXPECT_TRUE(Has(source.code, "carry = tl.full([XBLOCK, 1], 1, tl.float32)")) << source.code;
  EXPECT_TRUE(Has(source.code, "scanned = tl.cumprod(element, 1) * carry")) << source.code;
  EXPECT_TRUE(Has(source.code, "tl.reduce(element, 1, _egg_prod)")) << source.code;
  EXPECT_TRUE(Has(HelperSource(source.code), "def _egg_prod(a, b):")) << "its combine function is defined";
}

TEST(ScanWriterTest, IntegerScansAccumulateInInt64) {
  const KernelSource source =
      WriteScan(Cumulative("aten.cumsum.default", {4, 100}, 1, "int32", "int64"), Algorithm::kSingle);
  EXPECT_TRUE(Has(source.code, "carry = tl.full([XBLOCK, 1], 0, tl.int64)")) << source.code;
  EXPECT_TRUE(Has(source.code, ".to(tl.int64), 0)")) << "each element widened before the scan";
}

TEST(ScanWriterTest, AScanAlongAMiddleDimHasARowPerOtherPosition) {
  const Graph graph = Cumulative("aten.cumsum.default", {4, 100, 3}, 1);
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  EXPECT_EQ(plan.kernels[0].rows, 12);
  EXPECT_EQ(plan.kernels[0].length, 100);
  const KernelSource source = WriteScan(graph, Algorithm::kSingle);
  EXPECT_TRUE(Has(source.code, "# cumulative sum, 12 rows x 100")) << source.code;
  EXPECT_TRUE(Has(source.code, "3*rindex")) << "the scanned dim strides by 3: " << source.code;
}

TEST(ScanWriterTest, AnEpilogueOfTheScanIsComputedOnTheScannedTile) {
  const Graph graph =
      LoadGraph(GraphJson({Input("x", 0, Meta({4, 100}))},
                          {NodeJson("scan", "aten.cumsum.default", {Ref("x"), 1}, Meta({4, 100})),
                           NodeJson("relu", "aten.relu.default", Json::array({Ref("scan")}), Meta({4, 100}))},
                          {"relu"}));
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U) << "relu joins the scan";
  const KernelSource source = WriteScan(graph, Algorithm::kSingle);
  EXPECT_EQ(Count(source.code, "tl.store("), 1U) << "only relu is stored";
  EXPECT_EQ(Count(source.code, "tl.load("), 1U) << "the scan is not reloaded";
  EXPECT_TRUE(Has(source.code, "tl.where(scanned < 0")) << source.code;
  EXPECT_EQ(source.computed, (std::set<int>{0, 1}));
}

// sort or topk of x [4, 16] (float32), both its outputs read.
Graph Sorted(const std::string& op, const Json& args) {
  Json all = Json::array({Ref("x")});
  for (const Json& arg : args) {
    all.push_back(arg);
  }
  const int64_t keep = op == "aten.topk.default" ? args[0].get<int64_t>() : 16;
  return LoadGraph(
      GraphJson({Input("x", 0, Meta({4, 16}))},
                {NodeJson("sort", op, all, Json::array({Meta({4, keep}), Meta({4, keep}, "int64")})),
                 NodeJson("values", "getitem", {Ref("sort"), 0}, Meta({4, keep})),
                 NodeJson("indices", "getitem", {Ref("sort"), 1}, Meta({4, keep}, "int64"))},
                {"values", "indices"}));
}

TEST(ScanWriterTest, ASortPacksKeysAndPositionsIntoOneTlSort) {
  KernelSource source = WriteScan(Sorted("aten.sort.default", {1, false}));
  EXPECT_EQ(Count(source.code, "tl.sort("), 1U);
  EXPECT_TRUE(Has(source.code, "descending=False")) << source.code;
  EXPECT_TRUE(Has(source.code, "(key.to(tl.int64) << 32) | (rindex).to(tl.int64)")) << source.code;
  EXPECT_EQ(Count(source.code, "tl.store("), 2U) << "values and indices";
  EXPECT_TRUE(Has(source.code, "# sort, 4 rows x 16")) << source.code;
  source = WriteScan(Sorted("aten.sort.default", {1, true}));
  EXPECT_TRUE(Has(source.code, "descending=True")) << source.code;
  EXPECT_TRUE(Has(source.code, "(15 - rindex)")) << "equal keys keep the lower position first";
  EXPECT_TRUE(Has(source.code, "# sort, largest first")) << source.code;
}

TEST(ScanWriterTest, TopkStoresTheFirstKOfEachRow) {
  KernelSource source = WriteScan(Sorted("aten.topk.default", {3, 1, true, true}));
  EXPECT_TRUE(Has(source.code, "kmask = xmask & (rindex < 3)")) << source.code;
  EXPECT_EQ(Count(source.code, ", kmask)"), 2U) << "both stores masked to the first 3: " << source.code;
  EXPECT_TRUE(Has(source.code, "# top 3 (largest)")) << source.code;
  source = WriteScan(Sorted("aten.topk.default", {1, 1, false, true}));
  EXPECT_TRUE(Has(source.code, "values = tl.sum(tl.where(rindex == 0, values, 0.0), 1)[:, None]"))
      << source.code;
  EXPECT_FALSE(Has(source.code, "kmask")) << "the top one is stored as a column under xmask";
  EXPECT_TRUE(Has(source.code, "# top 1 (smallest)")) << source.code;
}

}  // namespace
}  // namespace egg::expert
