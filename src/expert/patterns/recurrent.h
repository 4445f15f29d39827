// Whole recurrent layer stacks (LSTM, GRU, tanh/ReLU RNN), parsed from one aten node each.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "expert/ir/graph.h"
#include "expert/ir/name_table.h"

namespace egg::expert {

// num_layers, dropout, train, bidirectional, batch_first) in fp32 (lstm's hx is [h0, c0], no projections):
// params hold per layer and direction w_ih [gates * hidden, in], w_hh [gates * hidden, hidden][, b_ih, b_hh].
// The cell of a recurrent layer; its name is the aten op's (aten.lstm.input) and the template's flag.
enum class RecurrentCell { kLstm, kGru, kRnnTanh, kRnnRelu };

template <>
struct EnumNames<RecurrentCell> {
  static constexpr std::array<std::pair<RecurrentCell, std::string_view>, 4> kTable{{
      {RecurrentCell::kLstm, "lstm"},
      {RecurrentCell::kGru, "gru"},
      {RecurrentCell::kRnnTanh, "rnn_tanh"},
      {RecurrentCell::kRnnRelu, "rnn_relu"},
  }};
};

struct RecurrentSpec {
  RecurrentCell cell = RecurrentCell::kLstm;
  int node = -1;
  int input = -1;
  int h0 = -1;
  int c0 = -1;  // lstm only
  std::vector<int> params;
  bool has_biases = true;
  bool bidirectional = false;
  bool batch_first = false;
  int64_t layers = 1, seq = 0, batch = 0, input_size = 0, hidden = 0;
  DType dtype = DType::kFloat32;  // of the input, states, weights and outputs alike (float32, bf16 or fp16)
  std::vector<int> outputs;  // output, h_n[, c_n]: the getitem values, -1 where unused
  int64_t Directions() const { return bidirectional ? 2 : 1; }
  int64_t Gates() const { return cell == RecurrentCell::kLstm ? 4 : (cell == RecurrentCell::kGru ? 3 : 1); }
  // The params of one layer and direction: w_ih, w_hh, b_ih, b_hh (-1 without biases).
  std::vector<int> LayerParams(int64_t layer, int64_t direction) const;
};
std::optional<RecurrentSpec> ParseRecurrent(const Graph& graph, const Node& node);

}  // namespace egg::expert
