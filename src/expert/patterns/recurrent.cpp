#include "expert/patterns/recurrent.h"

#include "expert/patterns/node_args.h"

namespace egg::expert {
namespace {

// A tensor argument of the layer's one type `dtype`, or -1.
int TensorArg(const Graph& graph, const Arg* arg, DType dtype) {
  if (arg == nullptr || arg->kind != Arg::Kind::kValue) {
    return -1;
  }
  const auto& meta = ValueAt(graph, arg->value).meta;
  return meta && meta->dtype == dtype ? arg->value : -1;
}

bool HasShape(const Graph& graph, int value, const std::vector<int64_t>& shape) {
  return value >= 0 && ValueAt(graph, value).meta->shape == shape;
}

// The layer's getitem users (output, h_n[, c_n]) into spec.outputs; false for a user of another kind or type.
bool ReadOutputs(const Graph& graph, const Node& node, RecurrentSpec* out) {
  RecurrentSpec& spec = *out;
  spec.outputs.assign(spec.cell == RecurrentCell::kLstm ? 3 : 2, -1);
  for (int user : ValueAt(graph, node.value).users) {
    const Node& getitem = graph.nodes.at(static_cast<size_t>(user));
    if (getitem.op != "getitem" || getitem.args.size() < 2 || getitem.args[1].kind != Arg::Kind::kInt ||
        getitem.args[1].i < 0 || getitem.args[1].i >= static_cast<int64_t>(spec.outputs.size()) ||
        !ValueAt(graph, getitem.value).meta || ValueAt(graph, getitem.value).meta->dtype != spec.dtype) {
      return false;
    }
    spec.outputs[static_cast<size_t>(getitem.args[1].i)] = getitem.value;
  }
  return true;
}

}  // namespace

std::vector<int> RecurrentSpec::LayerParams(int64_t layer, int64_t direction) const {
  const size_t per = has_biases ? 4 : 2;
  const auto first = static_cast<size_t>(layer * Directions() + direction) * per;
  std::vector<int> result = {params.at(first), params.at(first + 1), -1, -1};
  if (has_biases) {
    result[2] = params.at(first + 2);
    result[3] = params.at(first + 3);
  }
  return result;
}

std::optional<RecurrentSpec> ParseRecurrent(const Graph& graph, const Node& node) {
  RecurrentSpec spec;
  const std::string& op = node.op;
  const std::optional<RecurrentCell> cell =
      FromName<RecurrentCell>(op.substr(op.find('.') + 1, op.rfind('.') - op.find('.') - 1));
  if (!cell || op.substr(op.rfind('.') + 1) != "input" || node.args.size() < 9) {
    return std::nullopt;  // packed sequences (lstm.data) run in PyTorch
  }
  spec.cell = *cell;
  spec.node = static_cast<int>(&node - graph.nodes.data());
  const Arg& input = node.args[0];
  const auto& input_meta = input.kind == Arg::Kind::kValue ? ValueAt(graph, input.value).meta : std::nullopt;
  if (!input_meta || (input_meta->dtype != DType::kFloat32 && !IsHalf(input_meta->dtype))) {
    return std::nullopt;
  }
  spec.dtype = input_meta->dtype;  // every tensor of the layer shares it
  spec.input = TensorArg(graph, &input, spec.dtype);
  if (spec.cell == RecurrentCell::kLstm) {
    if (node.args[1].kind != Arg::Kind::kList || node.args[1].list.size() != 2) {
      return std::nullopt;
    }
    spec.h0 = TensorArg(graph, &node.args[1].list[0], spec.dtype);
    spec.c0 = TensorArg(graph, &node.args[1].list[1], spec.dtype);
    if (spec.c0 < 0) {
      return std::nullopt;
    }
  } else {
    spec.h0 = TensorArg(graph, &node.args[1], spec.dtype);
  }
  const Arg& dropout = node.args[5];
  if (spec.input < 0 || spec.h0 < 0 || node.args[2].kind != Arg::Kind::kList ||
      node.args[3].kind != Arg::Kind::kBool || node.args[4].kind != Arg::Kind::kInt || !dropout.IsNumber() ||
      node.args[6].kind != Arg::Kind::kBool || node.args[7].kind != Arg::Kind::kBool ||
      node.args[8].kind != Arg::Kind::kBool) {
    return std::nullopt;
  }
  if (node.args[6].b && dropout.AsDouble() != 0.0) {
    return std::nullopt;  // training-mode dropout between layers
  }
  spec.has_biases = node.args[3].b;
  spec.layers = node.args[4].i;
  spec.bidirectional = node.args[7].b;
  spec.batch_first = node.args[8].b;
  for (const Arg& param : node.args[2].list) {
    spec.params.push_back(TensorArg(graph, &param, spec.dtype));
  }
  const std::vector<int64_t>& x = ValueAt(graph, spec.input).meta->shape;
  const std::vector<int64_t>& h0 = ValueAt(graph, spec.h0).meta->shape;
  const int64_t directions = spec.Directions();
  if (x.size() != 3 || h0.size() != 3 || spec.layers < 1 ||
      spec.params.size() != static_cast<size_t>(spec.layers * directions * (spec.has_biases ? 4 : 2))) {
    return std::nullopt;  // lstm projections (proj_size) add a fifth weight per layer
  }
  spec.seq = spec.batch_first ? x[1] : x[0];
  spec.batch = spec.batch_first ? x[0] : x[1];
  spec.input_size = x[2];
  spec.hidden = h0[2];
  const int64_t gates = spec.Gates() * spec.hidden;
  if (h0 != std::vector<int64_t>{spec.layers * directions, spec.batch, spec.hidden} ||
      (spec.c0 >= 0 && !HasShape(graph, spec.c0, h0)) || spec.seq * spec.batch * spec.hidden == 0) {
    return std::nullopt;
  }
  for (int64_t layer = 0; layer < spec.layers; ++layer) {
    const int64_t in = layer == 0 ? spec.input_size : directions * spec.hidden;
    for (int64_t direction = 0; direction < directions; ++direction) {
      const std::vector<int> params = spec.LayerParams(layer, direction);
      if (!HasShape(graph, params[0], {gates, in}) || !HasShape(graph, params[1], {gates, spec.hidden}) ||
          (spec.has_biases &&
           (!HasShape(graph, params[2], {gates}) || !HasShape(graph, params[3], {gates})))) {
        return std::nullopt;
      }
    }
  }
  return ReadOutputs(graph, node, &spec) ? std::optional<RecurrentSpec>(spec) : std::nullopt;
}

}  // namespace egg::expert
