// Split reductions: a partial kernel over (row block, split) accumulating a chunk of each row into scratch
// buffers (one per partial result, rows x splits of the accumulator's type), then a combine kernel loading
// every split of a row block and reducing them (sums, argmax pairs, Welford triples) before the per-row
// epilogue and the stores.
#include <gtest/gtest.h>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/ir/test_graphs.h"
#include "expert/kir/analysis.h"

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

// The plan's only kernel, a reduction, written split in `split` programs per row of RBLOCK `rblock`.
KernelSource WriteSplit(const Graph& graph, int64_t split, int64_t rblock) {
  return testing::WriteOnlyKernel(graph, KernelKind::kReduction, [&](KernelPlan& kernel) {
    EXPECT_TRUE(kernel.splittable);
    kernel.design.algorithm = Algorithm::kSplit;
    kernel.design.split = split;
    kernel.design.rblock = rblock;
    kernel.design.xblock = 1;
  });
}

// The same lowered to the kernel IR (nothing printed).
kir::Kernel LowerSplit(const Graph& graph, int64_t split, int64_t rblock) {
  const Plan plan = MakePlan(graph, {});
  KernelPlan kernel = plan.kernels.at(0);
  kernel.design.algorithm = Algorithm::kSplit;
  kernel.design.split = split;
  kernel.design.rblock = rblock;
  kernel.design.xblock = 1;
  return ReductionProgram(graph, kernel, plan.memory_before.at(0), testing::DenseStores(graph, kernel));
}

// The typed loads or stores of `function` that access scratch buffer `scratch`.
size_t ScratchAccesses(const kir::Function& function, kir::Statement::Kind kind, size_t scratch) {
  size_t count = 0;
  for (const kir::Statement& statement : function.body) {
    count += statement.kind == kind && statement.buffer == ScratchId(scratch) ? 1U : 0U;
  }
  return count;
}

// `op`(x [4, 8192] of `dtype`, args...) of type `out_dtype` [4].
Graph RowReduction(const std::string& op, const Json& args, const std::string& dtype = "float32",
                   const std::string& out_dtype = "float32") {
  return testing::RowReduction(op, args, 4, 8192, dtype, out_dtype);
}

TEST(SplitReductionWriterTest, PartialsGoToScratchAndTheCombineSumsThem) {
  // mean((predictions - targets)^2) over 4096 elements: one row, 4 splits of 1024
  const Graph graph = testing::Fixture("level1_94_MSELoss");
  const KernelSource source = WriteSplit(graph, 4, 256);
  ASSERT_EQ(source.launches.size(), 2U);
  const KernelLaunch& partial = source.launches[0];
  const KernelLaunch& combine = source.launches[1];
  EXPECT_EQ(partial.function, source.name + "_partial");
  EXPECT_EQ(partial.grid, "(triton.cdiv(1, 1), 4)") << "a program per row block and split";
  EXPECT_EQ(partial.constexprs, (std::map<std::string, int64_t>{{"XBLOCK", 1}, {"RBLOCK", 256}}));
  EXPECT_EQ(combine.function, source.name);
  EXPECT_EQ(combine.grid, "(triton.cdiv(1, 1),)");
  EXPECT_EQ(combine.constexprs.at("SBLOCK"), 4);
  ASSERT_EQ(source.scratch.size(), 1U);
  EXPECT_EQ(source.scratch[0].numel, 4) << "one partial per row and split";
  EXPECT_EQ(source.scratch[0].dtype, DType::kFloat32);
  // the partial kernel reads both inputs and writes the scratch; the combine reads it and writes the mean
  EXPECT_EQ(partial.pointers, (std::vector<int>{0, 1, ScratchId(0)}));
  ASSERT_EQ(combine.pointers.size(), 2U);
  EXPECT_EQ(combine.pointers[0], ScratchId(0));
  EXPECT_EQ(combine.pointers[1], graph.nodes.back().value);
  EXPECT_TRUE(Has(source.code, "split = tl.program_id(1)")) << source.code;
  EXPECT_TRUE(Has(source.code, "for roffset in range(0, 1024, RBLOCK):")) << source.code;
  EXPECT_TRUE(Has(source.code, "rindex = split * 1024 + roffset + rbase")) << source.code;
  EXPECT_TRUE(Has(source.code, "rmask = rindex < 4096")) << source.code;
  EXPECT_TRUE(Has(source.code, "(xindex * 4 + split), red0, xmask)")) << source.code;
  EXPECT_TRUE(Has(source.code, "smask = sindex < 4")) << source.code;
  EXPECT_TRUE(Has(source.code, "(xindex * 4 + sindex), mask, other=0)")) << source.code;
  EXPECT_TRUE(Has(source.code, "red0 = tl.sum(p0_0, 1)[:, None]")) << source.code;
  EXPECT_TRUE(Has(source.code, "(red0 / 4096)")) << "the mean divides by the whole row: " << source.code;
  EXPECT_EQ(source.loaded, (std::set<int>{0, 1}));
  EXPECT_EQ(source.computed, (std::set<int>{0, 1, 2})) << "sub, square and mean";
}

