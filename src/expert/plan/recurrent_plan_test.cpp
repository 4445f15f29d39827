// Recurrent layer stacks (LSTM, GRU) planned as one kernel.
#include <gtest/gtest.h>

#include "expert/codegen/candidate_file.h"
#include "expert/design/candidate.h"
#include "expert/design/defaults.h"
#include "expert/design/legality.h"
#include "expert/ir/test_graphs.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::Fixture;

TEST(RecurrentPlanTest, RecurrentLayerStackIsOneTritonKernel) {
  // 38_LSTMBidirectional at reduced size: lstm(x [10, 64, 32], (h0, c0) [12, 10, 48]), 6 layers x 2
  // directions, batch_first; the last step of the output feeds a linear layer.
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

TEST(RecurrentPlanTest, GruKeepsTheHiddenSideOfItsNewGateApart) {
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

}  // namespace
}  // namespace egg::expert
