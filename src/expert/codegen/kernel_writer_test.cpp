// The kernel writer's common part: accumulator identities and types, the anchor index of a row kernel, and
// pointwise kernels as GenerateKernel writes them (their launch, what they read and compute, what they store
// and when their offsets need 64 bits).
#include "expert/codegen/kernel_writer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "expert/codegen/test_kernels.h"
#include "expert/design/defaults.h"
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

// Kernel `k` of `plan`, written as the candidate file writes it: reading plan.memory_before, storing its
// stores dense.
KernelSource Write(const Graph& graph, const Plan& plan, size_t k) {
  return testing::GenerateWithDenseStores(graph, plan.kernels.at(k), plan.memory_before.at(k));
}

// relu(x) * y over [4, 8], y broadcast from [8].
Graph ReluTimes(const std::string& dtype = "float32") {
  return LoadGraph(
      GraphJson({Input("x", 0, Meta({4, 8}, dtype)), Input("y", 1, Meta({8}, dtype))},
                {NodeJson("relu", "aten.relu.default", Json::array({Ref("x")}), Meta({4, 8}, dtype)),
                 NodeJson("mul", "aten.mul.Tensor", {Ref("relu"), Ref("y")}, Meta({4, 8}, dtype))},
                {"mul"}));
}

TEST(KernelWriterTest, AccumulatorsStartFromTheirIdentity) {
  using writer::Identity;
  EXPECT_EQ(Identity(ReductionKind::kMax, DType::kFloat32), "float('-inf')");
  EXPECT_EQ(Identity(ReductionKind::kArgmax, DType::kFloat32), "float('-inf')");
  EXPECT_EQ(Identity(ReductionKind::kMax, DType::kInt64), "(-9223372036854775807 - 1)");
  EXPECT_EQ(Identity(ReductionKind::kMax, DType::kInt32), "-2147483648");
  EXPECT_EQ(Identity(ReductionKind::kArgmin, DType::kUInt8), "255");
  EXPECT_EQ(Identity(ReductionKind::kMinWithIndex, DType::kFloat32), "float('inf')");
  EXPECT_EQ(Identity(ReductionKind::kMin, DType::kInt32), "2147483647");
  EXPECT_EQ(Identity(ReductionKind::kMin, DType::kInt64), "9223372036854775807");
  EXPECT_EQ(Identity(ReductionKind::kProd, DType::kFloat32), "1");
  EXPECT_EQ(Identity(ReductionKind::kAll, DType::kBool), "1");
  EXPECT_EQ(Identity(ReductionKind::kSum, DType::kFloat32), "0");
  EXPECT_EQ(Identity(ReductionKind::kAny, DType::kBool), "0");
}

TEST(KernelWriterTest, AccumulatorTypesWidenSumsAndKeepComparisons) {
  using writer::AccumulatorType;
  EXPECT_EQ(AccumulatorType(ReductionKind::kSum, DType::kBFloat16), DType::kFloat32)
      << "halves add in float32";
  EXPECT_EQ(AccumulatorType(ReductionKind::kSum, DType::kFloat64), DType::kFloat64);
  EXPECT_EQ(AccumulatorType(ReductionKind::kSum, DType::kInt32), DType::kInt64);
  EXPECT_EQ(AccumulatorType(ReductionKind::kMean, DType::kInt8), DType::kInt64);
  EXPECT_EQ(AccumulatorType(ReductionKind::kProd, DType::kUInt8), DType::kInt64);
  EXPECT_EQ(AccumulatorType(ReductionKind::kMax, DType::kInt16), DType::kInt16) << "a max keeps its type";
  EXPECT_EQ(AccumulatorType(ReductionKind::kAny, DType::kBool), DType::kInt32);
  EXPECT_EQ(AccumulatorType(ReductionKind::kAll, DType::kFloat32), DType::kInt32);
}