TEST(SplitReductionWriterTest, ChunksRoundUpToRblockSoFewerSplitsMayRun) {
  // 4096 / 5 = 820, rounded up to RBLOCK 1024: 4 chunks cover the row
  const KernelSource source = WriteSplit(testing::Fixture("level1_94_MSELoss"), 5, 1024);
  ASSERT_EQ(source.launches.size(), 2U);
  EXPECT_EQ(source.launches[0].grid, "(triton.cdiv(1, 1), 4)");
  EXPECT_EQ(source.launches[1].constexprs.at("SBLOCK"), 4);
  ASSERT_EQ(source.scratch.size(), 1U);
  EXPECT_EQ(source.scratch[0].numel, 4);
  EXPECT_TRUE(Has(source.code, "for roffset in range(0, 1024, RBLOCK):")) << source.code;
  // 3 splits of 4096 at RBLOCK 256: chunks of 1366 rounded to 1536, 3 of them; SBLOCK the next power of 2
  const KernelSource three = WriteSplit(testing::Fixture("level1_94_MSELoss"), 3, 256);
  ASSERT_EQ(three.launches.size(), 2U);
  EXPECT_EQ(three.launches[0].grid, "(triton.cdiv(1, 1), 3)");
  EXPECT_EQ(three.launches[1].constexprs.at("SBLOCK"), 4);
  EXPECT_TRUE(Has(three.code, "smask = sindex < 3")) << "the fourth lane reads nothing: " << three.code;
  EXPECT_TRUE(Has(three.code, "rindex = split * 1536 + roffset + rbase")) << three.code;
}

TEST(SplitReductionWriterTest, AnArgmaxSplitsIntoValueAndIndexPartials) {
  const Graph graph = RowReduction("aten.argmax.default", {1}, "float32", "int64");
  const KernelSource source = WriteSplit(graph, 8, 1024);
  ASSERT_EQ(source.scratch.size(), 2U);
  EXPECT_EQ(source.scratch[0].dtype, DType::kFloat32) << "the running maxima";
  EXPECT_EQ(source.scratch[1].dtype, DType::kInt64) << "their indices";
  EXPECT_EQ(source.scratch[0].numel, 4 * 8);
  EXPECT_EQ(source.scratch[1].numel, 4 * 8);
  EXPECT_TRUE(Has(source.code, "mask, other=float('-inf'))")) << "missing splits never win: " << source.code;
  EXPECT_TRUE(Has(source.code, "redv0, redi0 = _egg_argmax(p0_0, p0_1, 1)")) << source.code;
  EXPECT_TRUE(Has(source.code, "redi0[:, None]")) << source.code;
  EXPECT_EQ(Count(source.code, "tl.store("), 3U) << "two partials, one result: " << source.code;
}

TEST(SplitReductionWriterTest, AVarianceSplitsIntoWelfordTriples) {
  const Graph graph = RowReduction("aten.var.correction", {Json::array({1})});
  const KernelSource source = WriteSplit(graph, 4, 2048);
  ASSERT_EQ(source.scratch.size(), 3U) << "mean, M2 and count per split";
  for (const Scratch& scratch : source.scratch) {
    EXPECT_EQ(scratch.numel, 16);
    EXPECT_EQ(scratch.dtype, DType::kFloat32);
  }
  EXPECT_TRUE(Has(source.code, "_egg_welford(")) << source.code;
  EXPECT_TRUE(Has(source.code, "/ 8191.0)")) << "Bessel's correction over the whole row: " << source.code;
}

TEST(SplitReductionWriterTest, IntegerSumsAccumulateInInt64Scratch) {
  const Graph graph = RowReduction("aten.sum.dim_IntList", {Json::array({1})}, "int32", "int64");
  const KernelSource source = WriteSplit(graph, 4, 2048);
  ASSERT_EQ(source.scratch.size(), 1U);
  EXPECT_EQ(source.scratch[0].dtype, DType::kInt64);
  EXPECT_TRUE(Has(source.code, ".to(tl.int64)")) << source.code;
}

