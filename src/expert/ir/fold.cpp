#include "expert/ir/fold.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace egg::expert {
namespace {

// A tensor added along the chain: coefficient * sum(value) is its share of every row's sum.
struct Term {
  double coefficient = 1;
  int value = -1;
};

// One fold, matched. A sum over a product's columns: the product A @ B, the nodes from it to the reduction
// (every one removed from the graph), and the linear form the chain applies, alpha * product + terms +
// constant, summed. A pooled transposed convolution: its input (a), weight (b) and bias, the positions it
// has, and the per-channel affine ops between it and the pooling, applied again after it.
struct Fold {
  bool convolution = false;
  int a = -1;
  int b = -1;
  std::vector<int> nodes;  // product, chain, reduction
  int reduce = -1;         // the reduction node, whose value the folded form replaces
  double alpha = 1;
  std::vector<Term> terms;
  double constant = 0;  // numbers added, already summed over the N columns
  int bias = -1;
  int64_t positions = 0;
  bool mean = false;
  std::vector<int> chain;
};

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
  static bool AllZero(const Arg* arg) {
    const auto ints = arg == nullptr ? std::nullopt : arg->AsInts();
    return ints && std::all_of(ints->begin(), ints->end(), [](int64_t i) { return i == 0; });
  }

  bool Convolution() {
    const Arg* transposed = node_.ArgAt(6);
    const Arg* groups = node_.ArgAt(8);
    const TensorMeta* x = Float32Meta(graph_, node_.ArgAt(0));
    const TensorMeta* w = Float32Meta(graph_, node_.ArgAt(1));
    const Value& out = ValueAt(graph_, node_.value);
    if (node_.op != "aten.convolution.default" || transposed == nullptr ||
        transposed->kind != Arg::Kind::kBool || !transposed->b || !AllZero(node_.ArgAt(4)) ||
        !AllZero(node_.ArgAt(7)) || groups == nullptr || groups->kind != Arg::Kind::kInt || groups->i != 1 ||
        x == nullptr || w == nullptr || !out.meta || out.meta->dtype != DType::kFloat32 ||
        out.meta->Rank() < 3 || x->Rank() != out.meta->Rank()) {
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
    fold_.positions = Product(std::vector<int64_t>(shape_.begin() + 2, shape_.end()));
    fold_.nodes.push_back(ValueAt(graph_, node_.value).node);
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
    if (pooled.size() != static_cast<size_t>(rank - 2) || *pooled.begin() != 2 ||
        *pooled.rbegin() != rank - 1) {
      return false;
    }
    fold_.mean = node.op == "aten.mean.dim";
    fold_.reduce = fold_.nodes.back();
    return true;
  }

  const Graph& graph_;
  const Node& node_;
  Fold fold_;
  std::vector<int64_t> shape_;
};

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
  // sum (a number added at every position adds P times it to the sum).
  int FoldedConvolution(const Fold& fold, const Node& reduce) {
    const std::string base = reduce.name + "_fold";
    const std::vector<int64_t>& x_shape = ValueAt(from_, fold.a).meta->shape;
    const std::vector<int64_t>& w_shape = ValueAt(from_, fold.b).meta->shape;
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
    const std::vector<int64_t> rows = {x_shape[0], w_shape[1]};
    int current =
        New(base + "_product", "aten.mm.default", {Arg::OfValue(inputs), Arg::OfValue(weights)}, rows);
    current = New(base + "_scaled", "aten.mul.Tensor",
                  {Arg::OfValue(current), Arg::OfFloat(1 / static_cast<double>(fold.positions))}, rows);
    if (fold.bias >= 0) {
      current = New(base + "_plus", "aten.add.Tensor",
                    {Arg::OfValue(current), Arg::OfValue(renumber_.at(fold.bias))}, rows);
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

  const Graph& from_;
  Graph out_;
  std::map<int, int> renumber_;
  std::set<std::string> names_;
};

}  // namespace

std::optional<Graph> FoldSummedProducts(const Graph& graph) {
  std::vector<Fold> folds;
  for (const Node& node : graph.nodes) {
    if (auto fold = Matcher(graph, node).Match()) {
      folds.push_back(std::move(*fold));
    } else if (auto pooled = ConvolutionMatcher(graph, node).Match()) {
      folds.push_back(std::move(*pooled));
    }
  }
  if (folds.empty()) {
    return std::nullopt;
  }
  return Rebuild(graph).Run(folds);
}

}  // namespace egg::expert
