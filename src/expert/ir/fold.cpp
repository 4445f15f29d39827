#include "expert/ir/fold.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "expert/ir/fold_match.h"

namespace egg::expert {
namespace {

using fold_detail::Fold;
using fold_detail::Term;

// The graph rebuilt node by node: kept nodes copied with their arguments renumbered, each fold's nodes
// replaced at its reduction by the folded form.
class Rebuild {
 public:
  explicit Rebuild(const Graph& from) : from_(from) {
    for (size_t v = 0; v < from.values.size(); ++v) {
      const Value& value = from.values[v];
      names_.insert(value.name);
      if (value.kind != ValueKind::kNode) {
        renumber_[static_cast<int>(v)] = static_cast<int>(out_.values.size());
        out_.values.push_back(value);
        out_.values.back().users.clear();
      }
    }
    out_.returns = from.returns;
    out_.torch_version = from.torch_version;
    out_.settings = from.settings;
    out_.dynamic = from.dynamic;
  }

  Graph Run(const std::vector<Fold>& folds) {
    std::map<int, const Fold*> at;
    std::set<int> removed;
    for (const Fold& fold : folds) {
      at[fold.reduce] = &fold;
      removed.insert(fold.nodes.begin(), fold.nodes.end());
    }
    for (size_t n = 0; n < from_.nodes.size(); ++n) {
      const Node& node = from_.nodes[n];
      const auto fold = at.find(static_cast<int>(n));
      if (fold != at.end()) {
        renumber_[node.value] =
            fold->second->convolution ? FoldedConvolution(*fold->second, node) : Folded(*fold->second, node);
      } else if (removed.count(static_cast<int>(n)) == 0) {
        Copy(node, ValueAt(from_, node.value).meta);
      }
    }
    for (Arg output : from_.outputs) {
      Renumber(&output);
      out_.outputs.push_back(output);
    }
    for (auto [target, arg] : from_.mutations) {
      Renumber(&arg);
      out_.mutations.emplace_back(target, arg);
    }
    return std::move(out_);
  }

 private:
  // `node` added with its arguments renumbered, its value renumbered to the copy's.
  int Copy(const Node& node, std::optional<TensorMeta> meta) {
    Node copy = node;
    for (Arg& arg : copy.args) {
      Renumber(&arg);
    }
    for (auto& [key, arg] : copy.kwargs) {
      Renumber(&arg);
    }
    return renumber_[node.value] = Add(std::move(copy), std::move(meta));
  }

  static TensorMeta Contiguous(std::vector<int64_t> shape) {
    TensorMeta meta;
    meta.stride = ContiguousStrides(shape);
    meta.shape = std::move(shape);
    return meta;
  }

  void Renumber(Arg* arg) const {
    if (arg->kind == Arg::Kind::kValue) {
      arg->value = renumber_.at(arg->value);
    }
    for (Arg& item : arg->list) {
      Renumber(&item);
    }
  }

  std::string Fresh(const std::string& base) {
    std::string name = base;
    while (names_.count(name) != 0) {
      name += "_";
    }
    names_.insert(name);
    return name;
  }

  int Add(Node node, std::optional<TensorMeta> meta) {
    Value value;
    value.name = node.name;
    value.kind = ValueKind::kNode;
    value.meta = std::move(meta);
    value.node = static_cast<int>(out_.nodes.size());
    node.value = static_cast<int>(out_.values.size());
    std::vector<int> used;
    for (const Arg& arg : node.args) {
      Used(arg, &used);
    }
    for (const auto& [key, arg] : node.kwargs) {
      Used(arg, &used);
    }
    for (int v : used) {
      auto& users = out_.values.at(static_cast<size_t>(v)).users;
      if (users.empty() || users.back() != value.node) {
        users.push_back(value.node);
      }
    }
    out_.values.push_back(std::move(value));
    out_.nodes.push_back(std::move(node));
    return out_.nodes.back().value;
  }

  static void Used(const Arg& arg, std::vector<int>* used) {
    if (arg.kind == Arg::Kind::kValue) {
      used->push_back(arg.value);
    }
    for (const Arg& item : arg.list) {
      Used(item, used);
    }
  }

