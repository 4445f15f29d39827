#include "expert/ir/fold_match.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace egg::expert::fold_detail {
namespace {

std::optional<double> FiniteNumber(const Arg* arg) {
  if (arg == nullptr || !arg->IsNumber() || !std::isfinite(arg->AsDouble())) {
    return std::nullopt;
  }
  return arg->AsDouble();
}

const TensorMeta* Float32Meta(const Graph& graph, const Arg* arg) {
  if (arg == nullptr || arg->kind != Arg::Kind::kValue) {
    return nullptr;
  }
  const Value& value = graph.ValueOf(*arg);
  return value.meta && value.meta->dtype == DType::kFloat32 ? &*value.meta : nullptr;
}

bool IsValue(const Arg* arg, int value) {
  return arg != nullptr && arg->kind == Arg::Kind::kValue && arg->value == value;
}

// The one node that reads `value` (its index added to `nodes`), or nullptr where the value has other readers
// or leaves the forward.
const Node* OnlyReader(const Graph& graph, int value, std::vector<int>* nodes) {
  const std::vector<int>& users = ValueAt(graph, value).users;
  if (users.size() != 1 || IsGraphResult(graph, value)) {
    return nullptr;
  }
  nodes->push_back(users.front());
  return &graph.nodes.at(static_cast<size_t>(users.front()));
}

bool IsSumOrMean(const Node& node) { return node.op == "aten.sum.dim_IntList" || node.op == "aten.mean.dim"; }

class Matcher {
 public:
  Matcher(const Graph& graph, const Node& product) : graph_(graph), product_(product) {}

  std::optional<Fold> Match() {
    if (!Product()) {
      return std::nullopt;
    }
    int current = product_.value;
    while (const Node* user = OnlyReader(graph_, current, &fold_.nodes)) {
      if (IsSumOrMean(*user)) {
        return Reduction(*user, current) ? std::optional<Fold>(fold_) : std::nullopt;
      }
      const Value& next = ValueAt(graph_, user->value);
      if (!Linear(*user, current) || !next.meta || next.meta->dtype != DType::kFloat32 ||
          next.meta->shape != std::vector<int64_t>{m_, n_}) {
        return std::nullopt;
      }
      current = user->value;
    }
    return std::nullopt;
  }

 private:
  bool Product() {
    const bool addmm = product_.op == "aten.addmm.default";
    if (!addmm && product_.op != "aten.mm.default") {
      return false;
    }
    const size_t first = addmm ? 1 : 0;
    const TensorMeta* a = Float32Meta(graph_, product_.ArgAt(first));
    const TensorMeta* b = Float32Meta(graph_, product_.ArgAt(first + 1));
    const Value& out = ValueAt(graph_, product_.value);
    if (a == nullptr || b == nullptr || a->Rank() != 2 || b->Rank() != 2 || !out.meta ||
        out.meta->dtype != DType::kFloat32 || out.meta->Rank() != 2) {
      return false;
    }
    m_ = out.meta->shape[0];
    n_ = out.meta->shape[1];
    fold_.a = product_.ArgAt(first)->value;
    fold_.b = product_.ArgAt(first + 1)->value;
    fold_.nodes.push_back(ValueAt(graph_, product_.value).node);
    if (!addmm) {
      return true;
    }
    const Arg* beta_arg = product_.Kwarg("beta");
    const Arg* alpha_arg = product_.Kwarg("alpha");
    const auto beta = beta_arg == nullptr ? std::optional<double>(1) : FiniteNumber(beta_arg);
    const auto alpha = alpha_arg == nullptr ? std::optional<double>(1) : FiniteNumber(alpha_arg);
    if (!beta || !alpha) {
      return false;
    }
    fold_.alpha = *alpha;
    return AddOperand(product_.ArgAt(0), *beta);
  }

