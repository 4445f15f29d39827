// Row reductions as one kernel: persistent (a row tile in registers, one load), looped (RBLOCK tiles, one
// loop per group of independent reductions, Welford variance), online softmax (max and sum in one loop),
// accumulator types and identities, index-carrying reductions, and the rows' results stored per row.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/ir/test_graphs.h"
#include "expert/kir/analysis.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::LoadGraph;

using testing::Has;

// The plan's only kernel, a reduction, written as planned or with `algorithm` (and `rblock` where not 0).
KernelSource WriteReduction(const Graph& graph, Algorithm algorithm = Algorithm::kUnset, int64_t rblock = 0) {
  return testing::WriteOnlyKernel(graph, KernelKind::kReduction, [&](KernelPlan& kernel) {
    if (algorithm != Algorithm::kUnset) {
      kernel.design.algorithm = algorithm;
    }
    if (rblock != 0) {
      kernel.design.rblock = rblock;
    }
  });
}

// The same in the kernel IR.
kir::Kernel LowerReduction(const Graph& graph, Algorithm algorithm, int64_t rblock) {
  const Plan plan = MakePlan(graph, {});
  KernelPlan kernel = plan.kernels.at(0);
  kernel.design.algorithm = algorithm;
  kernel.design.rblock = rblock;
  return ReductionProgram(graph, kernel, plan.memory_before.at(0), testing::DenseStores(graph, kernel));
}

// The depths of the statements of `function` that are the text `text`.
std::vector<int> DepthsOf(const kir::Function& function, const std::string& text) {
  std::vector<int> depths;
  for (const kir::Statement& statement : function.body) {
    if (statement.kind == kir::Statement::Kind::kText && statement.text == text) {
      depths.push_back(statement.depth);
    }
  }
  return depths;
}

// `op`(x [8, 64] of `dtype`, args...) of type `out_dtype` [8].
Graph RowReduction(const std::string& op, const Json& args, const std::string& dtype = "float32",
                   const std::string& out_dtype = "float32") {
  return testing::RowReduction(op, args, 8, 64, dtype, out_dtype);
}

TEST(ReductionWriterTest, APersistentSoftmaxLoadsEachRowOnce) {
  const Graph graph = testing::Fixture("level1_23_Softmax");  // 48 rows of 64
  const KernelSource source = WriteReduction(graph, Algorithm::kPersistent);
  ASSERT_EQ(source.launches.size(), 1U);
  const KernelLaunch& launch = source.launches[0];
  const int64_t xblock = launch.constexprs.at("XBLOCK");
  EXPECT_EQ(launch.grid, "(triton.cdiv(48, " + std::to_string(xblock) + "),)");
  EXPECT_EQ(launch.constexprs.count("RBLOCK"), 1U);
  EXPECT_FALSE(Has(source.code, "for roffset")) << source.code;
  EXPECT_TRUE(Has(source.code, "rmask = rindex < 64")) << source.code;
  EXPECT_EQ(Count(source.code, "tl.load("), 1U) << "x read once, kept in registers: " << source.code;
  EXPECT_TRUE(Has(source.code, "red0 = _egg_max(tl.where(mask, tmp0, float('-inf')), 1)[:, None]"))
      << source.code;
  EXPECT_TRUE(Has(source.code, "red1 = tl.sum(tl.where(mask, ")) << source.code;
  EXPECT_EQ(Count(source.code, "tl.store("), 1U) << "only the softmax is stored";
  EXPECT_TRUE(Has(source.code, "# persistent reduction, 48 rows x 64: amax, sum_1, div")) << source.code;
  EXPECT_EQ(source.loaded, (std::set<int>{0}));
  EXPECT_EQ(source.computed, (std::set<int>{0, 1, 2, 3, 4}));
}

TEST(ReductionWriterTest, ALoopedSoftmaxRunsOneLoopPerDependentStep) {
  const KernelSource source = WriteReduction(testing::BigSoftmax(), Algorithm::kLooped, 2048);
  // the max, then the sum of exp(x - max), then the normalized values: each needs the one before
  EXPECT_EQ(Count(source.code, "for roffset in range(0, 65536, RBLOCK):"), 3U) << source.code;
  EXPECT_EQ(Count(source.code, "tl.load("), 3U) << source.code;
  EXPECT_TRUE(Has(source.code, "acc0 = tl.full([XBLOCK, RBLOCK], float('-inf'), tl.float32)")) << source.code;
  EXPECT_TRUE(Has(source.code,
                  "acc0 = tl.where(mask, tl.maximum(acc0, tmp0, propagate_nan=tl.PropagateNan.ALL), acc0)"))
      << source.code;
  EXPECT_TRUE(Has(source.code, "acc1 = tl.full([XBLOCK, RBLOCK], 0, tl.float32)")) << source.code;
  EXPECT_TRUE(Has(source.code, "red1 = tl.sum(acc1, 1)[:, None]")) << source.code;
  EXPECT_EQ(source.launches.at(0).constexprs.at("RBLOCK"), 2048);
}