  int New(const std::string& base, const std::string& op, std::vector<Arg> args, std::vector<int64_t> shape,
          std::map<std::string, Arg> kwargs = {}, bool keepable = false) {
    Node node;
    node.keepable = keepable;
    node.name = Fresh(base);
    node.op = op;
    node.args = std::move(args);
    node.kwargs = std::move(kwargs);
    return Add(std::move(node), Contiguous(std::move(shape)));
  }

  // alpha * sum_k A[i, k] * rowsum(B)[k] + sum of the terms + the constant, in the reduction's shape. The
  // sums of the weights and of the terms come first, so that the rows' reduction takes the rest as its
  // epilogue.
  int Folded(const Fold& fold, const Node& reduce) {
    const std::string base = reduce.name + "_fold";
    const std::vector<int64_t>& a_shape = ValueAt(from_, fold.a).meta->shape;
    const int a = renumber_.at(fold.a);
    const int b = renumber_.at(fold.b);
    const int weights = New(base + "_weights", "aten.sum.dim_IntList", {Arg::OfValue(b), Arg::OfInts({1})},
                            {a_shape[1]}, {}, true);
    std::vector<int> summed;
    for (const Term& term : fold.terms) {
      summed.push_back(
          New(base + "_bias", "aten.sum.default", {Arg::OfValue(renumber_.at(term.value))}, {}, {}, true));
    }
    const int product =
        New(base + "_product", "aten.mul.Tensor", {Arg::OfValue(a), Arg::OfValue(weights)}, a_shape);
    const std::vector<int64_t> shape = ValueAt(from_, reduce.value).meta->shape;
    const Arg* keepdim = reduce.ArgAt(2, "keepdim");
    int current =
        New(base + "_rows", "aten.sum.dim_IntList",
            {Arg::OfValue(product), Arg::OfInts({1}), Arg::OfBool(keepdim != nullptr && keepdim->b)}, shape);
    if (fold.alpha != 1) {
      current =
          New(base + "_scaled", "aten.mul.Tensor", {Arg::OfValue(current), Arg::OfFloat(fold.alpha)}, shape);
    }
    for (size_t t = 0; t < fold.terms.size(); ++t) {
      std::map<std::string, Arg> kwargs;
      if (fold.terms[t].coefficient != 1) {
        kwargs["alpha"] = Arg::OfFloat(fold.terms[t].coefficient);
      }
      current = New(base + "_plus", "aten.add.Tensor", {Arg::OfValue(current), Arg::OfValue(summed[t])},
                    shape, kwargs);
    }
    if (fold.constant != 0) {
      current =
          New(base + "_plus", "aten.add.Tensor", {Arg::OfValue(current), Arg::OfFloat(fold.constant)}, shape);
    }
    return current;
  }