  // `coefficient` times an operand added to every row: a number, or a tensor without a row dimension (a
  // bias row or one element). Its sum over the N columns is what the fold adds.
  bool AddOperand(const Arg* arg, double coefficient) {
    if (const auto number = FiniteNumber(arg)) {
      fold_.constant += coefficient * *number * static_cast<double>(n_);
      return true;
    }
    const TensorMeta* meta = Float32Meta(graph_, arg);
    if (meta == nullptr || meta->Rank() > 2 || (meta->Rank() == 2 && meta->shape[0] != 1)) {
      return false;
    }
    const int64_t numel = meta->Numel();
    if (numel != n_ && numel != 1) {
      return false;
    }
    if (meta->Rank() >= 1 && meta->shape.back() != numel) {
      return false;
    }
    fold_.terms.push_back({coefficient * static_cast<double>(n_ / numel), arg->value});
    return true;
  }

  void Scale(double factor) {
    fold_.alpha *= factor;
    fold_.constant *= factor;
    for (Term& term : fold_.terms) {
      term.coefficient *= factor;
    }
  }

  // One op linear in `current`, folded into the form; false for anything else.
  bool Linear(const Node& node, int current) {
    const Arg* first = node.ArgAt(0);
    const Arg* second = node.ArgAt(1);
    const bool current_first = IsValue(first, current);
    const Arg* other = current_first ? second : first;
    if (IsValue(other, current)) {  // the chain's value twice (x + x, x * x): a bias row only where M is 1
      return false;
    }
    if (node.op == "aten.neg.default") {
      Scale(-1);
      return true;
    }
    if (node.op == "aten.mul.Tensor" || node.op == "aten.mul.Scalar") {
      const auto factor = FiniteNumber(other);
      if (factor) {
        Scale(*factor);
      }
      return factor.has_value();
    }
    if (node.op == "aten.div.Tensor" || node.op == "aten.div.Scalar") {
      const auto divisor = current_first ? FiniteNumber(second) : std::nullopt;
      if (!divisor || *divisor == 0 || !node.kwargs.empty()) {
        return false;
      }
      Scale(1 / *divisor);
      return true;
    }
    const bool add = node.op == "aten.add.Tensor" || node.op == "aten.add.Scalar";
    if (!add && node.op != "aten.sub.Tensor" && node.op != "aten.sub.Scalar") {
      return false;
    }
    const Arg* alpha_arg = node.Kwarg("alpha");
    const auto alpha = alpha_arg == nullptr ? std::optional<double>(1) : FiniteNumber(alpha_arg);
    if (!alpha || (!current_first && !IsValue(second, current))) {
      return false;
    }
    // first + (+-alpha) * second
    const double second_coefficient = add ? *alpha : -*alpha;
    if (!current_first) {
      Scale(second_coefficient);
    }
    return AddOperand(other, current_first ? second_coefficient : 1);
  }

  bool Reduction(const Node& node, int current) {
    const auto dims = node.ArgAt(1, "dim") == nullptr ? std::nullopt : node.ArgAt(1, "dim")->AsInts();
    const Arg* keepdim = node.ArgAt(2, "keepdim");
    if (node.ArgAt(0) == nullptr || node.ArgAt(0)->value != current || !dims || dims->size() != 1 ||
        ((*dims)[0] != 1 && (*dims)[0] != -1) || node.Kwarg("dtype") != nullptr) {
      return false;
    }
    if (keepdim != nullptr && keepdim->kind != Arg::Kind::kBool) {
      return false;
    }
    if (node.op == "aten.mean.dim") {
      Scale(1 / static_cast<double>(n_));
    }
    fold_.reduce = fold_.nodes.back();
    return true;
  }

