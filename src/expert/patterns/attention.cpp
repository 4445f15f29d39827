// The matcher behind codegen/attention_codegen.cpp's flash kernel.
#include "expert/patterns/attention.h"

#include <functional>
#include <string>

#include "expert/ir/ops.h"
#include "expert/patterns/matmul.h"
#include "expert/patterns/node_args.h"

namespace egg::expert {
namespace {

constexpr int64_t kMaxHeadDim = 256;  // the Q, K and V tiles of a program stay in registers

int NodeIndex(const Graph& graph, const Node* node) { return static_cast<int>(node - graph.nodes.data()); }

// The value of positional argument `index` of `node`, or -1.
int ValueArg(const Node* node, size_t index) {
  if (node == nullptr || node->args.size() <= index || node->args[index].kind != Arg::Kind::kValue) {
    return -1;
  }
  return node->args[index].value;
}

const Node* ArgProducer(const Graph& graph, const Arg& arg) {
  return arg.kind == Arg::Kind::kValue ? graph.Producer(arg.value) : nullptr;
}

const Node* ProducerOp(const Graph& graph, int value, const std::string& op) {
  const Node* node = value >= 0 ? graph.Producer(value) : nullptr;
  return node != nullptr && node->op == op ? node : nullptr;
}

// The value under reshapes that keep its elements in row-major order (view, reshape, clone, alias, an expand
// that broadcasts nothing); the nodes passed are added to `chain`.
int UnderFlatViews(const Graph& graph, int value, std::set<int>* chain) {
  static const std::set<std::string> kFlat = {
      "aten.view.default",  "aten._unsafe_view.default", "aten.reshape.default",   "aten.clone.default",
      "aten.alias.default", "aten.expand.default",       "aten.contiguous.default"};
  while (true) {
    const Node* node = graph.Producer(value);
    if (node == nullptr || kFlat.count(node->op) == 0) {
      return value;
    }
    const int source = ViewSource(*node);
    const auto& meta = ValueAt(graph, value).meta;
    const auto& source_meta = ValueAt(graph, source).meta;
    if (!meta || !source_meta || meta->Numel() != source_meta->Numel()) {
      return value;
    }
    chain->insert(NodeIndex(graph, node));
    value = source;
  }
}

// Whether a reduction `node` over the last of `rank` dimensions keeps that dimension (amax, sum, any).
bool LastDimKept(const Node* node, size_t rank) {
  if (node == nullptr || node->args.size() < 3) {
    return false;
  }
  const auto dims = node->args[1].AsInts();
  const bool keep = node->args[2].kind == Arg::Kind::kBool && node->args[2].b;
  const auto last = static_cast<int64_t>(rank) - 1;
  return keep && dims && dims->size() == 1 && (dims->front() == -1 || dims->front() == last);
}

bool HasType(const Graph& graph, int value, DType dtype) {
  const auto& meta = ValueAt(graph, value).meta;
  return meta && meta->dtype == dtype;
}

bool IsZero(const Graph& graph, const Arg& arg) {
  if (arg.IsNumber()) {
    return arg.AsDouble() == 0.0;
  }
  const Node* fill = ArgProducer(graph, arg);
  return fill != nullptr && ((fill->op == "aten.full_like.default" && fill->args.size() >= 2 &&
                              fill->args[1].IsNumber() && fill->args[1].AsDouble() == 0.0) ||
                             fill->op == "aten.zeros_like.default");
}

// SDPA's _safe_softmax guard: where(logical_not(any(logical_not(x == -inf), -1)), 0, p). The value p, or -1.
int SafeSoftmaxGuard(const Graph& graph, const Node* where, int x, std::set<int>* nodes) {
  if (where == nullptr || where->op != "aten.where.self" || where->args.size() != 3 ||
      !IsZero(graph, where->args[1])) {
    return -1;
  }
  const Node* outer_not = ProducerOp(graph, ValueArg(where, 0), "aten.logical_not.default");
  const Node* any = ProducerOp(graph, ValueArg(outer_not, 0), "aten.any.dim");
  const Node* inner_not = ProducerOp(graph, ValueArg(any, 0), "aten.logical_not.default");
  const Node* eq = ProducerOp(graph, ValueArg(inner_not, 0), "aten.eq.Scalar");
  const auto rank = ValueAt(graph, x).meta->shape.size();
  if (eq == nullptr || ValueArg(eq, 0) != x || eq->args.size() != 2 || !eq->args[1].IsNumber() ||
      eq->args[1].AsDouble() != -std::numeric_limits<double>::infinity() || !LastDimKept(any, rank)) {
    return -1;
  }
  for (const Node* node : {where, outer_not, any, inner_not, eq}) {
    nodes->insert(NodeIndex(graph, node));
  }
  if (const Node* fill = ArgProducer(graph, where->args[1])) {
    nodes->insert(NodeIndex(graph, fill));
  }
  return ValueArg(where, 2);
}

bool IsNegativeInfinity(const Graph& graph, const Arg& arg) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  if (arg.IsNumber()) {
    return arg.AsDouble() == kNegInf;
  }
  const Node* fill = ArgProducer(graph, arg);
  return fill != nullptr && fill->op == "aten.scalar_tensor.default" && !fill->args.empty() &&
         fill->args[0].IsNumber() && fill->args[0].AsDouble() == kNegInf;
}

// The nodes of X's elementwise cone that depend on a bmm (S, set in *scores; a second bmm fails the match).
class ScoreCone {
 public:
  explicit ScoreCone(const Graph& graph) : graph_(graph) {}