  // (sum_i x) @ (sum_k W) / P + bias (the mean), viewed in the pooling's shape, then the per-channel ops
  // again on it, then P times that for a sum: the ops are affine, so they commute with the mean, not with the
  // sum (a number added at every position adds P times it to the sum). A cropped output sums the pairs of
  // its windows instead (WindowedSums).
  int FoldedConvolution(const Fold& fold, const Node& reduce) {
    const std::string base = reduce.name + "_fold";
    const std::vector<int64_t>& x_shape = ValueAt(from_, fold.a).meta->shape;
    const std::vector<int64_t>& w_shape = ValueAt(from_, fold.b).meta->shape;
    std::vector<int64_t> rows = {x_shape[0], w_shape[1]};
    int current = 0;
    if (fold.Partial()) {
      current = PartialConvolution(fold, base, &rows);
    } else if (std::all_of(fold.windows.begin(), fold.windows.end(),
                           [](const auto& w) { return w.empty(); })) {
      std::vector<int64_t> spatial;
      for (size_t d = 2; d < x_shape.size(); ++d) {
        spatial.push_back(static_cast<int64_t>(d));
      }
      const int weights =
          New(base + "_weights", "aten.sum.dim_IntList",
              {Arg::OfValue(renumber_.at(fold.b)), Arg::OfInts(spatial)}, {w_shape[0], w_shape[1]}, {}, true);
      const int inputs =
          New(base + "_inputs", "aten.sum.dim_IntList",
              {Arg::OfValue(renumber_.at(fold.a)), Arg::OfInts(spatial)}, {x_shape[0], x_shape[1]});
      current =
          New(base + "_product", "aten.mm.default", {Arg::OfValue(inputs), Arg::OfValue(weights)}, rows);
    } else {
      current = WindowedSums(fold, base);
    }
    current = New(base + "_scaled", "aten.mul.Tensor",
                  {Arg::OfValue(current), Arg::OfFloat(1 / static_cast<double>(fold.positions))}, rows);
    if (fold.bias >= 0) {
      int bias = renumber_.at(fold.bias);
      if (fold.Partial()) {  // [O] against [B, O, positions left...]: along the channels
        std::vector<int64_t> channel(rows.size() - 1, 1);
        channel.front() = w_shape[1];
        bias = New(base + "_bias", "aten.view.default", {Arg::OfValue(bias), Arg::OfInts(channel)}, channel);
      }
      current = New(base + "_plus", "aten.add.Tensor", {Arg::OfValue(current), Arg::OfValue(bias)}, rows);
    }
    const std::vector<int64_t> pooled = ValueAt(from_, reduce.value).meta->shape;
    current =
        New(base + "_pooled", "aten.view.default", {Arg::OfValue(current), Arg::OfInts(pooled)}, pooled);
    renumber_[from_.nodes.at(static_cast<size_t>(fold.nodes.front())).value] = current;
    for (int n : fold.chain) {
      current = Copy(from_.nodes.at(static_cast<size_t>(n)), Contiguous(pooled));
    }
    if (!fold.mean) {
      current = New(base + "_summed", "aten.mul.Tensor",
                    {Arg::OfValue(current), Arg::OfFloat(static_cast<double>(fold.positions))}, pooled);
    }
    return current;
  }

  // sum_c sum_k W[c, o, k] * X[b, c, k], X[b, c, k] the sum of x[b, c, i] over the positions i whose pair
  // (i, k) lands inside the output (the windows' indicators, per dim): x summed over the dims every pair
  // reaches, then each cropped dim contracted with its [size x taps] window (a float32 constant broadcast
  // against x with a trailing dim, then summed), the weights summed over the same plain dims, and the
  // product summed over the taps, then the input channels. Every step a float32 sum: no tensor-core rounding.
  int WindowedSums(const Fold& fold, const std::string& base) {
    const std::vector<int64_t>& w_shape = ValueAt(from_, fold.b).meta->shape;
    std::vector<int64_t> plain;
    for (size_t d = 0; d < fold.windows.size(); ++d) {
      if (fold.windows[d].empty()) {
        plain.push_back(static_cast<int64_t>(d) + 2);
      }
    }
    int x = renumber_.at(fold.a);
    int w = renumber_.at(fold.b);
    std::vector<int64_t> shape = ValueAt(from_, fold.a).meta->shape;
    std::vector<int64_t> taps = w_shape;
    if (!plain.empty()) {
      for (auto d = plain.rbegin(); d != plain.rend(); ++d) {
        shape.erase(shape.begin() + *d);
        taps.erase(taps.begin() + *d);
      }
      x = New(base + "_inputs", "aten.sum.dim_IntList", {Arg::OfValue(x), Arg::OfInts(plain)}, shape);
      w = New(base + "_weights", "aten.sum.dim_IntList", {Arg::OfValue(w), Arg::OfInts(plain)}, taps, {},
              true);
    }
    // shape: [B, C, sizes of the cropped dims left..., taps of those done...]
    for (size_t d = 0; d < fold.windows.size(); ++d) {
      if (fold.windows[d].empty()) {
        continue;
      }
      const int64_t size = shape[2];
      const int64_t count = w_shape[d + 2];
      std::vector<int64_t> window_shape(shape.size() - 2, 1);
      window_shape.front() = size;
      window_shape.push_back(count);
      const int window = Constant(base + "_window", fold.windows[d], window_shape);
      x = Unsqueezed(base + "_column", x, -1);
      std::vector<int64_t> product = shape;
      product.push_back(count);
      x = New(base + "_windowed", "aten.mul.Tensor", {Arg::OfValue(x), Arg::OfValue(window)}, product);
      product.erase(product.begin() + 2);
      x = New(base + "_taps", "aten.sum.dim_IntList", {Arg::OfValue(x), Arg::OfInts({2})}, product);
      shape = std::move(product);
    }
    // X [B, C, taps...] against W [C, O, taps...]: [B, C, O, taps...], summed over the taps, then C
    const int inputs = Unsqueezed(base + "_spread", x, 2);
    std::vector<int64_t> spread = shape;
    spread.insert(spread.begin() + 2, w_shape[1]);
    const int paired =
        New(base + "_paired", "aten.mul.Tensor", {Arg::OfValue(inputs), Arg::OfValue(w)}, spread);
    std::vector<int64_t> tap_dims;
    for (size_t d = 3; d < spread.size(); ++d) {
      tap_dims.push_back(static_cast<int64_t>(d));
    }
    const std::vector<int64_t> channels = {shape[0], shape[1], w_shape[1]};
    const int summed = New(base + "_tapsum", "aten.sum.dim_IntList",
                           {Arg::OfValue(paired), Arg::OfInts(tap_dims)}, channels);
    return New(base + "_product", "aten.sum.dim_IntList", {Arg::OfValue(summed), Arg::OfInts({1})},
               {shape[0], w_shape[1]});
  }

