#include "expert/patterns/recurrent.h"

#include <gtest/gtest.h>

#include "expert/ir/test_graphs.h"
#include "expert/ir/test_nodes.h"

namespace egg::expert {
namespace {

TEST(RecurrentPatternTest, BidirectionalLstmStack) {
  const Graph graph = testing::Fixture("level3_38_LSTMBidirectional");  // x [10, 64, 32], h0 [12, 10, 48]
  const auto rnn = ParseRecurrent(graph, testing::NodeWithOp(graph, "aten.lstm.input"));
  ASSERT_TRUE(rnn);
  EXPECT_EQ(rnn->cell, RecurrentCell::kLstm);
  EXPECT_TRUE(rnn->bidirectional);
  EXPECT_EQ(rnn->Directions(), 2);
  EXPECT_EQ(rnn->Gates(), 4);
  EXPECT_EQ(rnn->layers, 6);
  EXPECT_EQ(rnn->hidden, 48);
  EXPECT_EQ(rnn->input_size, 32);
  EXPECT_GE(rnn->c0, 0);
  const std::vector<int> last = rnn->LayerParams(5, 1);
  ASSERT_EQ(last.size(), 4U);
  EXPECT_EQ(last[0], rnn->params.at(rnn->params.size() - 4)) << "the last layer's reverse w_ih";
}

}  // namespace
}  // namespace egg::expert