TEST(ReductionWriterTest, AnOnlineSoftmaxFindsMaxAndSumInOneLoop) {
  const KernelSource source = WriteReduction(testing::BigSoftmax(), Algorithm::kOnline, 2048);
  EXPECT_EQ(Count(source.code, "for roffset in range(0, 65536, RBLOCK):"), 2U)
      << "statistics, then the outputs: " << source.code;
  EXPECT_EQ(Count(source.code, "tl.load("), 2U) << source.code;
  EXPECT_TRUE(Has(source.code, "mn0 = tl.maximum(m0, t0)")) << source.code;
  EXPECT_TRUE(Has(source.code, "s0 = s0 * tl.where(mn0 == float('-inf'), 0.0, tl.exp(m0 - mn0))"))
      << source.code;
  EXPECT_TRUE(Has(source.code, "redm0 = _egg_max(m0, 1)[:, None]")) << source.code;
  EXPECT_TRUE(Has(source.code, "(tmp3 / reds0)")) << "the outputs use the combined sum: " << source.code;
}

TEST(ReductionWriterTest, APersistentVarianceTakesTwoPassesOverTheRow) {
  // LayerNorm over 16 rows of 3072: var (correction 0) and a sum for the mean
  const KernelSource source = WriteReduction(testing::Fixture("level1_40_LayerNorm"), Algorithm::kPersistent);
  EXPECT_TRUE(Has(source.code, "mean0 = red0m / 3072")) << source.code;
  EXPECT_TRUE(Has(source.code, "((tmp0 - mean0) * (tmp0 - mean0))")) << "centred squares: " << source.code;
  EXPECT_TRUE(Has(source.code, "((red0 / 3072.0) + 1e-05)")) << "biased: correction 0: " << source.code;
  EXPECT_EQ(source.loaded, (std::set<int>{0, 1, 2})) << "x, weight and bias";
}

TEST(ReductionWriterTest, ALoopedVarianceIsWelfordAndSharesALoopWithIndependentSums) {
  const KernelSource source =
      WriteReduction(testing::Fixture("level1_40_LayerNorm"), Algorithm::kLooped, 1024);
  EXPECT_TRUE(Has(source.code, "wm0 = tl.zeros([XBLOCK, RBLOCK], dtype=tl.float32)")) << source.code;
  const kir::Kernel lowered =
      LowerReduction(testing::Fixture("level1_40_LayerNorm"), Algorithm::kLooped, 1024);
  std::vector<std::string> tiles;
  for (const kir::Statement& tile : kir::RegisterTiles(lowered.functions.at(0))) {
    tiles.push_back(tile.name);
    EXPECT_EQ(tile.shape, (std::vector<std::string>{"XBLOCK", "RBLOCK"})) << tile.name;
  }
  EXPECT_NE(std::find(tiles.begin(), tiles.end(), "wn0"), tiles.end()) << "Welford's mean, M2 and count";
  EXPECT_TRUE(Has(source.code, "wn0 = wn0 + tl.where(mask, 1.0, 0.0)")) << source.code;
  EXPECT_TRUE(Has(source.code, "redm0, reds0, redn0 = _egg_welford(wm0, ws0, wn0, 1)")) << source.code;
  EXPECT_TRUE(Has(source.code, "(reds0[:, None] / 3072.0)")) << source.code;
  // var and the mean's sum read nothing of each other: one loop for both, one for the normalized output
  EXPECT_EQ(Count(source.code, "for roffset in range(0, 3072, RBLOCK):"), 2U) << source.code;
  EXPECT_FALSE(Has(source.code, "mean0")) << "no two-pass mean when streamed: " << source.code;
}

TEST(ReductionWriterTest, AnArgmaxCarriesTheIndexOfItsFirstMaximum) {
  const Graph graph = testing::Fixture("level1_51_Argmax_over_a_dimension");  // [16, 32, 24] over dim 1
  const KernelSource persistent = WriteReduction(graph, Algorithm::kPersistent);
  EXPECT_TRUE(Has(persistent.code,
                  "redv0, redi0 = _egg_argmax(tl.where(mask, tmp0, float('-inf')), "
                  "rindex.to(tl.int64) + tl.zeros([XBLOCK, RBLOCK], tl.int64), 1)"))
      << persistent.code;
  EXPECT_TRUE(Has(persistent.code, "redi0[:, None], xmask)")) << "the index is stored: " << persistent.code;
  // the reduced dim is the middle one: x at (row // 24, r, row % 24)
  EXPECT_TRUE(Has(persistent.code, "(xindex % 24) + 768*(xindex // 24) + 24*rindex")) << persistent.code;
  const KernelSource looped = WriteReduction(graph, Algorithm::kLooped, 8);
  EXPECT_TRUE(Has(looped.code, "acc0i = tl.zeros([XBLOCK, RBLOCK], dtype=tl.int64)")) << looped.code;
  EXPECT_TRUE(Has(looped.code, "take0 = mask & ((val0 > acc0v) | ((val0 != val0) & (acc0v == acc0v)))"))
      << "strictly greater (ties keep the first), or a first NaN: " << looped.code;
  EXPECT_TRUE(Has(looped.code, "redv0, redi0 = _egg_argmax(acc0v, acc0i, 1)")) << looped.code;
  EXPECT_TRUE(Has(looped.code, "for roffset in range(0, 32, RBLOCK):")) << looped.code;
}

