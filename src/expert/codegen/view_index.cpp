#include "expert/codegen/view_index.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "expert/ir/ops.h"
#include "expert/patterns/node_args.h"

namespace egg::expert {
namespace {

// A reshape maps groups of dimensions whose sizes multiply to the same product onto each other; only within a
// group that really splits or merges dimensions is a flat index formed. Size-1 dimensions map to index 0.
std::vector<Index> Reshape(const std::vector<Index>& index, const std::vector<int64_t>& out_shape,
                           const std::vector<int64_t>& in_shape) {
  std::vector<size_t> out_dims;
  std::vector<size_t> in_dims;
  for (size_t d = 0; d < out_shape.size(); ++d) {
    if (out_shape[d] != 1) {
      out_dims.push_back(d);
    }
  }
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (in_shape[d] != 1) {
      in_dims.push_back(d);
    }
  }
  std::vector<Index> result(in_shape.size(), Index(0));
  size_t i = 0;
  size_t j = 0;
  while (i < out_dims.size() && j < in_dims.size()) {
    std::vector<Index> group_index{index[out_dims[i]]};
    std::vector<int64_t> group_out{out_shape[out_dims[i]]};
    std::vector<int64_t> group_in{in_shape[in_dims[j]]};
    std::vector<size_t> group_in_dims{in_dims[j]};
    int64_t out_product = out_shape[out_dims[i++]];
    int64_t in_product = in_shape[in_dims[j++]];
    while (out_product != in_product) {
      if (out_product < in_product) {
        if (i >= out_dims.size()) {
          return Delinearize(Linearize(index, out_shape), in_shape);
        }
        group_index.push_back(index[out_dims[i]]);
        group_out.push_back(out_shape[out_dims[i]]);
        out_product *= out_shape[out_dims[i++]];
      } else {
        if (j >= in_dims.size()) {
          return Delinearize(Linearize(index, out_shape), in_shape);
        }
        group_in.push_back(in_shape[in_dims[j]]);
        group_in_dims.push_back(in_dims[j]);
        in_product *= in_shape[in_dims[j++]];
      }
    }
    const auto mapped = group_index.size() == 1 && group_in.size() == 1
                            ? group_index
                            : Delinearize(Linearize(group_index, group_out), group_in);
    for (size_t k = 0; k < group_in_dims.size(); ++k) {
      result[group_in_dims[k]] = mapped[k];
    }
  }
  return result;
}

// The index of a dense tensor (some permutation of a contiguous layout) holding storage position `position`.
std::vector<Index> DenseIndexOf(const Index& position, const TensorMeta& meta) {
  std::vector<size_t> order(meta.shape.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return meta.stride[a] > meta.stride[b]; });
  std::vector<int64_t> permuted;
  for (size_t d : order) {
    permuted.push_back(meta.shape[d]);
  }
  const auto expected = ContiguousStrides(permuted);
  for (size_t k = 0; k < order.size(); ++k) {
    if (meta.shape[order[k]] != 1 && meta.stride[order[k]] != expected[k]) {
      throw NotFusable("as_strided over a non-dense layout");
    }
  }
  const auto local = Delinearize(position - Index(meta.offset), permuted);
  std::vector<Index> index(meta.shape.size());
  for (size_t k = 0; k < order.size(); ++k) {
    index[order[k]] = local[k];
  }
  return index;
}