TEST(KernelWriterTest, RowsCombineWithTheirKindsOperation) {
  using writer::RowCombine;
  EXPECT_EQ(RowCombine(ReductionKind::kMax), kir::Combine::kMax);
  EXPECT_EQ(RowCombine(ReductionKind::kAny), kir::Combine::kMax);
  EXPECT_EQ(RowCombine(ReductionKind::kMin), kir::Combine::kMin);
  EXPECT_EQ(RowCombine(ReductionKind::kAll), kir::Combine::kMin);
  EXPECT_EQ(RowCombine(ReductionKind::kSum), kir::Combine::kAdd);
  EXPECT_EQ(RowCombine(ReductionKind::kMean), kir::Combine::kAdd);
  EXPECT_EQ(RowCombine(ReductionKind::kProd), kir::Combine::kMul);
  EXPECT_EQ(kir::Print(writer::RowReduce("red0", "acc0", ReductionKind::kProd)),
            "red0 = tl.reduce(acc0, 1, _egg_prod)[:, None]");
  EXPECT_EQ(kir::Print(writer::RowReduce("red1", "acc1", ReductionKind::kAll)),
            "red1 = _egg_min(acc1, 1)[:, None]");
}

TEST(KernelWriterTest, SmallHelpersOfTheWriter) {
  EXPECT_TRUE(writer::Contains({3, 5, 8}, 5));
  EXPECT_FALSE(writer::Contains({3, 5, 8}, 4));
  EXPECT_FALSE(writer::Contains({}, 0));
  const Graph graph = testing::Fixture("level1_42_Max_Pooling_2D");
  const Node& pool = graph.nodes[0];
  EXPECT_THROW(writer::MetaOf(graph, pool.value), NotFusable) << "a tuple has no tensor type";
  EXPECT_EQ(writer::MetaOf(graph, graph.nodes[1].value).shape, (std::vector<int64_t>{8, 12, 15, 15}));
  KernelPlan kernel;
  kernel.roots = {graph.nodes[1].value, graph.Inputs()[0]};
  EXPECT_EQ(writer::Summary(graph, kernel), "getitem, x");
}

TEST(KernelWriterTest, AnchorIndexPutsRowAndReducedPositionsInTheirDims) {
  const Index x = Index::Var("xindex", 8);
  const Index r = Index::Var("rindex", 3);
  // [2, 3, 4] reduced over dim 1: rows over (2, 4), the row's positions over 3.
  std::vector<Index> index = AnchorIndex({2, 3, 4}, {1}, x, r);
  ASSERT_EQ(index.size(), 3U);
  EXPECT_EQ(index[0], x.FloorDiv(4));
  EXPECT_EQ(index[1], r);
  EXPECT_EQ(index[2], x.Mod(4));
  // Reduced over the last two dims of [2, 3, 4]: rows over 2, positions over 12.
  const Index r12 = Index::Var("rindex", 12);
  index = AnchorIndex({2, 3, 4}, {1, 2}, Index::Var("xindex", 2), r12);
  EXPECT_EQ(index[0], Index::Var("xindex", 2));
  EXPECT_EQ(index[1], r12.FloorDiv(4));
  EXPECT_EQ(index[2], r12.Mod(4));
}

TEST(KernelWriterTest, APointwiseKernelLaunchesOverItsElements) {
  const Graph graph = ReluTimes();
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kPointwise);
  const KernelSource source = Write(graph, plan, 0);
  EXPECT_EQ(source.name, kernel.name);
  ASSERT_EQ(source.launches.size(), 1U);
  const KernelLaunch& launch = source.launches[0];
  EXPECT_EQ(launch.function, kernel.name);
  EXPECT_EQ(launch.grid, "(triton.cdiv(32, " + std::to_string(kernel.design.xblock) + "),)");
  EXPECT_EQ(launch.constexprs, (std::map<std::string, int64_t>{{"XBLOCK", kernel.design.xblock}}));
  // Pointers: the two inputs and the output, as many as the function's parameters.
  EXPECT_EQ(launch.pointers.size(), 3U);
  EXPECT_NE(source.code.find("def " + kernel.name + "(ptr0, ptr1, ptr2, XBLOCK: tl.constexpr):"),
            std::string::npos)
      << source.code;
  EXPECT_EQ(source.loaded, (std::set<int>{0, 1})) << "x and y";
  EXPECT_EQ(source.computed, (std::set<int>{0, 1})) << "relu and mul";
  EXPECT_FALSE(source.int64_indexing);
  EXPECT_EQ(source.code.find(".to(tl.int64)"), std::string::npos);
  EXPECT_NE(source.code.find("xmask = xindex < 32"), std::string::npos) << source.code;
  EXPECT_EQ(Count(source.code, "tl.store("), 1U);
  EXPECT_EQ(Count(source.code, "tl.load("), 2U);
  EXPECT_NE(source.code.find("# pointwise over 32 elements: mul"), std::string::npos) << source.code;
}