TEST(SplitReductionWriterTest, APerRowEpilogueRunsInTheCombineKernel) {
  const Graph graph =
      LoadGraph(GraphJson({Input("x", 0, Meta({4, 8192}))},
                          {NodeJson("red", "aten.sum.dim_IntList", {Ref("x"), Json::array({1})}, Meta({4})),
                           NodeJson("root", "aten.sqrt.default", Json::array({Ref("red")}), Meta({4}))},
                          {"root"}));
  const KernelSource source = WriteSplit(graph, 4, 2048);
  ASSERT_EQ(source.launches.size(), 2U);
  const size_t combine = source.code.find("def " + source.name + "(");
  ASSERT_NE(combine, std::string::npos) << source.code;
  EXPECT_EQ(source.code.find("tl.sqrt("), source.code.rfind("tl.sqrt(")) << "once: " << source.code;
  EXPECT_GT(source.code.find("tl.sqrt("), combine) << "after the partials are combined: " << source.code;
  EXPECT_EQ(source.launches[1].pointers.back(), graph.nodes[1].value) << "the combine stores the root";
  EXPECT_EQ(source.computed.count(1), 1U);
}

TEST(SplitReductionWriterTest, TheKernelIrHoldsAPartialAndACombineFunctionOverScratch) {
  const Graph graph = testing::Fixture("level1_94_MSELoss");
  const kir::Kernel kernel = LowerSplit(graph, 4, 256);
  ASSERT_EQ(kernel.functions.size(), 2U) << "a function per launch";
  ASSERT_EQ(kernel.launches.size(), 2U);
  const kir::Function& partial = kernel.functions[0];
  const kir::Function& combine = kernel.functions[1];
  EXPECT_EQ(partial.name, kernel.launches[0].function);
  EXPECT_EQ(combine.name, kernel.launches[1].function);
  EXPECT_EQ(partial.domain.kind, kir::Domain::Kind::kRows) << "rows walked in RBLOCK tiles";
  EXPECT_EQ(combine.domain.kind, kir::Domain::Kind::kRowBlock) << "rows, their partials an SBLOCK tile";
  EXPECT_EQ(partial.domain.size, 1);
  EXPECT_EQ(combine.constexprs, (std::vector<std::string>{"XBLOCK", "SBLOCK"}));
  EXPECT_EQ(partial.pointers, kernel.launches[0].pointers.size());
  EXPECT_EQ(combine.pointers, kernel.launches[1].pointers.size());
  ASSERT_EQ(kernel.scratch.size(), 1U);
  EXPECT_EQ(ScratchAccesses(partial, kir::Statement::Kind::kStore, 0), 1U) << "the partial writes it";
  EXPECT_EQ(ScratchAccesses(combine, kir::Statement::Kind::kLoad, 0), 1U) << "the combine reads it";
  EXPECT_EQ(ScratchAccesses(partial, kir::Statement::Kind::kLoad, 0), 0U);
  // the analyses see both functions' loads and stores, scratch left out
  EXPECT_EQ(kir::Reads(kernel), (std::set<int>{0, 1}));
  EXPECT_EQ(kir::Writes(kernel), std::set<int>{graph.nodes.back().value});
  EXPECT_EQ(kernel.computed, (std::set<int>{0, 1, 2}));
  EXPECT_FALSE(kernel.int64_indexing);
}

TEST(SplitReductionWriterTest, EachPartialOfAWelfordTripleIsATypedScratchAccess) {
  const kir::Kernel kernel = LowerSplit(RowReduction("aten.var.correction", {Json::array({1})}), 4, 2048);
  ASSERT_EQ(kernel.functions.size(), 2U);
  ASSERT_EQ(kernel.scratch.size(), 3U);
  for (size_t i = 0; i < kernel.scratch.size(); ++i) {
    EXPECT_EQ(ScratchAccesses(kernel.functions[0], kir::Statement::Kind::kStore, i), 1U) << i;
    EXPECT_EQ(ScratchAccesses(kernel.functions[1], kir::Statement::Kind::kLoad, i), 1U) << i;
  }
  EXPECT_EQ(kir::Reads(kernel).size(), 1U) << "x";
  EXPECT_EQ(kir::Writes(kernel).size(), 1U) << "the variance";
}

TEST(SplitReductionWriterTest, ThePrintedKernelIsTheIrsPrint) {
  const Graph graph = RowReduction("aten.argmax.default", {1}, "float32", "int64");
  const KernelSource source = WriteSplit(graph, 8, 1024);
  EXPECT_EQ(source.code, kir::Print(LowerSplit(graph, 8, 1024)));
  // the combine's header: rows, no RBLOCK tile
  const size_t combine = source.code.find("def " + source.name + "(");
  ASSERT_NE(combine, std::string::npos) << source.code;
  EXPECT_EQ(source.code.find("rbase = tl.arange(0, RBLOCK)", combine), std::string::npos) << source.code;
  EXPECT_TRUE(Has(source.code,
                  "    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]\n    xmask = xindex < 4\n"
                  "    sindex = tl.arange(0, SBLOCK)[None, :]\n"))
      << source.code;
}

}  // namespace
}  // namespace egg::expert
