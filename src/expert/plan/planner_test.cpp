// The planner: fused reductions, epilogues, pooling, scans and products.
#include <gtest/gtest.h>

#include <algorithm>

#include "expert/codegen/candidate_file.h"
#include "expert/codegen/kernel_codegen.h"
#include "expert/design/candidate.h"
#include "expert/design/defaults.h"
#include "expert/ir/test_graphs.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::Fixture;
using testing::FixtureJson;
using testing::LoadGraph;
using testing::Scaled;

TEST(PlannerTest, SoftmaxIsOneFusedReductionKernel) {
  const Graph graph = Fixture("level1_23_Softmax");
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  EXPECT_EQ(kernel.kind, KernelKind::kReduction);
  EXPECT_EQ(kernel.reductions.size(), 2U);  // amax and sum over the same rows
  EXPECT_EQ(kernel.rows, 48);
  EXPECT_EQ(kernel.length, 64);
  EXPECT_TRUE(kernel.online_candidate);
  ASSERT_EQ(kernel.stores.size(), 1U);  // only the output: the row statistics stay in registers
  EXPECT_TRUE(plan.extern_ops.empty());
}

TEST(PlannerTest, GroupNormStatisticsAndEpilogueShareOneKernel) {
  const Graph graph = Fixture("level1_35_GroupNorm_");
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U) << (plan.notes.empty() ? "" : plan.notes[0]);
  EXPECT_EQ(plan.kernels[0].reductions.size(), 2U);
  // Without epilogue fusion the elementwise output gets its own kernel.
  PlanOptions apart;
  apart.fuse_epilogues = false;
  EXPECT_EQ(MakePlan(graph, apart).kernels.size(), 2U);
}

TEST(PlannerTest, FewLongRowsSplitAcrossPrograms) {
  const Graph graph = LoadGraph(Scaled(FixtureJson("level1_94_MSELoss"), 64, 8192));
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  EXPECT_EQ(kernel.rows, 1);
  EXPECT_TRUE(kernel.splittable);
  const KernelDesign design = DefaultDesign(kernel, 0);
  EXPECT_EQ(design.algorithm, Algorithm::kSplit);
  EXPECT_GE(design.split, 2);
  const KernelSource source = GenerateKernel(graph, [&] {
    KernelPlan k = kernel;
    k.design = design;
    return k;
  }(), plan.memory_before[0], {{graph.outputs[0].value, DenseLayout(*graph.ValueOf(graph.outputs[0]).meta)}});
  ASSERT_EQ(source.launches.size(), 2U);  // partials, then the combine
  EXPECT_EQ(source.scratch.size(), 1U);
  EXPECT_NE(source.code.find("tl.program_id(1)"), std::string::npos);
}

TEST(PlannerTest, LayerNormOnLongRowsKeepsTheEpilogueApartAndSplitsWelford) {
  const Graph graph = LoadGraph(Scaled(FixtureJson("level1_40_LayerNorm"), 12, 4096));
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 2U);
  EXPECT_EQ(plan.kernels[0].kind, KernelKind::kReduction);
  EXPECT_EQ(plan.kernels[0].rows, 16);
  EXPECT_TRUE(plan.kernels[0].splittable);
  EXPECT_EQ(plan.kernels[1].kind, KernelKind::kPointwise);
  const Candidate candidate = GenerateCandidate(graph, "", "layernorm", {});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_NE(candidate.source->find("_egg_welford("), std::string::npos);
  EXPECT_EQ(candidate.design.kernels.begin()->second.algorithm, Algorithm::kSplit);
}

TEST(PlannerTest, PoolingAndScansGetTheirOwnKernels) {
  const Plan pool = MakePlan(Fixture("level1_42_Max_Pooling_2D"), {});
  ASSERT_EQ(pool.kernels.size(), 1U);
  EXPECT_EQ(pool.kernels[0].kind, KernelKind::kPool);
  EXPECT_EQ(pool.kernels[0].pool->kind, PoolKind::kMax);
  const Plan scan = MakePlan(Fixture("level1_92_cumsum_exclusive"), {});
  ASSERT_GE(scan.kernels.size(), 1U);
  EXPECT_EQ(scan.kernels[0].kind, KernelKind::kScan);
}

