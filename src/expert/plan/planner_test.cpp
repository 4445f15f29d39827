#include <gtest/gtest.h>

#include <algorithm>

#include "expert/codegen/candidate_file.h"
#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/lowering_probe.h"
#include "expert/design/candidate.h"
#include "expert/design/defaults.h"
#include "expert/design/design_space.h"
#include "expert/design/legality.h"
#include "expert/ir/test_graphs.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

using testing::Fixture;
using testing::FixtureJson;
using testing::LoadGraph;
using testing::Scaled;

size_t Count(const std::string& text, const std::string& word) {
  size_t count = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    ++count;
  }
  return count;
}

TEST(GraphTest, ParsesCapturedGraphs) {
  const Graph graph = Fixture("level2_1_Conv2D_ReLU_BiasAdd");
  ASSERT_EQ(graph.nodes.size(), 3U);
  EXPECT_EQ(graph.nodes[0].op, "aten.convolution.default");
  EXPECT_EQ(graph.Inputs().size(), 1U);
  const auto state = std::count_if(graph.values.begin(), graph.values.end(),
                                   [](const Value& v) { return v.kind == ValueKind::kState; });
  EXPECT_EQ(state, 3);
  EXPECT_EQ(graph.outputs.size(), 1U);
}

TEST(GraphTest, RejectsMalformedDocuments) {
  EXPECT_FALSE(ParseGraph(Json::object()).graph);
  Json ir = FixtureJson("level1_23_Softmax");
  ir["nodes"][1]["args"][0] = Json{{"node", "nowhere"}};
  const ParsedGraph parsed = ParseGraph(ir);
  EXPECT_FALSE(parsed.graph);
  EXPECT_NE(parsed.problem.find("unknown value nowhere"), std::string::npos);
  ir = FixtureJson("level1_23_Softmax");
  ir["version"] = 99;
  EXPECT_FALSE(ParseGraph(ir).graph);
}

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