// Views that rearrange whole dimensions (reshapes, squeezes, aliases, permute, transpose, expand, broadcast,
// repeat):
// the source index, or nullopt for another view.
std::optional<std::vector<Index>> DimensionMapSource(const Node& node, const std::vector<Index>& index,
                                                     const std::vector<int64_t>& in_shape,
                                                     const std::vector<int64_t>& out_shape) {
  const std::string& op = node.op;
  if (op == "aten.view.default" || op == "aten._unsafe_view.default" || op == "aten.reshape.default" ||
      op == "aten.view_copy.default" || op == "aten.unsqueeze.default" ||
      op == "aten.unsqueeze_copy.default" || op == "aten.squeeze.dim" || op == "aten.squeeze.dims" ||
      op == "aten.squeeze.default" || op == "aten.squeeze_copy.dims" || op == "prims.squeeze.default" ||
      op == "aten.view_as.default") {
    return Reshape(index, out_shape, in_shape);
  }
  if (op == "aten.alias.default" || op == "aten.detach.default" || op == "aten.lift_fresh_copy.default" ||
      op == "aten.clone.default" || op == "aten.contiguous.default") {
    return index;
  }
  if (op == "aten.permute.default" || op == "aten.permute_copy.default") {
    const auto dims = IntsOf(node, 1, "dims");
    std::vector<Index> out(in_shape.size());
    for (size_t i = 0; i < dims.size(); ++i) {
      out[static_cast<size_t>(NormalizeDim(dims[i], in_shape.size()))] = index[i];
    }
    return out;
  }
  if (op == "aten.transpose.int" || op == "aten.t.default") {
    int64_t d0 = 0;
    int64_t d1 = 1;
    if (op == "aten.transpose.int") {
      d0 = NormalizeDim(IntOf(node, 1, "dim0", 0), in_shape.size());
      d1 = NormalizeDim(IntOf(node, 2, "dim1", 1), in_shape.size());
    }
    std::vector<Index> out = index;
    if (in_shape.size() >= 2) {
      std::swap(out[static_cast<size_t>(d0)], out[static_cast<size_t>(d1)]);
    }
    return out;
  }
  if (op == "aten.expand.default" || op == "aten.expand_copy.default") {
    return BroadcastIndex(index, out_shape, in_shape);
  }
  if (op ==
      "aten.repeat.default") {  // tiled copies: an output dim reads its input dim at the index mod its size
    const size_t lead = out_shape.size() - in_shape.size();  // leading dims the repeats add
    std::vector<Index> out(in_shape.size());
    for (size_t k = 0; k < in_shape.size(); ++k) {
      const Index& at = index[lead + k];
      out[k] = in_shape[k] == out_shape[lead + k] ? at : at.Mod(in_shape[k]);
    }
    return out;
  }
  if (op == "prims.broadcast_in_dim.default") {
    const auto dims = IntsOf(node, 2, "broadcast_dimensions");
    std::vector<Index> out(in_shape.size());
    for (size_t k = 0; k < in_shape.size(); ++k) {
      const auto o = static_cast<size_t>(dims.at(k));
      out[k] = (in_shape[k] == 1 && out_shape[o] != 1) ? Index(0) : index[o];
    }
    return out;
  }
  return std::nullopt;
}