TEST(KernelWriterTest, OnlyTheKernelsStoresAreWritten) {
  const Graph graph = ReluTimes();
  Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  KernelPlan& kernel = plan.kernels[0];
  const int relu = graph.nodes[0].value;
  const int mul = graph.nodes[1].value;
  kernel.roots = {relu, mul};
  kernel.stores = {relu, mul};
  KernelSource source = Write(graph, plan, 0);
  EXPECT_EQ(Count(source.code, "tl.store("), 2U);
  EXPECT_EQ(Count(source.code, "tl.load("), 2U) << "relu is computed once, not reloaded";
  std::vector<int> pointers = source.launches[0].pointers;
  std::sort(pointers.begin(), pointers.end());
  EXPECT_EQ(pointers, (std::vector<int>{0, 1, 2, 3})) << "x, y, relu's output and mul's output, once each";
  kernel.stores = {mul};
  source = Write(graph, plan, 0);
  EXPECT_EQ(Count(source.code, "tl.store("), 1U);
  EXPECT_EQ(source.launches[0].pointers.size(), 3U);
}

TEST(KernelWriterTest, HalfTypesAreLoadedUpcastAndStoredInTheirType) {
  const Graph graph = ReluTimes("bfloat16");
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelSource source = Write(graph, plan, 0);
  EXPECT_EQ(Count(source.code, ".to(tl.float32)"), 2U) << source.code;
  EXPECT_EQ(Count(source.code, ".to(tl.bfloat16)"), 1U) << source.code;
}

TEST(KernelWriterTest, OffsetsPastInt32UseInt64) {
  // 2^16 x 2^15 + 2^16 elements: past 2^31 - 1.
  const std::vector<int64_t> shape = {65536, 32769};
  const Graph graph = LoadGraph(
      GraphJson({Input("x", 0, Meta(shape))},
                {NodeJson("neg", "aten.neg.default", Json::array({Ref("x")}), Meta(shape))}, {"neg"}));
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelSource source = Write(graph, plan, 0);
  EXPECT_TRUE(source.int64_indexing);
  EXPECT_NE(source.code.find("tl.program_id(0).to(tl.int64) * XBLOCK"), std::string::npos) << source.code;
  EXPECT_NE(source.code.find("xmask = xindex < 2147549184"), std::string::npos) << source.code;
}

TEST(KernelWriterTest, PrecompileCallsGiveEveryLaunchItsPointerTypesAndConstants) {
  const Graph graph = testing::Fixture("level2_25_Conv2d_Min_Tanh_Tanh");
  const auto only = testing::OnlyKernel(graph, KernelKind::kMatmul, {});
  ASSERT_TRUE(only);
  KernelPlan kernel = only->first;
  kernel.design =
      DefaultDesign(kernel, 1);  // the NCHW gather: one launch (seed 0's copies the operands first)
  const KernelSource source = testing::GenerateWithDenseStores(graph, kernel, only->second);
  const std::vector<std::string> calls = PrecompileCalls(graph, kernel, source);
  ASSERT_EQ(calls.size(), source.launches.size());
  // x, the weight, the bias and the one stored row value (the minimum's tanh): four float32 pointers
  EXPECT_EQ(calls[0].rfind(source.launches[0].function + ".warmup(torch.float32, torch.float32, "
                                                         "torch.float32, torch.float32, BLOCK_",
                           0),
            0U)
      << calls[0];
  EXPECT_NE(calls[0].find(fmt::format("BLOCK_N={}", kernel.design.yblock)), std::string::npos) << calls[0];
  EXPECT_NE(calls[0].find(fmt::format("num_warps={}, num_stages={}, grid=(1,))", kernel.design.num_warps,
                                      kernel.design.num_stages)),
            std::string::npos)
      << calls[0];
}

}  // namespace
}  // namespace egg::expert