  // A convolution pooled over its leading position dims only: the transposed convolution over the dims left,
  // summed over the pooled positions. Each pooled dim's window contracts x (taps first: [B, C, taps, size,
  // rest...] summed over the size), its taps then folded into the input channels; the weight [C, O, taps...]
  // has the same taps moved beside its input channels ([C, pooled taps..., O, rest taps...], copied and
  // viewed as [C * pooled taps, O, rest taps...], from the parameter alone). 2_13: a 3-D convolution's depth
  // mean, a 2-D one of 3x the input channels.
  int PartialConvolution(const Fold& fold, const std::string& base, std::vector<int64_t>* rows) {
    const Node& conv = from_.nodes.at(static_cast<size_t>(fold.nodes.front()));
    const TensorMeta& w_meta = *ValueAt(from_, fold.b).meta;
    const size_t pooled = static_cast<size_t>(fold.pooled);
    int x = renumber_.at(fold.a);
    std::vector<int64_t> shape = ValueAt(from_, fold.a).meta->shape;
    for (size_t d = 0; d < pooled; ++d) {
      const int64_t size = shape[2];
      const int64_t taps = w_meta.shape[d + 2];
      std::vector<double> window(static_cast<size_t>(size * taps), 1.0);
      for (int64_t i = 0; i < size && !fold.windows[d].empty(); ++i) {
        for (int64_t k = 0; k < taps; ++k) {
          window[static_cast<size_t>(k * size + i)] = fold.windows[d][static_cast<size_t>(i * taps + k)];
        }
      }
      std::vector<int64_t> window_shape(shape.size() - 1, 1);  // [taps, size, 1 per dim left]
      window_shape[0] = taps;
      window_shape[1] = size;
      const int constant = Constant(base + "_window", std::move(window), window_shape);
      x = Unsqueezed(base + "_spread", x, 2);  // the input itself on the first pooled dim: its own strides
      std::vector<int64_t> spread = shape;
      spread.insert(spread.begin() + 2, taps);
      x = New(base + "_windowed", "aten.mul.Tensor", {Arg::OfValue(x), Arg::OfValue(constant)}, spread);
      spread.erase(spread.begin() + 3);
      x = New(base + "_taps", "aten.sum.dim_IntList", {Arg::OfValue(x), Arg::OfInts({3})}, spread);
      shape = spread;
      shape[1] *= taps;
      shape.erase(shape.begin() + 2);
      x = New(base + "_channels", "aten.view.default", {Arg::OfValue(x), Arg::OfInts(shape)}, shape);
    }
    std::vector<int64_t> order = {0};
    for (size_t d = 0; d < pooled; ++d) {
      order.push_back(static_cast<int64_t>(d) + 2);
    }
    order.push_back(1);
    for (size_t d = 2 + pooled; d < w_meta.shape.size(); ++d) {
      order.push_back(static_cast<int64_t>(d));
    }
    TensorMeta permuted = w_meta;
    for (size_t d = 0; d < order.size(); ++d) {
      permuted.shape[d] = w_meta.shape[static_cast<size_t>(order[d])];
      permuted.stride[d] = w_meta.stride[static_cast<size_t>(order[d])];
    }
    Node permute;
    permute.name = Fresh(base + "_permuted");
    permute.op = "aten.permute.default";
    permute.args = {Arg::OfValue(renumber_.at(fold.b)), Arg::OfInts(order)};
    permute.keepable = true;
    int w = Add(std::move(permute), permuted);
    w = New(base + "_packed", "aten.clone.default", {Arg::OfValue(w)}, permuted.shape, {}, true);
    std::vector<int64_t> merged(permuted.shape.begin() + static_cast<std::ptrdiff_t>(pooled),
                                permuted.shape.end());
    merged[0] = shape[1];
    w = New(base + "_weight", "aten.view.default", {Arg::OfValue(w), Arg::OfInts(merged)}, merged, {}, true);
    // the convolution's stride, padding, dilation and output padding along the dims left
    auto rest = [&conv, pooled](size_t arg) {
      const std::vector<int64_t> all = *conv.ArgAt(arg)->AsInts();
      return Arg::OfInts(std::vector<int64_t>(all.begin() + static_cast<std::ptrdiff_t>(pooled), all.end()));
    };
    const std::vector<int64_t>& out = ValueAt(from_, conv.value).meta->shape;
    rows->assign(out.begin(), out.begin() + 2);
    rows->insert(rows->end(), out.begin() + 2 + static_cast<std::ptrdiff_t>(pooled), out.end());
    return New(base + "_convolution", "aten.convolution.default",
               {Arg::OfValue(x), Arg::OfValue(w), Arg(), rest(3), rest(4), rest(5), Arg::OfBool(true),
                rest(7), Arg::OfInt(1)},
               *rows);
  }