// Views that select within dimensions (slice, narrow, select, unfold, flip, as_strided over `source`, the
// layout of the viewed tensor): the source index, or nullopt for another view.
std::optional<std::vector<Index>> WindowSource(const Node& node, const std::vector<Index>& index,
                                               const TensorMeta& source) {
  const std::string& op = node.op;
  const std::vector<int64_t>& in_shape = source.shape;
  if (op == "aten.slice.Tensor") {
    const auto dim = static_cast<size_t>(NormalizeDim(IntOf(node, 1, "dim", 0), in_shape.size()));
    int64_t start = IntOf(node, 2, "start", 0);
    const int64_t step = IntOf(node, 4, "step", 1);
    if (start < 0) {
      start += in_shape[dim];
    }
    start = std::clamp<int64_t>(start, 0, in_shape[dim]);
    std::vector<Index> out = index;
    out[dim] = index[dim] * step + Index(start);
    return out;
  }
  if (op == "aten.narrow.default") {
    const auto dim = static_cast<size_t>(NormalizeDim(IntOf(node, 1, "dim", 0), in_shape.size()));
    int64_t start = IntOf(node, 2, "start", 0);
    if (start < 0) {
      start += in_shape[dim];
    }
    std::vector<Index> out = index;
    out[dim] = index[dim] + Index(start);
    return out;
  }
  if (op == "aten.select.int") {
    const auto dim = static_cast<size_t>(NormalizeDim(IntOf(node, 1, "dim", 0), in_shape.size()));
    int64_t at = IntOf(node, 2, "index", 0);
    if (at < 0) {
      at += in_shape[dim];
    }
    std::vector<Index> out = index;
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(dim), Index(at));
    return out;
  }
  if (op == "aten.unfold.default") {  // windows of `size` every `step` along `dim`, the window a new last dim
    const auto dim = static_cast<size_t>(NormalizeDim(IntOf(node, 1, "dimension", 0), in_shape.size()));
    const int64_t step = IntOf(node, 3, "step", 1);
    std::vector<Index> out(index.begin(), index.end() - 1);
    out[dim] = index[dim] * step + index.back();
    return out;
  }
  if (op == "aten.flip.default") {
    std::vector<Index> out = index;
    for (int64_t dim : IntsOf(node, 1, "dims")) {
      const auto d = static_cast<size_t>(NormalizeDim(dim, in_shape.size()));
      out[d] = Index(in_shape[d] - 1) - index[d];
    }
    return out;
  }
  if (op == "aten.as_strided.default") {
    const auto strides = IntsOf(node, 2, "stride");
    const int64_t offset = IntOf(node, 3, "storage_offset", source.offset);
    return DenseIndexOf(Offset(index, strides, offset), source);
  }
  return std::nullopt;
}

}  // namespace

const std::vector<int64_t>& ShapeOf(const Graph& graph, int value) {
  const Value& v = graph.values.at(static_cast<size_t>(value));
  if (!v.meta) {
    throw NotFusable(v.name + " is not a tensor");
  }
  return v.meta->shape;
}

std::vector<int64_t> IntsOf(const Node& node, size_t position, const std::string& key) {
  const Arg* arg = node.ArgAt(position, key);
  if (arg == nullptr) {
    return {};
  }
  auto ints = arg->AsInts();
  if (!ints) {
    throw NotFusable(node.op + ": non-constant " + key);
  }
  return *ints;
}

int64_t IntOf(const Node& node, size_t position, const std::string& key, int64_t fallback) {
  const Arg* arg = node.ArgAt(position, key);
  if (arg == nullptr || arg->kind == Arg::Kind::kNone) {
    return fallback;
  }
  if (arg->kind != Arg::Kind::kInt) {
    throw NotFusable(node.op + ": non-constant " + key);
  }
  return arg->i;
}

std::vector<Index> BroadcastIndex(const std::vector<Index>& index, const std::vector<int64_t>& out_shape,
                                  const std::vector<int64_t>& input_shape) {
  std::vector<Index> out(input_shape.size());
  const size_t offset = out_shape.size() - std::min(out_shape.size(), input_shape.size());
  for (size_t d = 0; d < input_shape.size(); ++d) {
    const size_t o = d + offset;
    if (input_shape[d] == 1 || o >= out_shape.size()) {
      out[d] = Index(0);
    } else {
      out[d] = index[o];
    }
  }
  return out;
}

std::vector<Index> ViewSourceIndex(const Graph& graph, const Node& node, const std::vector<Index>& index) {
  const int source = ViewSource(node);
  const std::vector<int64_t>& in_shape = ShapeOf(graph, source);
  const std::vector<int64_t>& out_shape = ShapeOf(graph, node.value);
  if (auto out = DimensionMapSource(node, index, in_shape, out_shape)) {
    return *out;
  }
  if (auto out = WindowSource(node, index, *graph.values.at(static_cast<size_t>(source)).meta)) {
    return *out;
  }
  throw NotFusable("unknown view " + node.op);
}

}  // namespace egg::expert