TEST(PlannerTest, ConvolutionIsOneImplicitGemmKernelWithItsEpilogue) {
  const Graph graph = Fixture("level2_1_Conv2D_ReLU_BiasAdd");  // conv 12->16, 3x3 on 16x12x16x16, relu, + bias
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  EXPECT_EQ(kernel.kind, KernelKind::kMatmul);
  ASSERT_TRUE(kernel.matmul && kernel.matmul->conv);
  const MatmulSpec& mm = *kernel.matmul;
  EXPECT_EQ(mm.m, 16 * 14 * 14);  // images x output positions
  EXPECT_EQ(mm.n, 16);            // output channels (one group)
  EXPECT_EQ(mm.k, 12 * 3 * 3);    // input channels x kernel positions
  EXPECT_GE(mm.bias, 0);
  const Candidate candidate = GenerateCandidate(graph, "", "conv", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_EQ(Count(*candidate.source, "tl.dot("), 1U);
  EXPECT_EQ(Count(*candidate.source, "tl.store("), 1U);  // the convolution's own output never reaches memory
  EXPECT_EQ(Count(*candidate.source, "valid = "), 0U);  // no padding: no bounds mask on the gathered input
}

TEST(PlannerTest, PaddedConvolutionPrologueLoadsParametersOncePerColumn) {
  // level2_1 with a prologue (relu(x * scale), scale per input channel) and padding 1: only the gathered
  // input can fall outside its tensor; the per-channel scale is a BLOCK_K row, not a tile masked by the
  // padding test.
  Json ir = FixtureJson("level2_1_Conv2D_ReLU_BiasAdd");
  const Json meta_x = ir["inputs"][0]["meta"];
  const Json scale_meta = {{"shape", {12, 1, 1}}, {"stride", {1, 1, 1}}, {"offset", 0}, {"dtype", "float32"}};
  ir["state"].push_back({{"name", "p_scale"},
                         {"kind", "parameter"},
                         {"target", "scale"},
                         {"persistent", false},
                         {"meta", scale_meta}});
  Json mul = {{"name", "mul"}, {"op", "aten.mul.Tensor"}, {"args", {{{"node", "x"}}, {{"node", "p_scale"}}}},
              {"kwargs", Json::object()}, {"meta", meta_x}};
  Json relu0 = {{"name", "relu_0"}, {"op", "aten.relu.default"}, {"args", {{{"node", "mul"}}}},
                {"kwargs", Json::object()}, {"meta", meta_x}};
  const Json out_meta = {
      {"shape", {16, 16, 16, 16}}, {"stride", {4096, 256, 16, 1}}, {"offset", 0}, {"dtype", "float32"}};
  Json& conv = ir["nodes"][0];
  conv["args"][0] = {{"node", "relu_0"}};
  conv["args"][4] = {1, 1};
  for (Json& node : ir["nodes"]) {
    node["meta"] = out_meta;
  }
  ir["nodes"].insert(ir["nodes"].begin(), {mul, relu0});
  const Graph graph = LoadGraph(ir);
  const Candidate candidate = GenerateCandidate(graph, "", "conv_prologue", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_EQ(Count(*candidate.source, "valid = "), 1U);
  EXPECT_EQ(Count(*candidate.source, "(valid)"), 1U) << *candidate.source;  // the input gather alone
  EXPECT_NE(candidate.source->find("(kchannel), kamask, other=0.0)"), std::string::npos) << *candidate.source;
}

TEST(PlannerTest, TransposedConvolutionIsOneDenseConvolutionPerPhase) {
  // ConvTranspose2d 16->16 on 16x16, kernel (3, 5), stride (2, 3), padding (1, 2), dilation (2, 1), groups 4:
  // output 33x46 as positions q * stride + phase, 2 x 3 phases per group.
  const Graph graph = Fixture("level1_75_conv_transposed_2D_strided_grouped");
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kMatmul);
  const MatmulSpec& mm = *kernel.matmul;
  ASSERT_TRUE(mm.conv && mm.conv->transposed);
  EXPECT_EQ(mm.batch, 4 * 2 * 3);   // groups x phases
  EXPECT_EQ(mm.m, 16 * 17 * 16);    // images x ceil(33 / 2) x ceil(46 / 3)
  EXPECT_EQ(mm.n, 4);               // output channels per group
  // Input channels per group x the most taps of a phase: along dim 0 (dilation 2 = stride) odd phases take no
  // tap and even ones all 3; along dim 1 the phases take offsets {2}, {0, 3}, {1, 4}.
  EXPECT_EQ(mm.k, 4 * 3 * 2);
  const std::vector<TransposedPhase> dim1 = TransposedPhases(*mm.conv, 1);
  ASSERT_EQ(dim1.size(), 3U);
  EXPECT_EQ(dim1[0].first, 2);
  EXPECT_EQ(dim1[0].count, 1);
  EXPECT_EQ(dim1[1].first, 0);
  EXPECT_EQ(dim1[1].count, 2);
  EXPECT_EQ(dim1[2].first, 1);
  EXPECT_EQ(dim1[2].count, 2);
  EXPECT_EQ(TransposedPhases(*mm.conv, 0)[0].count, 0);
  const Candidate candidate = GenerateCandidate(graph, "", "convt", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_NE(candidate.source->find("taps0 = tl.where("), std::string::npos);  // phases with no tap
  EXPECT_NE(candidate.source->find("tap1 = "), std::string::npos);            // the first offset per phase
  EXPECT_NE(candidate.source->find("mmask = mmask & "), std::string::npos);   // 33 and 46: uneven extents
  const size_t valid = candidate.source->find("valid = ");
  ASSERT_NE(valid, std::string::npos);
  const std::string loop_mask = candidate.source->substr(valid, candidate.source->find('\n', valid) - valid);
  EXPECT_EQ(loop_mask.find("== 0"), std::string::npos) << loop_mask;  // no per-tap divisibility test in the loop
}

// level2_1's convolution made a ConvTranspose2d 12->16, kernel 4x4, padding 1, stride `stride` (relu and + bias
// after it): the common decoder shape, where every phase takes the same taps.
Graph TransposedConvolutionWithEpilogue(int64_t stride) {
  Json ir = FixtureJson("level2_1_Conv2D_ReLU_BiasAdd");
  const int64_t size = 15 * stride - 2 + 3 + 1;
  ir["state"][1]["meta"]["shape"] = {12, 16, 4, 4};
  ir["state"][1]["meta"]["stride"] = {256, 16, 4, 1};
  Json& conv = ir["nodes"][0];
  conv["args"][3] = {stride, stride};
  conv["args"][4] = {1, 1};
  conv["args"][6] = true;
  for (Json& node : ir["nodes"]) {
    node["meta"]["shape"] = {16, 16, size, size};
    node["meta"]["stride"] = {16 * size * size, size * size, size, 1};
  }
  return LoadGraph(ir);
}

TEST(PlannerTest, StridedTransposedConvolutionKeepsItsEpilogueInThePhaseKernel) {
  const Graph graph = TransposedConvolutionWithEpilogue(2);  // 16x16 -> 32x32
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  ASSERT_EQ(plan.kernels.size(), 1U);
  const MatmulSpec& mm = *plan.kernels[0].matmul;
  EXPECT_EQ(mm.batch, 4);           // 2 x 2 phases
  EXPECT_EQ(mm.m, 16 * 16 * 16);    // images x 32 / 2 x 32 / 2
  EXPECT_EQ(mm.k, 12 * 2 * 2);      // input channels x 2 x 2 taps per phase (a quarter of the 4x4 kernel)
  const Candidate candidate = GenerateCandidate(graph, "", "convt", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_EQ(Count(*candidate.source, "tl.dot("), 1U);
  EXPECT_EQ(Count(*candidate.source, "tl.store("), 1U);  // only the epilogue's result reaches memory
  EXPECT_EQ(Count(*candidate.source, "taps"), 0U);       // equal tap counts: no per-tap mask
  EXPECT_EQ(Count(*candidate.source, "mmask = mmask"), 0U);  // 32 = 16 x 2: every phase fills its rows
}

TEST(PlannerTest, UnitStrideTransposedConvolutionIsAPlainConvolution) {
  const Graph graph = TransposedConvolutionWithEpilogue(1);  // 16x16 -> 17x17, the kernel's taps flipped
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const MatmulSpec& mm = *plan.kernels[0].matmul;
  EXPECT_EQ(mm.batch, 1);
  EXPECT_EQ(mm.m, 16 * 17 * 17);
  EXPECT_EQ(mm.k, 12 * 4 * 4);
  const Candidate candidate = GenerateCandidate(graph, "", "convt", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_EQ(Count(*candidate.source, "phase"), 0U);
  EXPECT_EQ(Count(*candidate.source, "tl.store("), 1U);
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
  EXPECT_NE(candidate.source->find("_egg_welford_combine"), std::string::npos);
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

TEST(PlannerTest, MatmulDesignsKeepTlDotTiles) {
  const Plan plan = MakePlan(Fixture("level1_3_Batched_matrix_multiplication"), {});
  const KernelPlan& kernel = plan.kernels.at(0);
  for (int seed = 0; seed < 3; ++seed) {
    EXPECT_TRUE(DesignFits(kernel, DefaultDesign(kernel, seed))) << seed;
  }
  KernelDesign design = DefaultDesign(kernel, 0);
  design.rblock = 8;  // tl.dot needs 16 or more on every side
  EXPECT_FALSE(DesignFits(kernel, design));
  design = DefaultDesign(kernel, 0);
  design.precision =
      Precision::kUnset;  // a tl.dot kernel records its precision (an unknown one never parses)
  EXPECT_FALSE(DesignFits(kernel, design));
}

TEST(PlannerTest, RecurrentLayerStackIsOneTritonKernel) {
  // 38_LSTMBidirectional at reduced size: lstm(x [10, 64, 32], (h0, c0) [12, 10, 48]), 6 layers x 2 directions,
  // batch_first; the last step of the output feeds a linear layer.
  const Graph graph = Fixture("level3_38_LSTMBidirectional");
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  ASSERT_EQ(plan.kernels.size(), 2U);
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kRecurrent);
  EXPECT_EQ(KernelKindName(kernel.kind), "recurrent");
  ASSERT_TRUE(kernel.recurrent);
  const RecurrentSpec& rnn = *kernel.recurrent;
  EXPECT_EQ(rnn.cell, RecurrentCell::kLstm);
  EXPECT_EQ(rnn.layers, 6);
  EXPECT_TRUE(rnn.bidirectional && rnn.batch_first && rnn.has_biases);
  EXPECT_EQ(rnn.seq, 64);
  EXPECT_EQ(rnn.batch, 10);
  EXPECT_EQ(rnn.hidden, 48);
  EXPECT_EQ(rnn.params.size(), 6U * 2U * 4U);
  EXPECT_GE(rnn.c0, 0);
  ASSERT_EQ(kernel.stores.size(), 1U);  // the output sequence, which the addmm reads; h_n and c_n are unused
  EXPECT_EQ(kernel.stores[0], rnn.outputs[0]);
  EXPECT_EQ(plan.kernels[1].kind, KernelKind::kMatmul);
  for (int seed = 0; seed < 3; ++seed) {
    EXPECT_TRUE(DesignFits(kernel, DefaultDesign(kernel, seed))) << seed;
  }
  KernelDesign design = DefaultDesign(kernel, 0);
  design.yblock = 8;  // tl.dot needs 16 or more on every side
  EXPECT_FALSE(DesignFits(kernel, design));

  CandidateDesign tf32;
  tf32.precision = Precision::kTf32;
  const Candidate candidate = GenerateCandidate(graph, "", "lstm", tf32);
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_TRUE(candidate.pytorch_ops.empty());
  EXPECT_EQ(candidate.kernels.at(0).kind, "recurrent");
  EXPECT_EQ(candidate.kernels.at(0).ops, std::vector<std::string>{"aten.lstm.input"});
  EXPECT_EQ(candidate.design.kernels.at(kernel.name).precision, Precision::kTf32);
  const std::string& source = *candidate.source;
  EXPECT_EQ(Count(source, "def egg_k0_lstm_proj("), 1U);  // one projection and one time loop for every layer
  EXPECT_EQ(Count(source, "def egg_k0_lstm_step("), 1U);
  EXPECT_EQ(Count(source, "egg_k0_lstm_proj[("), 12U);  // a launch per layer and direction
  EXPECT_EQ(Count(source, "egg_k0_lstm_step[("), 12U);
  EXPECT_EQ(Count(source, "tl.dot(h, "), 4U);  // i, f, g, o
  EXPECT_NE(source.find("input_precision=\"tf32\""), std::string::npos);
  EXPECT_NE(source.find("tl.debug_barrier()"), std::string::npos);
  // 48 hidden units, 16 a program: three programs per batch block share every step (one in the interpreter),
  // meeting at a counter per layer, direction and batch block, zeroed each call.
  EXPECT_EQ(Count(source, "egg_k0_lstm_step[(1, 1 if EGG_INTERPRET.value else 3)]("), 12U);
  EXPECT_NE(source.find("torch.zeros((12,), device=x.device, dtype=torch.int32)"), std::string::npos);
  EXPECT_NE(source.find("while tl.atomic_add(sync, 0, sem=\"acquire\", scope=\"gpu\") < (s + 1) * programs:"),
            std::string::npos);
  EXPECT_NE(source.find("def _egg_tanh("), std::string::npos);
  EXPECT_EQ(*GenerateCandidate(graph, "", "lstm", candidate.design).source, source);
}

TEST(PlannerTest, GruKeepsTheHiddenSideOfItsNewGateApart) {
  // 42_GRUBidirectionalHidden at reduced size: gru(x [64, 10, 32], h0 [12, 10, 48]), returns h_n.
  const Graph graph = Fixture("level3_42_GRUBidirectionalHidden");
  const Candidate candidate = GenerateCandidate(graph, "", "gru", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_TRUE(candidate.pytorch_ops.empty());
  ASSERT_EQ(candidate.plan.kernels.size(), 1U);
  const KernelPlan& kernel = candidate.plan.kernels[0];
  ASSERT_TRUE(kernel.recurrent);
  EXPECT_EQ(kernel.recurrent->cell, RecurrentCell::kGru);
  EXPECT_EQ(kernel.recurrent->c0, -1);
  ASSERT_EQ(kernel.stores.size(), 1U);
  EXPECT_EQ(kernel.stores[0], kernel.recurrent->outputs[1]);  // h_n; the output sequence lives in scratch
  const std::string& source = *candidate.source;
  EXPECT_EQ(Count(source, "tl.dot(h, "), 3U);  // r, z, n
  EXPECT_NE(source.find("n = _egg_tanh(x2 + r * pre2)"), std::string::npos);
  EXPECT_NE(source.find("input_precision=\"ieee\""), std::string::npos);
  EXPECT_EQ(source.find("cbuf_ptr"), std::string::npos);  // no cell state
}

TEST(CandidateTest, SourceDefinesModelNewAndCarriesItsDesign) {
  const Graph graph = Fixture("level1_23_Softmax");
  CandidateDesign design;
  design.seed = 1;
  const Candidate candidate = GenerateCandidate(graph, "class Model: pass\n", "23_Softmax.py", design);
  ASSERT_TRUE(candidate.source) << candidate.problem;
  const std::string& source = *candidate.source;
  EXPECT_NE(source.find("class ModelNew(Model):"), std::string::npos);
  EXPECT_NE(source.find("def egg_precompile():"), std::string::npos);
  EXPECT_NE(source.find("return super().forward(x)"), std::string::npos);  // the shape guard's fallback
  EXPECT_EQ(Count(source, "@triton.jit\ndef egg_k"), 1U);
  // The file shows its design record to people; the same record regenerates the same file.
  EXPECT_NE(source.find(kDesignMarker + candidate.design.ToJson().dump() + "\n"), std::string::npos);
  EXPECT_EQ(*GenerateCandidate(graph, "class Model: pass\n", "23_Softmax.py", candidate.design).source,
            source);
}

TEST(CandidateTest, SeedsAreDifferentAlgorithms) {
  const Graph graph = LoadGraph(Scaled(FixtureJson("level1_23_Softmax"), 64, 65536));
  std::vector<Algorithm> algorithms;
  for (int seed = 0; seed < 3; ++seed) {
    CandidateDesign design;
    design.seed = seed;
    const Candidate candidate = GenerateCandidate(graph, "", "softmax", design);
    ASSERT_TRUE(candidate.source) << candidate.problem;
    algorithms.push_back(candidate.design.kernels.begin()->second.algorithm);
  }
  EXPECT_EQ(algorithms[0], Algorithm::kOnline);  // one pass: running max with a rescaled sum
  EXPECT_EQ(algorithms[1], Algorithm::kLooped);  // two passes over the row
}

TEST(CandidateTest, InvalidKernelDesignsFallBackToDefaults) {
  const Graph graph = Fixture("level1_23_Softmax");
  const Plan plan = MakePlan(graph, {});
  KernelDesign bad = DefaultDesign(plan.kernels[0], 0);
  bad.xblock = 3;  // not a power of two
  EXPECT_FALSE(DesignFits(plan.kernels[0], bad));
  bad = DefaultDesign(plan.kernels[0], 0);
  bad.algorithm = Algorithm::kPersistent;
  bad.rblock = 16;  // a persistent tile must cover the row
  EXPECT_FALSE(DesignFits(plan.kernels[0], bad));
  CandidateDesign design;
  design.kernels[plan.kernels[0].name] = bad;
  const Candidate candidate = GenerateCandidate(graph, "", "softmax", design);
  ASSERT_TRUE(candidate.source);
  EXPECT_TRUE(DesignFits(plan.kernels[0], candidate.design.kernels.at(plan.kernels[0].name)));
}

}  // namespace
}  // namespace egg::expert

namespace egg::expert {
namespace {

TEST(FittingStagesTest, EveryStagedOperandTileCountsAgainstSharedMemory) {
  KernelDesign design;
  design.xblock = 128;
  design.yblock = 64;
  design.rblock = 32;
  design.num_stages = 3;
  EXPECT_EQ(FittingStages(design, 1, 1), 3) << "one A and one B tile: 72 KB in three stages";
  EXPECT_EQ(FittingStages(design, 4, 1), 2) << "four A tiles: 72 KB a stage";
  design.rblock = 64;
  EXPECT_EQ(FittingStages(design, 4, 1), 1) << "never below one stage";
  design.num_stages = 1;
  EXPECT_EQ(FittingStages(design, 1, 1), 1) << "never above the design's stages";
}

TEST(PlannerTest, SplitKOnlyForFewTilesOverADeepK) {
  MatmulSpec deep;
  deep.m = 256;
  deep.n = 256;
  deep.k = 524288;  // KernelBench 1_6
  KernelDesign tile;
  tile.xblock = 64;
  tile.yblock = 64;
  tile.rblock = 32;
  EXPECT_EQ(SplitKFactor(deep, tile), 16);  // 16 tiles x 16 slices: two waves of 132 SMs at most
  MatmulSpec square = deep;
  square.k = 256;
  EXPECT_EQ(SplitKFactor(square, tile), 1);  // K too shallow: a slice must keep 8 steps of 32
  MatmulSpec many = deep;
  many.m = 4096;
  many.n = 4096;
  EXPECT_EQ(SplitKFactor(many, tile), 1);  // 4096 tiles fill the GPU already
  MatmulSpec conv = deep;
  conv.conv = ConvShape{};
  EXPECT_EQ(SplitKFactor(conv, tile), 1);
  MatmulSpec batched = deep;
  batched.batch = 8;
  EXPECT_EQ(SplitKFactor(batched, tile), 2);  // 128 tiles x 2
}

// A matrix-product kernel over [m x k] @ [k x n], no graph behind it: what DefaultDesign and DesignFits read.
KernelPlan ProductKernel(int64_t m, int64_t n, int64_t k) {
  KernelPlan kernel;
  kernel.kind = KernelKind::kMatmul;
  kernel.name = "egg_k0_mm";
  MatmulSpec product;
  product.m = m;
  product.n = n;
  product.k = k;
  kernel.matmul = product;
  return kernel;
}

TEST(PlannerTest, MatVecProductsTakeTheGemvSeed) {
  KernelPlan kernel = ProductKernel(2048, 1, 1048576);  // KernelBench 1_4: [2048 x 1048576] @ [1048576 x 1]
  const MatmulSpec mv = *kernel.matmul;
  ASSERT_TRUE(MatVecFits(mv));
  const KernelDesign gemv = DefaultDesign(kernel, 0);
  EXPECT_EQ(gemv.algorithm, Algorithm::kGemv);
  EXPECT_EQ(gemv.yblock, 1);
  EXPECT_EQ(gemv.xblock, 16);
  EXPECT_EQ(gemv.rblock, 512);
  EXPECT_EQ(gemv.split, 2);  // 128 row blocks x 2 K slices: two waves of 132 SMs at most
  EXPECT_TRUE(DesignFits(kernel, gemv));
  EXPECT_EQ(DefaultDesign(kernel, 1).algorithm, Algorithm::kTiled);  // the tl.dot seed to measure against
  KernelDesign tf32 = gemv;
  tf32.precision = Precision::kTf32;  // FMA products: a precision choice would only duplicate the design
  EXPECT_FALSE(DesignFits(kernel, tf32));
  KernelDesign wide = gemv;
  wide.yblock = 16;
  EXPECT_FALSE(DesignFits(kernel, wide));
  MatmulSpec matrix = mv;
  matrix.n = 2;
  EXPECT_FALSE(MatVecFits(matrix));
  kernel.matmul = matrix;
  EXPECT_FALSE(DesignFits(kernel, gemv));
  EXPECT_NE(DefaultDesign(kernel, 0).algorithm, Algorithm::kGemv);
  MatmulSpec conv = mv;
  conv.conv = ConvShape{};
  EXPECT_FALSE(MatVecFits(conv));  // a one-channel convolution is the direct kernel's
}

TEST(PlannerTest, MisalignedOperandRowsTakeTheAlignedSeed) {
  KernelPlan kernel = ProductKernel(8205, 5921, 2949);  // KernelBench 1_8: [8205 x 2949] @ [2949 x 5921]
  const MatmulSpec irregular = *kernel.matmul;
  ASSERT_TRUE(AlignedCopyFits(irregular));
  const KernelDesign seed0 = DefaultDesign(kernel, 0, Precision::kTf32x3);
  EXPECT_EQ(seed0.algorithm, Algorithm::kAligned);
  EXPECT_TRUE(DesignFits(kernel, seed0));
  EXPECT_EQ(DefaultDesign(kernel, 1, Precision::kIeee).algorithm,
            Algorithm::kTiled);  // operands in place, to measure against
  MatmulSpec square = irregular;
  square.n = 5920;
  square.k = 2948;
  EXPECT_FALSE(AlignedCopyFits(square));  // rows of multiples of 4 floats start 16-byte aligned already
  kernel.matmul = square;
  EXPECT_FALSE(DesignFits(kernel, seed0));
  MatmulSpec small = irregular;
  small.m = small.n = small.k = 257;  // misaligned, but two operand copies would cost as much as the product
  kernel.matmul = small;
  EXPECT_EQ(DefaultDesign(kernel, 0, Precision::kTf32x3).algorithm, Algorithm::kTiled);
  MatmulSpec mv = irregular;
  mv.n = 1;
  EXPECT_FALSE(AlignedCopyFits(mv));
  MatmulSpec conv = irregular;
  conv.conv = ConvShape{};
  EXPECT_FALSE(AlignedCopyFits(conv));
}

const KernelPlan* AttentionKernel(const Plan& plan) {
  for (const KernelPlan& kernel : plan.kernels) {
    if (kernel.kind == KernelKind::kAttention) {
      return &kernel;
    }
  }
  return nullptr;
}

bool HasKind(const Plan& plan, KernelKind kind) {
  return std::any_of(plan.kernels.begin(), plan.kernels.end(),
                     [&](const KernelPlan& kernel) { return kernel.kind == kind; });
}

const Node& NodeNamed(const Graph& graph, const std::string& name) {
  return *std::find_if(graph.nodes.begin(), graph.nodes.end(),
                       [&](const Node& node) { return node.name == name; });
}

TEST(PlannerTest, AttentionIsOneFlashKernel) {
  // SDPA (1_97 reduced: 2 x 2 heads x 64 x 32): the scale split onto Q and K, _safe_softmax's guard
  const Graph sdpa = Fixture("level1_97_ScaledDotProductAttention");
  const Plan plan = MakePlan(sdpa, {});
  const KernelPlan* flash = AttentionKernel(plan);
  ASSERT_NE(flash, nullptr);
  EXPECT_FALSE(HasKind(plan, KernelKind::kReduction));
  EXPECT_FALSE(HasKind(plan, KernelKind::kMatmul));
  const AttentionSpec& at = *flash->attention;
  EXPECT_TRUE(at.safe);
  EXPECT_EQ(at.batch, 4);
  EXPECT_EQ(at.lq, 64);
  EXPECT_EQ(at.lk, 64);
  EXPECT_EQ(at.d, 32);
  EXPECT_EQ(at.dv, 32);
  const KernelDesign seed = DefaultDesign(*flash, 0);
  EXPECT_EQ(seed.algorithm, Algorithm::kFlash);
  EXPECT_EQ(seed.precision, Precision::kTf32x3);  // never ieee
  EXPECT_TRUE(DesignFits(*flash, seed));
  KernelDesign ieee = seed;
  ieee.precision = Precision::kIeee;
  EXPECT_FALSE(DesignFits(*flash, ieee));
  EXPECT_EQ(plan.unfused_attention, 0);
  KernelPlan wide = *flash;
  wide.attention->d = 256;  // K and V tiles of 256 columns: fewer keys a step, one stage
  EXPECT_EQ(DefaultDesign(wide, 0).yblock, 32);
  EXPECT_EQ(DefaultDesign(wide, 0).num_stages, 1);

  // MinGPT (3_43, reduced): the scale on the scores, masked_fill(bias == 0, -inf), plain softmax
  const Plan gpt = MakePlan(Fixture("level3_43_MinGPTCausalAttention"), {});
  const KernelPlan* causal = AttentionKernel(gpt);
  ASSERT_NE(causal, nullptr);
  EXPECT_FALSE(causal->attention->safe);
  EXPECT_GE(causal->attention->mask, 0);  // masked_fill(bias == 0, -inf): masked key blocks are skipped
  EXPECT_TRUE(causal->attention->masked_when);
  EXPECT_EQ(at.mask, -1);
  EXPECT_EQ(causal->attention->d, 16);
  EXPECT_FALSE(HasKind(gpt, KernelKind::kReduction));
}

TEST(PlannerTest, AttentionUnfusedOnRequestOrWhenItsScoresAreRead) {
  const Graph sdpa = Fixture("level1_97_ScaledDotProductAttention");
  PlanOptions options;
  options.fuse_attention = false;
  const Plan unfused = MakePlan(sdpa, options);
  EXPECT_EQ(AttentionKernel(unfused), nullptr);
  EXPECT_TRUE(HasKind(unfused, KernelKind::kReduction));
  EXPECT_EQ(unfused.unfused_attention, 1);
  // the switch is in the design record only when false, and reads back
  CandidateDesign design;
  design.plan = options;
  EXPECT_EQ(design.ToJson()["plan"]["fuse_attention"], false);
  EXPECT_FALSE(CandidateDesign::FromJson(design.ToJson()).plan.fuse_attention);
  EXPECT_FALSE(CandidateDesign{}.ToJson()["plan"].contains("fuse_attention"));
  const Candidate seed1 = GenerateCandidate(sdpa, "", "sdpa", SeedDesign(1, 1e-4).design);
  EXPECT_FALSE(seed1.design.plan.fuse_attention);
  const Candidate seed0 = GenerateCandidate(sdpa, "", "sdpa", SeedDesign(0, 1e-2).design);
  ASSERT_TRUE(seed0.source.has_value()) << seed0.problem;
  EXPECT_EQ(Count(*seed0.source, "tl.dot("), 2U);
  EXPECT_EQ(Count(*seed0.source, "input_precision=\"tf32\""), 2U);  // the tolerance's products
  const Candidate softmax =
      GenerateCandidate(Fixture("level1_23_Softmax"), "", "softmax", SeedDesign(1, 1e-4).design);
  EXPECT_TRUE(softmax.design.plan.fuse_attention);  // no attention: nothing recorded

  // the scores are also a graph output: they must be stored, no flash kernel
  Json ir = FixtureJson("level1_97_ScaledDotProductAttention");
  ir["outputs"].push_back(Json{{"node", "bmm"}});
  EXPECT_EQ(AttentionKernel(MakePlan(LoadGraph(ir), {})), nullptr);
  // a head dim over 256 does not fit the flash kernel's registers
  const Graph wide = LoadGraph(Scaled(FixtureJson("level1_97_ScaledDotProductAttention"), 32, 512));
  EXPECT_FALSE(ParseAttention(wide, NodeNamed(wide, "bmm_1")));
  EXPECT_TRUE(ParseAttention(sdpa, NodeNamed(sdpa, "bmm_1")));
}

TEST(PlannerTest, AttentionDesignMovesSwitchFlashAndUnfused) {
  const Graph sdpa = Fixture("level1_97_ScaledDotProductAttention");
  const Candidate flash = GenerateCandidate(sdpa, "", "sdpa", SeedDesign(0, 1e-4).design);
  ASSERT_TRUE(flash.source.has_value()) << flash.problem;
  const auto algorithm = StageMoves(sdpa, "stage1.algorithm", flash, "", 8);
  ASSERT_FALSE(algorithm.empty());
  EXPECT_FALSE(algorithm.front().design.plan.fuse_attention);
  const Candidate unfused = GenerateCandidate(sdpa, "", "sdpa", algorithm.front().design);
  ASSERT_TRUE(unfused.source.has_value()) << unfused.problem;
  EXPECT_EQ(AttentionKernel(unfused.plan), nullptr);
  const auto back = StageMoves(sdpa, "stage1.algorithm", unfused, "", 8);
  EXPECT_TRUE(std::any_of(back.begin(), back.end(), [](const DesignMove& move) {
    return move.design.plan.fuse_attention && move.move == "algorithm attention flash";
  }));
  const std::string name = AttentionKernel(flash.plan)->name;
  for (const std::string stage : {"stage2.mapping", "stage2.tiling", "stage2.memory"}) {
    const auto moves = StageMoves(sdpa, stage, flash, name, 8);
    EXPECT_FALSE(moves.empty()) << stage;
    for (const DesignMove& move : moves) {
      const KernelDesign& design = move.design.kernels.at(name);
      EXPECT_EQ(design.algorithm, Algorithm::kFlash) << move.move;
      EXPECT_TRUE(GenerateCandidate(sdpa, "", "sdpa", move.design).source.has_value()) << move.move;
    }
  }
}

TEST(PlannerTest, DirectConvolutionOnlyForSmallGroups) {
  MatmulSpec depthwise;
  depthwise.conv = ConvShape{};
  depthwise.conv->in_channels = 64;
  depthwise.conv->groups = 64;
  depthwise.conv->kernel = {3, 3};
  depthwise.n = 1;
  EXPECT_TRUE(DirectConvolutionFits(depthwise));
  MatmulSpec wide = depthwise;
  wide.conv->groups = 1;  // 64 input channels x 9 taps per output: a GEMM's K
  wide.n = 64;
  EXPECT_FALSE(DirectConvolutionFits(wide));
  MatmulSpec transposed = depthwise;
  transposed.conv->transposed = true;
  EXPECT_FALSE(DirectConvolutionFits(transposed));
  EXPECT_FALSE(DirectConvolutionFits(MatmulSpec{}));  // a plain product
  KernelPlan kernel;
  kernel.kind = KernelKind::kMatmul;
  kernel.matmul = depthwise;
  kernel.matmul->m = 2 * 14 * 14;
  kernel.matmul->batch = 64;
  EXPECT_EQ(DefaultDesign(kernel, 0).algorithm, Algorithm::kDirect);
  EXPECT_EQ(DefaultDesign(kernel, 0).xblock, 1024);
  EXPECT_EQ(DefaultDesign(kernel, 1).algorithm, Algorithm::kTiled);
  EXPECT_TRUE(DesignFits(kernel, DefaultDesign(kernel, 0)));
  KernelDesign tf32 = DefaultDesign(kernel, 0);
  tf32.precision = Precision::kTf32;  // direct products are float32 FMAs
  EXPECT_FALSE(DesignFits(kernel, tf32));
}

TEST(PlannerTest, ChannelsLastConvolutionRepacksItsInputThenLoopsOverTaps) {
  // conv 12->16, 3x3 on 16x12x16x16, relu, + bias
  const Graph graph = Fixture("level2_1_Conv2D_ReLU_BiasAdd");
  const Candidate tiled = GenerateCandidate(graph, "", "conv", SeedDesign(1, 1e-4).design);
  ASSERT_TRUE(tiled.source) << tiled.problem;
  const KernelPlan& kernel = tiled.plan.kernels.at(0);
  ASSERT_EQ(kernel.design.algorithm, Algorithm::kTiled);
  const std::string name = kernel.name;
  const auto moves = StageMoves(graph, "stage1.algorithm", tiled, "", 8);
  const auto nhwc_move = std::find_if(moves.begin(), moves.end(), [&](const DesignMove& move) {
    return move.move == "algorithm " + name + " nhwc";
  });
  ASSERT_NE(nhwc_move, moves.end());
  const KernelDesign& design = nhwc_move->design.kernels.at(name);
  EXPECT_EQ(design.algorithm, Algorithm::kNhwc);
  EXPECT_EQ(design.rblock, 16);  // a K step spans the 12 channels of one tap, not (channel, tap) pairs
  EXPECT_EQ(design.xblock, kernel.design.xblock);
  EXPECT_EQ(design.precision, kernel.design.precision);
  const Candidate nhwc = GenerateCandidate(graph, "", "conv", nhwc_move->design);
  ASSERT_TRUE(nhwc.source) << nhwc.problem;
  const std::string& source = *nhwc.source;
  EXPECT_EQ(nhwc.launches, 3U);  // the input's and the weight's copies, then the GEMM
  EXPECT_NE(source.find(name + "_nhwc[(triton.cdiv(4096, 128), triton.cdiv(12, 16))]("), std::string::npos)
      << source;
  EXPECT_NE(source.find(name + "_scratch0 = torch.empty((49152,)"), std::string::npos);  // 16 x 16 x 16 x 12
  EXPECT_NE(source.find(name + "_scratch1 = torch.empty((1728,)"), std::string::npos);   // 16 x (9 taps x 12)
  EXPECT_NE(source.find(name + "_weight[(triton.cdiv(16, 16), triton.cdiv(108, 32))]("), std::string::npos);
  // the weight tile contiguous along K: (output channel, tap, channel) rows
  EXPECT_NE(source.find("b = tl.load(ptr1 + (kbindex + 108*nindex + 12*tap), kbmask & nmask, other=0.0)"),
            std::string::npos);
  EXPECT_NE(source.find("channels-last implicit GEMM"), std::string::npos);
  EXPECT_NE(source.find("tl.store(ptr1 + (pindex * 12 + cindex)"), std::string::npos);
  EXPECT_NE(source.find("for tap in range(9):"), std::string::npos);  // ieee FMA products: not unrolled
  EXPECT_NE(source.find("for k0 in range(0, 12, BLOCK_K):"), std::string::npos);
  EXPECT_NE(source.find("tl.load(ptr0 + (tbase + kaindex), tvalid & kamask, other=0.0)"), std::string::npos);
  EXPECT_EQ(Count(source, "tl.dot("), 1U);
  EXPECT_EQ(Count(source, "tl.store("), 3U);  // the two copies and the output with its fused epilogue
  // and back: the NCHW gather in the same tiles
  const auto back = StageMoves(graph, "stage1.algorithm", nhwc, "", 8);
  EXPECT_TRUE(std::any_of(back.begin(), back.end(), [&](const DesignMove& move) {
    return move.move == "algorithm " + name + " tiled" &&
           move.design.kernels.at(name).algorithm == Algorithm::kTiled;
  }));
  // seed 2 is channels-last from 16 channels a group: 12 would leave a K step of 16 a quarter padding
  EXPECT_EQ(DefaultDesign(kernel, 2, Precision::kTf32x3).algorithm, Algorithm::kTiled);
  KernelPlan wider = kernel;
  wider.matmul->conv->in_channels = 32;
  wider.matmul->k = 32 * 9;
  const KernelDesign seed2 = DefaultDesign(wider, 2, Precision::kTf32x3);
  EXPECT_EQ(seed2.algorithm, Algorithm::kNhwc);
  EXPECT_EQ(seed2.rblock, 32);  // the group's channels, under the seed's 64
  EXPECT_TRUE(DesignFits(wider, seed2));
  CandidateDesign unrolled = nhwc_move->design;
  unrolled.kernels[name].precision = Precision::kTf32x3;  // tensor-core products: the 3x3 taps unrolled
  const Candidate tf32x3 = GenerateCandidate(graph, "", "conv", unrolled);
  ASSERT_TRUE(tf32x3.source) << tf32x3.problem;
  EXPECT_NE(tf32x3.source->find("for tap in tl.static_range(9):"), std::string::npos);
  MatmulSpec pointwise = *kernel.matmul;  // a 1x1 convolution is a dense GEMM over NCHW already
  pointwise.conv->kernel = {1, 1};
  pointwise.conv->padding = {0, 0};
  EXPECT_FALSE(ChannelsLastConvolutionFits(pointwise));
  pointwise.conv->stride = {2, 2};  // strided: its rows gather
  EXPECT_TRUE(ChannelsLastConvolutionFits(pointwise));
  KernelDesign wide = design;
  wide.rblock = 32;  // wider than the group's channels: masked lanes only
  EXPECT_FALSE(DesignFits(nhwc.plan.kernels.at(0), wide));
  KernelPlan transposed = nhwc.plan.kernels.at(0);
  transposed.matmul->conv->transposed = true;
  EXPECT_FALSE(DesignFits(transposed, design));
}

}  // namespace
}  // namespace egg::expert
