#include "expert/patterns/pool.h"

#include <algorithm>

#include "expert/patterns/node_args.h"

namespace egg::expert {
namespace {

// An adaptive pool's windows (the widest as its kernel, stride 1) and its output: the values of a max's
// (values, indices) pair, or false when the indices are used (PyTorch computes them).
bool AdaptiveWindows(const Graph& graph, const Node& node, const TensorMeta& in,
                     const std::vector<int64_t>& sizes, PoolSpec* pool) {
  pool->adaptive = true;
  if (node.op.find("adaptive_max") != std::string::npos) {
    pool->kind = PoolKind::kMax;
    const auto outputs = TupleOutputs(graph, node, 2);
    if (outputs[1] >= 0 || outputs[0] < 0) {
      return false;
    }
    pool->output = outputs[0];
  } else {
    pool->kind = PoolKind::kAvg;
    pool->output = node.value;
  }
  const auto output_size = ExpandTo(sizes, pool->spatial, 1);
  const size_t first = in.shape.size() - static_cast<size_t>(pool->spatial);
  for (int s = 0; s < pool->spatial; ++s) {
    const int64_t in_size = in.shape[first + static_cast<size_t>(s)];
    const int64_t out_size = output_size[static_cast<size_t>(s)];
    int64_t widest = 1;
    for (int64_t o = 0; o < out_size; ++o) {
      const int64_t start = o * in_size / out_size;
      const int64_t end = ((o + 1) * in_size + out_size - 1) / out_size;
      widest = std::max(widest, end - start);
    }
    pool->kernel.push_back(widest);
    pool->stride.push_back(1);
    pool->padding.push_back(0);
    pool->dilation.push_back(1);
  }
  return true;
}

}  // namespace

std::optional<PoolSpec> ParsePool(const Graph& graph, const Node& node) {
  const Value* tensor = TensorInput(graph, node);
  if (tensor == nullptr) {
    return std::nullopt;
  }
  const Value& input = *tensor;
  PoolSpec pool;
  pool.node = static_cast<int>(&node - graph.nodes.data());
  pool.input = node.args[0].value;
  const std::string& op = node.op;
  pool.spatial = op.find("3d") != std::string::npos ? 3 : (op.find("1d") != std::string::npos ? 1 : 2);
  auto ints = [&](size_t position, const std::string& key) {
    const Arg* arg = node.ArgAt(position, key);
    return arg == nullptr ? std::vector<int64_t>{} : arg->AsInts().value_or(std::vector<int64_t>{});
  };
  const TensorMeta& in = *input.meta;
  if (static_cast<int>(in.shape.size()) < pool.spatial + 1) {
    return std::nullopt;
  }
  if (op.find("adaptive_") != std::string::npos) {
    if (!AdaptiveWindows(graph, node, in, ints(1, "output_size"), &pool)) {
      return std::nullopt;
    }
  } else {
    const bool is_max = op.find("max_pool") != std::string::npos;
    pool.kind = is_max ? PoolKind::kMax : PoolKind::kAvg;
    pool.kernel = ExpandTo(ints(1, "kernel_size"), pool.spatial, 1);
    pool.stride = ExpandTo(ints(2, "stride"), pool.spatial, 0);
    if (ints(2, "stride").empty()) {
      pool.stride = pool.kernel;
    }
    pool.padding = ExpandTo(ints(3, "padding"), pool.spatial, 0);
    if (is_max) {
      pool.dilation = ExpandTo(ints(4, "dilation"), pool.spatial, 1);
      pool.ceil_mode = BoolArg(node, 5, "ceil_mode", false);
    } else {
      pool.dilation = std::vector<int64_t>(static_cast<size_t>(pool.spatial), 1);
      pool.ceil_mode = BoolArg(node, 4, "ceil_mode", false);
      pool.count_include_pad = BoolArg(node, 5, "count_include_pad", true);
      const Arg* divisor = node.ArgAt(6, "divisor_override");
      if (divisor != nullptr && divisor->kind == Arg::Kind::kInt) {
        pool.divisor_override = divisor->i;
      }
    }
    if (op.find("with_indices") != std::string::npos) {
      const auto outputs = TupleOutputs(graph, node, 2);
      if (outputs[1] >= 0 || outputs[0] < 0) {
        return std::nullopt;  // the indices are used: PyTorch computes them
      }
      pool.output = outputs[0];
    } else {
      pool.output = node.value;
    }
  }
  if (!ValueAt(graph, pool.output).meta) {
    return std::nullopt;
  }
  return pool;
}
}  // namespace egg::expert