  bool Reaches(int value) {
    const Node* node = graph_.Producer(value);
    if (node == nullptr || failed_) {
      return false;
    }
    const int index = NodeIndex(graph_, node);
    if (const auto found = memo_.find(index); found != memo_.end()) {
      return found->second;
    }
    bool reaches = false;
    if (node->op == "aten.bmm.default") {
      failed_ = scores_ >= 0 && scores_ != index;
      scores_ = index;
      reaches = !failed_;
    } else if (ClassifyOp(node->op) == OpClass::kPointwise || ClassifyOp(node->op) == OpClass::kView) {
      for (const Arg& arg : node->args) {
        if (arg.kind == Arg::Kind::kValue && ValueAt(graph_, arg.value).meta) {
          reaches = Reaches(arg.value) || reaches;
        }
      }
      if (reaches) {
        cone_.insert(index);
      }
    }
    memo_[index] = reaches;
    return reaches;
  }

  int Scores() const { return failed_ ? -1 : scores_; }
  const std::set<int>& Cone() const { return cone_; }

 private:
  const Graph& graph_;
  std::map<int, bool> memo_;
  std::set<int> cone_;
  int scores_ = -1;
  bool failed_ = false;
};

// The softmax over the scores' last axis: div(exp(sub(x, amax(x))), sum(exp(...))).
struct Softmax {
  const Node* div = nullptr;
  const Node* exp = nullptr;
  const Node* sum = nullptr;
  const Node* sub = nullptr;
  const Node* amax = nullptr;
};

// The softmax whose div is `p`, or under SDPA's safe-softmax guard `top` (a where) at `p`.
std::optional<Softmax> MatchSoftmax(const Graph& graph, int p, const Node* top) {
  Softmax softmax;
  softmax.div = ProducerOp(graph, p, "aten.div.Tensor");
  if (softmax.div == nullptr && top != nullptr && top->op == "aten.where.self") {
    softmax.div = ProducerOp(graph, ValueArg(top, 2), "aten.div.Tensor");
  }
  softmax.exp = ProducerOp(graph, ValueArg(softmax.div, 0), "aten.exp.default");
  softmax.sum = ProducerOp(graph, ValueArg(softmax.div, 1), "aten.sum.dim_IntList");
  softmax.sub = ProducerOp(graph, ValueArg(softmax.exp, 0), "aten.sub.Tensor");
  softmax.amax = ProducerOp(graph, ValueArg(softmax.sub, 1), "aten.amax.default");
  if (softmax.sum == nullptr || softmax.amax == nullptr || softmax.sub->Kwarg("alpha") != nullptr ||
      ValueArg(softmax.sum, 0) != softmax.exp->value) {
    return std::nullopt;
  }
  return softmax;
}

// Whether the softmax is over the last axis of x (spec.x), which holds batch x lq rows of lk scores.
bool OverScoreRows(const Graph& graph, const Softmax& softmax, const AttentionSpec& spec) {
  const auto& x_meta = ValueAt(graph, spec.x).meta;
  return x_meta && x_meta->shape.size() >= 2 && ValueArg(softmax.amax, 0) == spec.x &&
         x_meta->shape.back() == spec.lk && x_meta->Numel() == spec.batch * spec.lq * spec.lk &&
         LastDimKept(softmax.amax, x_meta->shape.size()) && LastDimKept(softmax.sum, x_meta->shape.size());
}

// masked_fill(mask, -inf) on the scores, the mask computed without them: masked key blocks can be skipped
// (spec->mask and spec->masked_when, where X is such a where).
void FindKeyMask(const Graph& graph, const ScoreCone& cone, AttentionSpec* spec) {
  const Node* where = ProducerOp(graph, spec->x, "aten.where.self");
  if (where != nullptr && where->args.size() == 3 && where->args[0].kind == Arg::Kind::kValue) {
    const Node* condition = ArgProducer(graph, where->args[0]);
    const bool independent = condition == nullptr || cone.Cone().count(NodeIndex(graph, condition)) == 0;
    for (size_t branch : {size_t{1}, size_t{2}}) {
      if (independent && IsNegativeInfinity(graph, where->args[branch])) {
        spec->mask = where->args[0].value;
        spec->masked_when = branch == 1;
      }
    }
  }
}

// The scores' product S = bmm(Q, K^T), of the attention's batch and sizes: Q, K^T, the head dimension d and S
// into *spec; false where it is not one.
bool MatchScoresProduct(const Graph& graph, AttentionSpec* spec) {
  const Node& scores = graph.nodes.at(static_cast<size_t>(spec->scores));
  const auto qk = ParseMatmul(graph, scores);
  if (!qk || qk->conv || qk->bias >= 0 || qk->alpha != 1.0 || qk->batch != spec->batch || qk->m != spec->lq ||
      qk->n != spec->lk) {
    return false;
  }
  spec->q = qk->a;
  spec->kt = qk->b;
  spec->d = qk->k;
  spec->s_value = scores.value;
  return true;
}

// Whether what the kernel absorbs (S, X, P, the softmax's steps) is read by nothing else, V does not depend
// on it, and none of it is a graph output or mutation: it is never in memory.
bool AbsorbedStayInside(const Graph& graph, const AttentionSpec& spec) {
  const std::set<int>& nodes = spec.absorbed;
  std::set<int> absorbed_values;
  for (int index : nodes) {
    absorbed_values.insert(graph.nodes.at(static_cast<size_t>(index)).value);
    for (int user : ValueAt(graph, graph.nodes.at(static_cast<size_t>(index)).value).users) {
      if (user != spec.node && nodes.count(user) == 0) {
        return false;
      }
    }
  }
  std::set<int> v_chain;
  if (absorbed_values.count(UnderFlatViews(graph, spec.v, &v_chain)) != 0) {
    return false;
  }
  for (const Arg& output : graph.outputs) {
    if (output.kind == Arg::Kind::kValue && absorbed_values.count(output.value) != 0) {
      return false;
    }
  }
  for (const auto& [target, arg] : graph.mutations) {
    if (arg.kind == Arg::Kind::kValue && absorbed_values.count(arg.value) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<AttentionSpec> ParseAttention(const Graph& graph, const Node& node) {
  if (node.op != "aten.bmm.default") {
    return std::nullopt;
  }
  const auto pv = ParseMatmul(graph, node);
  if (!pv || pv->conv || pv->bias >= 0 || pv->alpha != 1.0) {
    return std::nullopt;
  }
  AttentionSpec spec;
  spec.node = NodeIndex(graph, &node);
  spec.v = pv->b;
  spec.batch = pv->batch;
  spec.lq = pv->m;
  spec.lk = pv->k;
  spec.dv = pv->n;
  std::set<int> nodes;
  int p = UnderFlatViews(graph, pv->a, &nodes);
  const Node* top = graph.Producer(p);
  if (top != nullptr && top->op == "aten._to_copy.default" && HasType(graph, p, pv->dtype) &&
      IsHalf(pv->dtype)) {
    // a half softmax computed over a float32 upcast and cast back for the product: the flash kernel's own
    // float32 probabilities, cast for tl.dot
    nodes.insert(NodeIndex(graph, top));
    p = ValueArg(top, 0);
    top = graph.Producer(p);
    if (!HasType(graph, p, DType::kFloat32)) {
      return std::nullopt;
    }
  }
  const auto softmax = MatchSoftmax(graph, p, top);
  if (!softmax) {
    return std::nullopt;
  }
  spec.x = ValueArg(softmax->sub, 0);
  if (!OverScoreRows(graph, *softmax, spec)) {
    return std::nullopt;
  }
  if (softmax->div->value != p) {
    spec.safe = true;
    if (SafeSoftmaxGuard(graph, top, spec.x, &nodes) != softmax->div->value) {
      return std::nullopt;
    }
  }
  for (const Node* step : {softmax->div, softmax->exp, softmax->sum, softmax->sub, softmax->amax}) {
    nodes.insert(NodeIndex(graph, step));
  }
  ScoreCone cone(graph);
  if (!cone.Reaches(spec.x) || cone.Scores() < 0) {
    return std::nullopt;
  }
  spec.scores = cone.Scores();
  FindKeyMask(graph, cone, &spec);
  nodes.insert(cone.Cone().begin(), cone.Cone().end());
  nodes.insert(spec.scores);
  if (!MatchScoresProduct(graph, &spec)) {
    return std::nullopt;
  }
  spec.absorbed = nodes;
  if (spec.d > kMaxHeadDim || spec.dv > kMaxHeadDim) {
    return std::nullopt;
  }
  const auto& out = ValueAt(graph, node.value).meta;
  spec.dtype = out ? out->dtype : DType::kFloat64;
  if (spec.dtype != DType::kFloat32 && !IsHalf(spec.dtype)) {
    return std::nullopt;
  }
  for (int value : {spec.q, spec.kt, spec.v, spec.s_value}) {  // one type throughout
    if (!HasType(graph, value, spec.dtype)) {
      return std::nullopt;
    }
  }
  // the softmax's input: that type, or float32 (a half softmax is decomposed over a float32 upcast)
  if (!HasType(graph, spec.x, spec.dtype) && !HasType(graph, spec.x, DType::kFloat32)) {
    return std::nullopt;
  }
  if (!AbsorbedStayInside(graph, spec)) {
    return std::nullopt;
  }
  return spec;
}

}  // namespace egg::expert