  const Graph& graph_;
  const Node& product_;
  Fold fold_;
  int64_t m_ = 0;
  int64_t n_ = 0;
};

// A mean or sum over every position of a float32 transposed convolution's output (keepdim), through ops
// affine per channel (a number, or a tensor whose only dimension of more than one element is the channel,
// multiplying, dividing, added or subtracted; a negation). With no padding and no output padding every input
// element meets every kernel tap inside the output, so
//     sum_p convT(x, W)[b, o, p]  =  sum_c (sum_i x[b, c, i]) * (sum_k W[c, o, k])  +  P * bias[o]
// and the per-channel ops, affine, commute with the mean: they run after it, on one value per channel (a sum
// is P times the mean).
class ConvolutionMatcher {
 public:
  ConvolutionMatcher(const Graph& graph, const Node& node) : graph_(graph), node_(node) {}

  std::optional<Fold> Match() {
    if (!Convolution()) {
      return std::nullopt;
    }
    int current = node_.value;
    while (const Node* user = OnlyReader(graph_, current, &fold_.nodes)) {
      if (IsSumOrMean(*user)) {
        return Pooling(*user, current) ? std::optional<Fold>(fold_) : std::nullopt;
      }
      const Value& next = ValueAt(graph_, user->value);
      if (!Affine(*user, current) || !next.meta || next.meta->dtype != DType::kFloat32 ||
          next.meta->shape != shape_) {
        return std::nullopt;
      }
      fold_.chain.push_back(fold_.nodes.back());
      current = user->value;
    }
    return std::nullopt;
  }

 private:
  bool Convolution() {
    const Arg* transposed = node_.ArgAt(6);
    const Arg* groups = node_.ArgAt(8);
    const TensorMeta* x = Float32Meta(graph_, node_.ArgAt(0));
    const TensorMeta* w = Float32Meta(graph_, node_.ArgAt(1));
    const Value& out = ValueAt(graph_, node_.value);
    if (node_.op != "aten.convolution.default" || transposed == nullptr ||
        transposed->kind != Arg::Kind::kBool || !transposed->b || groups == nullptr ||
        groups->kind != Arg::Kind::kInt || groups->i != 1 || x == nullptr || w == nullptr || !out.meta ||
        out.meta->dtype != DType::kFloat32 || out.meta->Rank() < 3 || x->Rank() != out.meta->Rank() ||
        w->Rank() != x->Rank() || !Windows(*x, *w, *out.meta)) {
      return false;
    }
    const Arg* bias = node_.ArgAt(2);
    if (bias != nullptr && bias->kind == Arg::Kind::kValue) {
      if (Float32Meta(graph_, bias) == nullptr) {
        return false;
      }
      fold_.bias = bias->value;
    }
    shape_ = out.meta->shape;
    fold_.convolution = true;
    fold_.a = node_.ArgAt(0)->value;
    fold_.b = node_.ArgAt(1)->value;
    fold_.nodes.push_back(ValueAt(graph_, node_.value).node);
    return true;
  }

  // Per position dim, which (input position i, kernel tap k) pairs land inside the output: position
  // i * stride - padding + k * dilation in [0, out). Every pair does without padding and output padding; a
  // padding crops the border pairs. False where an argument is not a list of one int per dim.
  bool Windows(const TensorMeta& x, const TensorMeta& w, const TensorMeta& out) {
    const size_t dims = x.shape.size() - 2;
    std::vector<std::optional<std::vector<int64_t>>> params;
    for (size_t arg : {3U, 4U, 5U}) {  // stride, padding, dilation
      params.push_back(node_.ArgAt(arg) == nullptr ? std::nullopt : node_.ArgAt(arg)->AsInts());
      if (!params.back() || params.back()->size() != dims) {
        return false;
      }
    }
    const auto output_padding = node_.ArgAt(7) == nullptr ? std::nullopt : node_.ArgAt(7)->AsInts();
    if (!output_padding || output_padding->size() != dims) {
      return false;
    }
    for (size_t d = 0; d < dims; ++d) {
      const int64_t size = x.shape[d + 2];
      const int64_t taps = w.shape[d + 2];
      const int64_t extent = out.shape[d + 2];
      std::vector<double> window;
      bool cropped = false;
      for (int64_t i = 0; i < size; ++i) {
        for (int64_t k = 0; k < taps; ++k) {
          const int64_t position = i * (*params[0])[d] - (*params[1])[d] + k * (*params[2])[d];
          const bool inside = position >= 0 && position < extent;
          cropped = cropped || !inside;
          window.push_back(inside ? 1.0 : 0.0);
        }
      }
      fold_.windows.push_back(cropped ? std::move(window) : std::vector<double>{});
    }
    return true;
  }

