// The emitter's indirect reads: gather, index_select, index with index tensors and embedding, each a load of
// its source at positions another tensor holds (read at the same output index first).
#include <fmt/format.h>

#include <algorithm>

#include "expert/codegen/emitter.h"
#include "expert/patterns/node_args.h"

namespace egg::expert {
namespace {

// PyTorch's broadcast of two shapes (aligned on the right; NotFusable where they disagree).
std::vector<int64_t> BroadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1;
    const int64_t y = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (x != y && x != 1 && y != 1) {
      throw NotFusable("index tensors do not broadcast");
    }
    out[out.size() - 1 - k] = x == 1 ? y : x;
  }
  return out;
}

}  // namespace

Operand KernelEmitter::Gather(const Node& node, const Value& out, const std::vector<Index>& index) {
  const int source = node.args.at(0).value;
  const auto& in_shape = ShapeOf(graph_, source);
  if (node.op == "aten.index_select.default") {
    return IndexSelect(node, index);
  }
  if (node.op == "aten.index.Tensor") {
    return IndexTensor(node, index);
  }
  if (node.op == "aten.embedding.default") {
    return Embedding(node, index);
  }
  if (node.op.rfind("aten.upsample_", 0) == 0) {
    return Interpolate(node, out, index);
  }
  const auto dim = static_cast<size_t>(NormalizeDim(IntOf(node, 1, "dim", 0), in_shape.size()));
  const int index_value = node.args.at(2).value;
  const auto position_index = BroadcastIndex(index, out.meta->shape, ShapeOf(graph_, index_value));
  std::vector<Index> source_index = index;
  source_index.resize(in_shape.size());
  source_index[dim] = Positions(index_value, position_index, in_shape[dim], false);
  return Emit(source, source_index);
}

// The positions `index_value` holds at `position_index`, as a runtime index into a dim of `size` (negative
// positions count from the end where `wrap`); a load at it takes the masks of the lanes they were read at.
Index KernelEmitter::Positions(int index_value, const std::vector<Index>& position_index, int64_t size,
                               bool wrap) {
  Operand positions = Emit(index_value, position_index);
  if (wrap) {
    positions = Bind(fmt::format("tl.where({0} < 0, {0} + {1}, {0})", positions.code, size), positions.dtype);
  }
  for (const Index& component : position_index) {
    for (const auto& [var, mask] : masks_.vars) {
      if (component.Uses(var)) {
        runtime_vars_[positions.code].insert(var);
      }
    }
  }
  return Index::Runtime(positions.code, 0, size - 1);
}

// index_select(x, dim, positions): the dim is read at the positions the 1-D index tensor holds at the
// output's index in its place.
Operand KernelEmitter::IndexSelect(const Node& node, const std::vector<Index>& index) {
  const int source = node.args.at(0).value;
  const auto& in_shape = ShapeOf(graph_, source);
  const auto dim = static_cast<size_t>(NormalizeDim(IntOf(node, 1, "dim", 0), in_shape.size()));
  const int index_value = node.args.at(2).value;
  if (graph_.values.at(static_cast<size_t>(index_value)).meta->dtype == DType::kBool ||
      ShapeOf(graph_, index_value).size() != 1 || index.size() != in_shape.size()) {
    throw NotFusable(node.name + ": unsupported index");
  }
  std::vector<Index> source_index = index;
  source_index[dim] = Positions(index_value, {index[dim]}, in_shape[dim], true);
  return Emit(source, source_index);
}

// x[..., i, j, ...] (aten.index.Tensor): the index tensors broadcast together to one shape B, and each reads
// its dim at the positions it holds at the output's index into B (negative ones from the end). Adjacent index
// tensors put B in their place in the output, separated ones put it first (NumPy's rule).
Operand KernelEmitter::IndexTensor(const Node& node, const std::vector<Index>& index) {
  const int source = node.args.at(0).value;
  const auto& in_shape = ShapeOf(graph_, source);
  const auto& indices = node.args.at(1).list;
  std::vector<std::pair<size_t, int>> tensors;  // (dim, index tensor)
  std::vector<int64_t> broadcast;
  for (size_t k = 0; k < indices.size(); ++k) {
    if (indices[k].kind == Arg::Kind::kValue) {
      const Value& positions = graph_.values.at(static_cast<size_t>(indices[k].value));
      if (!positions.meta || positions.meta->dtype == DType::kBool) {
        throw NotFusable(node.name + ": a boolean or scalar index");
      }
      tensors.emplace_back(k, indices[k].value);
      broadcast = BroadcastShapes(broadcast, positions.meta->shape);
    } else if (indices[k].kind != Arg::Kind::kNone) {
      throw NotFusable(node.name + ": unsupported index");
    }
  }
  const size_t rank = broadcast.size();
  if (tensors.empty() || indices.size() > in_shape.size() ||
      index.size() != in_shape.size() - tensors.size() + rank) {
    throw NotFusable(node.name + ": unsupported index");
  }
  const bool adjacent = tensors.back().first - tensors.front().first + 1 == tensors.size();
  const size_t first = adjacent ? tensors.front().first : 0;  // where B is in the output
  const std::vector<Index> at(index.begin() + static_cast<std::ptrdiff_t>(first),
                              index.begin() + static_cast<std::ptrdiff_t>(first + rank));
  std::vector<Index> source_index(in_shape.size());
  std::vector<bool> indexed(in_shape.size(), false);
  for (const auto& [dim, value] : tensors) {
    const auto& shape = ShapeOf(graph_, value);
    source_index[dim] =
        Positions(value, shape == broadcast ? at : BroadcastIndex(at, broadcast, shape), in_shape[dim], true);
    indexed[dim] = true;
  }
  size_t out_dim = 0;
  bool placed = false;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (!placed && out_dim == first) {
      out_dim += rank;
      placed = true;
    }
    if (!indexed[d]) {
      source_index[d] = index[out_dim++];
    }
  }
  return Emit(source, source_index);
}

// embedding(weight, positions): row positions[i...] of the [rows, features] table at output [i..., feature].
Operand KernelEmitter::Embedding(const Node& node, const std::vector<Index>& index) {
  const int weight = node.args.at(0).value;
  const int positions = node.args.at(1).value;
  const auto& weight_shape = ShapeOf(graph_, weight);
  const auto& positions_shape = ShapeOf(graph_, positions);
  if (weight_shape.size() != 2 || index.size() != positions_shape.size() + 1) {
    throw NotFusable(node.name + ": unsupported embedding");
  }
  const std::vector<Index> at(index.begin(), index.end() - 1);
  return Emit(weight, {Positions(positions, at, weight_shape[0], false), index.back()});
}

}  // namespace egg::expert
