#include "expert/patterns/node_args.h"

#include <algorithm>

namespace egg::expert {

int64_t NormalizeDim(int64_t dim, size_t rank) {
  return dim < 0 ? dim + static_cast<int64_t>(std::max<size_t>(rank, 1)) : dim;
}

int64_t IntArg(const Node& node, size_t position, const std::string& key, int64_t fallback) {
  const Arg* arg = node.ArgAt(position, key);
  if (arg == nullptr || arg->kind != Arg::Kind::kInt) {
    return fallback;
  }
  return arg->i;
}

bool BoolArg(const Node& node, size_t position, const std::string& key, bool fallback) {
  const Arg* arg = node.ArgAt(position, key);
  if (arg == nullptr || arg->kind != Arg::Kind::kBool) {
    return fallback;
  }
  return arg->b;
}

std::vector<int> TupleOutputs(const Graph& graph, const Node& node, size_t count) {
  std::vector<int> outputs(count, -1);
  for (int user : ValueAt(graph, node.value).users) {
    const Node& getitem = graph.nodes.at(static_cast<size_t>(user));
    if (getitem.op != "getitem" || getitem.args.size() < 2 || getitem.args[1].kind != Arg::Kind::kInt) {
      continue;
    }
    const auto index = static_cast<size_t>(getitem.args[1].i);
    if (index < count) {
      outputs[index] = getitem.value;
    }
  }
  return outputs;
}

std::vector<int64_t> ExpandTo(std::vector<int64_t> values, int count, int64_t fallback) {
  if (values.empty()) {
    values.push_back(fallback);
  }
  while (static_cast<int>(values.size()) < count) {
    values.push_back(values.back());
  }
  return values;
}

const Value* TensorInput(const Graph& graph, const Node& node) {
  if (node.args.empty() || node.args[0].kind != Arg::Kind::kValue) {
    return nullptr;
  }
  const Value& input = ValueAt(graph, node.args[0].value);
  return input.meta ? &input : nullptr;
}
}  // namespace egg::expert