  // A number, or a float32 tensor that broadcasts along every dimension of the output but the channel's.
  bool PerChannel(const Arg* arg) const {
    if (FiniteNumber(arg)) {
      return true;
    }
    const TensorMeta* meta = Float32Meta(graph_, arg);
    const int rank = static_cast<int>(shape_.size());
    if (meta == nullptr || meta->Rank() > rank) {
      return false;
    }
    for (int d = 0; d < meta->Rank(); ++d) {
      if (rank - meta->Rank() + d != 1 && meta->shape[static_cast<size_t>(d)] != 1) {
        return false;
      }
    }
    return true;
  }

  bool Affine(const Node& node, int current) const {
    const Arg* first = node.ArgAt(0);
    const bool current_first = IsValue(first, current);
    const Arg* other = node.ArgAt(current_first ? 1 : 0);
    const Arg* alpha = node.Kwarg("alpha");
    if (IsValue(other, current)) {  // x / x, x * x: per-channel in shape where the output has one position
      return false;
    }
    if (node.op == "aten.neg.default") {
      return true;
    }
    if (node.op == "aten.div.Tensor" || node.op == "aten.div.Scalar") {
      return current_first && node.kwargs.empty() && PerChannel(other);
    }
    const bool linear = node.op == "aten.mul.Tensor" || node.op == "aten.mul.Scalar" ||
                        node.op == "aten.add.Tensor" || node.op == "aten.add.Scalar" ||
                        node.op == "aten.sub.Tensor" || node.op == "aten.sub.Scalar";
    const bool current_second = IsValue(node.ArgAt(1), current);
    return linear && (current_first != current_second) && PerChannel(other) &&
           (alpha == nullptr || FiniteNumber(alpha));
  }

  bool Pooling(const Node& node, int current) {
    const auto dims = node.ArgAt(1, "dim") == nullptr ? std::nullopt : node.ArgAt(1, "dim")->AsInts();
    const Arg* keepdim = node.ArgAt(2, "keepdim");
    if (node.ArgAt(0) == nullptr || node.ArgAt(0)->value != current || !dims ||
        node.Kwarg("dtype") != nullptr || keepdim == nullptr || keepdim->kind != Arg::Kind::kBool ||
        !keepdim->b) {
      return false;
    }
    const int64_t rank = static_cast<int64_t>(shape_.size());
    std::set<int64_t> pooled;
    for (int64_t d : *dims) {
      pooled.insert(d < 0 ? d + rank : d);
    }
    // every position dim, or the leading ones (a 3-D convolution pooled over its depth): the dims left stay a
    // transposed convolution of fewer dims
    if (pooled.empty() || *pooled.begin() != 2 ||
        *pooled.rbegin() != 1 + static_cast<int64_t>(pooled.size())) {
      return false;
    }
    fold_.pooled = static_cast<int>(pooled.size());
    fold_.positions = Product(std::vector<int64_t>(shape_.begin() + 2, shape_.begin() + 2 + fold_.pooled));
    fold_.mean = node.op == "aten.mean.dim";
    fold_.reduce = fold_.nodes.back();
    return true;
  }

  const Graph& graph_;
  const Node& node_;
  Fold fold_;
  std::vector<int64_t> shape_;
};

}  // namespace

std::optional<Fold> MatchSummedProduct(const Graph& graph, const Node& node) {
  return Matcher(graph, node).Match();
}

std::optional<Fold> MatchPooledConvolution(const Graph& graph, const Node& node) {
  return ConvolutionMatcher(graph, node).Match();
}

}  // namespace egg::expert::fold_detail