  // A float32 constant of `shape` holding `values` (row major), embedded in the candidate file.
  int Constant(const std::string& base, std::vector<double> values, std::vector<int64_t> shape) {
    Value value;
    value.name = Fresh(base);
    value.kind = ValueKind::kState;
    value.state_kind = "constant";
    value.target = value.name;
    value.meta = Contiguous(std::move(shape));
    value.constant_values = std::move(values);
    out_.values.push_back(std::move(value));
    return static_cast<int>(out_.values.size()) - 1;
  }

  // `value` with a dim of one inserted at `dim` (-1: after the last), as torch.unsqueeze views it: its
  // strides kept (an input read in place may have any), the new dim's that of the dims after it.
  int Unsqueezed(const std::string& base, int value, int64_t dim) {
    TensorMeta meta = *out_.values.at(static_cast<size_t>(value)).meta;
    const size_t at = dim < 0 ? meta.shape.size() : static_cast<size_t>(dim);
    const int64_t stride = at < meta.shape.size() ? meta.shape[at] * meta.stride[at] : 1;
    meta.shape.insert(meta.shape.begin() + static_cast<std::ptrdiff_t>(at), 1);
    meta.stride.insert(meta.stride.begin() + static_cast<std::ptrdiff_t>(at), stride);
    Node node;
    node.name = Fresh(base);
    node.op = "aten.unsqueeze.default";
    node.args = {Arg::OfValue(value), Arg::OfInt(dim)};
    return Add(std::move(node), std::move(meta));
  }

  const Graph& from_;
  Graph out_;
  std::map<int, int> renumber_;
  std::set<std::string> names_;
};

}  // namespace

std::optional<Graph> FoldSummedProducts(const Graph& graph) {
  std::vector<Fold> folds;
  for (const Node& node : graph.nodes) {
    if (auto fold = fold_detail::MatchSummedProduct(graph, node)) {
      folds.push_back(std::move(*fold));
    } else if (auto pooled = fold_detail::MatchPooledConvolution(graph, node)) {
      folds.push_back(std::move(*pooled));
    }
  }
  if (folds.empty()) {
    return std::nullopt;
  }
  return Rebuild(graph).Run(folds);
}

}  // namespace egg::expert