TEST(PlannerTest, GemmWithItsEpilogueIsOneTritonKernel) {
  const Graph graph = Fixture("level2_12_Gemm_Multiply_LeakyReLU");  // x @ W.T + b, * s, leaky_relu
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kMatmul);
  ASSERT_TRUE(kernel.matmul);
  EXPECT_GE(kernel.matmul->bias, 0);  // addmm's bias added on the accumulator
  EXPECT_EQ(kernel.roots.size(), 2U);  // the product and the graph output; the epilogue in between stays in registers
  const Candidate candidate = GenerateCandidate(graph, "", "gemm", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  const std::string& source = *candidate.source;
  EXPECT_EQ(Count(source, "tl.dot("), 1U);
  EXPECT_EQ(Count(source, "tl.store("), 1U);  // only the activation's result goes to memory
  EXPECT_NE(source.find("input_precision=\"ieee\""), std::string::npos);
}

TEST(PlannerTest, TransposedAndBatchedOperandsAreIndexArithmetic) {
  const Graph transposed = Fixture("level1_16_Matmul_with_transposed_A");
  const Candidate a = GenerateCandidate(transposed, "", "mm", CandidateDesign{});
  ASSERT_TRUE(a.source) << a.problem;
  EXPECT_EQ(Count(*a.source, "@triton.jit\ndef egg_k"), 1U);  // no copy kernel for A.T
  const Graph batched = Fixture("level1_3_Batched_matrix_multiplication");
  const Plan plan = MakePlan(batched, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  ASSERT_TRUE(plan.kernels[0].matmul);
  EXPECT_TRUE(plan.kernels[0].matmul->batched);
  const Candidate b = GenerateCandidate(batched, "", "bmm", CandidateDesign{});
  ASSERT_TRUE(b.source) << b.problem;
  EXPECT_NE(b.source->find("bindex = tl.program_id(1)"), std::string::npos);
}

TEST(PlannerTest, ExclusiveCumsumScansIntoItsSliceBesideAZeroColumn) {
  // cat([zeros_like(x[:, :1]), cumsum(x[:, :-1], 1)], 1): the scan stores one column to the right in the
  // output, a second kernel writes the zero column without reading x, nothing copies the concatenation.
  const Graph graph = Fixture("level1_92_cumsum_exclusive");
  const Candidate candidate = GenerateCandidate(graph, "", "cumsum_exclusive", {});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  const std::string& code = *candidate.source;
  ASSERT_EQ(candidate.kernels.size(), 2U);
  EXPECT_EQ(candidate.kernels[0].kind, "scan");
  EXPECT_NE(code.find("v_cumsum = v_cat.narrow(1, 1, "), std::string::npos);
  EXPECT_NE(code.find("v_full_like = v_cat.narrow(1, 0, 1)"), std::string::npos);
  const size_t zeros = code.find("def egg_k1_full_like(");
  ASSERT_NE(zeros, std::string::npos);
  const std::string body = code.substr(zeros, code.find("@triton.jit", zeros) - zeros);
  EXPECT_EQ(body.find("tl.load("), std::string::npos) << body;
  EXPECT_NE(body.find("tl.store("), std::string::npos) << body;
}

TEST(PlannerTest, ProductsOfTypesNoKernelLowersRunInPyTorchWithANote) {
  const Graph float64 = LoadGraph(
      testing::Retyped(FixtureJson("level1_3_Batched_matrix_multiplication"), "float32", "float64"));
  const Plan plan = MakePlan(float64, {});
  EXPECT_EQ(plan.extern_ops, std::vector<std::string>{"aten.bmm.default"});
  ASSERT_EQ(plan.notes.size(), 1U);
  EXPECT_NE(plan.notes[0].find("runs in PyTorch: aten.bmm.default on float64"), std::string::npos)
      << plan.notes[0];
  const Plan lstm = MakePlan(
      LoadGraph(testing::Retyped(FixtureJson("level3_38_LSTMBidirectional"), "float32", "float64")), {});
  EXPECT_TRUE(std::any_of(lstm.notes.begin(), lstm.notes.end(), [](const std::string& note) {
    return note.find("aten.lstm.input on float64") != std::string::npos;
  })) << "a float64 recurrent layer stays in PyTorch, said so";
  // a bf16 one is a recurrent kernel (half types are storage types there too)
  const Plan half = MakePlan(
      LoadGraph(testing::Retyped(FixtureJson("level3_38_LSTMBidirectional"), "float32", "bfloat16")), {});
  EXPECT_TRUE(half.extern_ops.empty());
  EXPECT_TRUE(std::any_of(half.kernels.begin(), half.kernels.end(), [](const KernelPlan& kernel) {
    return kernel.kind == KernelKind::kRecurrent && kernel.recurrent->dtype == DType::kBFloat16;
  }));
  EXPECT_TRUE(MakePlan(Fixture("level1_3_Batched_matrix_multiplication"), {}).notes.empty());
}

}  // namespace
}  // namespace egg::expert