TEST(ReductionWriterTest, AMeanDividesByTheRowLengthAndIsStoredPerRow) {
  const KernelSource source = WriteReduction(testing::Fixture("level1_94_MSELoss"), Algorithm::kPersistent);
  EXPECT_TRUE(Has(source.code, "(red0 / 4096), xmask)")) << source.code;
  EXPECT_TRUE(Has(source.code, "red0 = tl.sum(tl.where(mask, tmp3, 0), 1)[:, None]")) << source.code;
}

TEST(ReductionWriterTest, IntegerSumsAccumulateInInt64) {
  const KernelSource source = WriteReduction(
      RowReduction("aten.sum.dim_IntList", {Json::array({1})}, "int32", "int64"), Algorithm::kLooped, 16);
  EXPECT_TRUE(Has(source.code, "acc0 = tl.full([XBLOCK, RBLOCK], 0, tl.int64)")) << source.code;
  EXPECT_TRUE(Has(source.code, ".to(tl.int64)")) << source.code;
}

TEST(ReductionWriterTest, LogicalAndProductReductionsUseTheirOwnCombines) {
  const KernelSource any =
      WriteReduction(RowReduction("aten.any.dim", {1}, "bool", "bool"), Algorithm::kPersistent);
  EXPECT_TRUE(Has(any.code, "!= 0).to(tl.int32)")) << any.code;
  EXPECT_TRUE(Has(any.code, "red0 = _egg_max(")) << "any: the max of 0/1: " << any.code;
  EXPECT_TRUE(Has(any.code, "(red0 != 0)")) << any.code;
  const KernelSource prod = WriteReduction(RowReduction("aten.prod.dim_int", {1}), Algorithm::kLooped, 16);
  EXPECT_TRUE(Has(prod.code, "acc0 = tl.full([XBLOCK, RBLOCK], 1, tl.float32)")) << prod.code;
  EXPECT_TRUE(Has(prod.code, "acc0 = acc0 * tl.where(mask, ")) << prod.code;
  EXPECT_TRUE(Has(prod.code, "red0 = tl.reduce(acc0, 1, _egg_prod)[:, None]")) << prod.code;
}

TEST(ReductionWriterTest, HalfRowsAreReducedInFloat32AndStoredInTheirType) {
  const Graph graph =
      LoadGraph(testing::Retyped(testing::FixtureJson("level1_23_Softmax"), "float32", "bfloat16"));
  const KernelSource source = WriteReduction(graph, Algorithm::kPersistent);
  EXPECT_TRUE(Has(source.code, ".to(tl.float32)")) << source.code;
  EXPECT_EQ(Count(source.code, ".to(tl.bfloat16)"), 1U) << "the one store: " << source.code;
}

TEST(ReductionWriterTest, TheRowTileIsThreeStatementsAtTheTopOrInsideEachLoop) {
  const Graph graph = testing::BigSoftmax();
  const kir::Kernel persistent = LowerReduction(graph, Algorithm::kPersistent, 65536);
  ASSERT_EQ(persistent.functions.size(), 1U);
  EXPECT_EQ(DepthsOf(persistent.functions[0], "rindex = rbase"), std::vector<int>{1});
  EXPECT_EQ(DepthsOf(persistent.functions[0], "rmask = rindex < 65536"), std::vector<int>{1});
  EXPECT_EQ(DepthsOf(persistent.functions[0], "mask = xmask & rmask"), std::vector<int>{1});
  // looped: the max, the sum, the outputs, each loop with its own tile
  const kir::Kernel looped = LowerReduction(graph, Algorithm::kLooped, 2048);
  ASSERT_EQ(looped.functions.size(), 1U);
  const kir::Function& function = looped.functions[0];
  const std::vector<kir::LoopNest> loops = kir::Loops(function);
  ASSERT_EQ(loops.size(), 3U);
  for (const kir::LoopNest& loop : loops) {
    EXPECT_EQ(loop.variable, "roffset");
    EXPECT_EQ(kir::Code(loop.range), "range(0, 65536, RBLOCK)");
    EXPECT_TRUE(loop.enclosing.empty()) << "three loops one after the other, none nested";
  }
  EXPECT_EQ(DepthsOf(function, "rindex = roffset + rbase"), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(DepthsOf(function, "rmask = rindex < 65536"), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(DepthsOf(function, "mask = xmask & rmask"), (std::vector<int>{2, 2, 2}));
  EXPECT_TRUE(DepthsOf(function, "rindex = rbase").empty());
}

}  // namespace
}  // namespace egg::expert
