#include "expert/patterns/reduction.h"

#include <algorithm>
#include <map>

#include "expert/ir/ops.h"
#include "expert/patterns/node_args.h"

namespace egg::expert {

namespace {

// What a reduction op combines, from its aten name: whole ops first (aten.max.dim: max with index), then the
// base of aten.<base>.<overload> (aten.amax.default: max).
std::optional<ReductionKind> ReductionKindOf(const std::string& op) {
  using K = ReductionKind;
  static const std::map<std::string, ReductionKind> kByOp = {
      {"prims.sum.default", K::kSum},     {"aten.max.default", K::kMax},
      {"aten.min.default", K::kMin},      {"aten.max.dim", K::kMaxWithIndex},
      {"aten.min.dim", K::kMinWithIndex}, {"aten.var_mean.correction", K::kVarMean}};
  static const std::map<std::string, ReductionKind> kByBase = {
      {"sum", K::kSum},       {"mean", K::kMean}, {"amax", K::kMax}, {"amin", K::kMin},
      {"prod", K::kProd},     {"var", K::kVar},   {"std", K::kStd},  {"argmax", K::kArgmax},
      {"argmin", K::kArgmin}, {"any", K::kAny},   {"all", K::kAll}};
  const std::string base = op.substr(op.find('.') + 1, op.rfind('.') - op.find('.') - 1);
  if (const auto found = kByOp.find(op); found != kByOp.end()) {
    return found->second;
  }
  if (const auto found = kByBase.find(base); found != kByBase.end()) {
    return found->second;
  }
  return std::nullopt;
}

// What a reduction node's arguments say: the dimensions it reduces (sorted, unique), whether it reduces all
// of them (no dim argument, or an empty one) and its variance correction.
struct ReducedDims {
  std::vector<int64_t> dims;
  bool all = false;
  double correction = 1;
};

// Nullopt when the dimensions are not constants within the input's rank.
std::optional<ReducedDims> ReadReducedDims(const Node& node, size_t rank) {
  const std::string& op = node.op;
  ReducedDims out;
  std::optional<std::vector<int64_t>> dims;
  bool& all = out.all;
  auto dims_at = [&](size_t position, const std::string& key) {
    const Arg* arg = node.ArgAt(position, key);
    if (arg == nullptr || arg->kind == Arg::Kind::kNone) {
      all = true;
      return;
    }
    dims = arg->AsInts();
    if (dims && dims->empty()) {
      all = true;
    }
  };
  if (op == "aten.sum.default" || op == "aten.mean.default" || op == "aten.prod.default" ||
      op == "aten.max.default" || op == "aten.min.default" || op == "aten.any.default" ||
      op == "aten.all.default") {
    all = true;
  } else if (op == "aten.var.correction" || op == "aten.std.correction" || op == "aten.var_mean.correction") {
    dims_at(1, "dim");
    const Arg* correction = node.Kwarg("correction");
    out.correction = correction != nullptr && correction->IsNumber() ? correction->AsDouble() : 1.0;
  } else if (op == "aten.var.dim") {
    dims_at(1, "dim");
    out.correction = BoolArg(node, 2, "unbiased", true) ? 1.0 : 0.0;
  } else if (op == "prims.var.default") {
    dims_at(1, "dims");
    const Arg* correction = node.ArgAt(2, "correction");
    out.correction = correction != nullptr && correction->IsNumber() ? correction->AsDouble() : 1.0;
  } else {
    dims_at(1, "dim");
  }
  std::vector<int64_t>& reduced = out.dims;
  if (all) {
    for (size_t d = 0; d < rank; ++d) {
      reduced.push_back(static_cast<int64_t>(d));
    }
  } else {
    if (!dims) {
      return std::nullopt;
    }
    for (int64_t d : *dims) {
      reduced.push_back(NormalizeDim(d, rank));
    }
  }
  std::sort(reduced.begin(), reduced.end());
  reduced.erase(std::unique(reduced.begin(), reduced.end()), reduced.end());
  if (rank == 0 || reduced.empty() || reduced.back() >= static_cast<int64_t>(rank) || reduced.front() < 0) {
    return std::nullopt;
  }
  return out;
}

}  // namespace

std::optional<ReductionSpec> ParseReduction(const Graph& graph, const Node& node) {
  const Value* tensor = TensorInput(graph, node);
  if (tensor == nullptr) {
    return std::nullopt;
  }
  const Value& input = *tensor;
  const size_t rank = input.meta->shape.size();
  ReductionSpec spec;
  spec.node = static_cast<int>(&node - graph.nodes.data());
  spec.input = node.args[0].value;
  const std::string& op = node.op;
  const std::optional<ReducedDims> reduced = ReadReducedDims(node, rank);
  if (!reduced) {
    return std::nullopt;
  }
  spec.dims = reduced->dims;
  spec.correction = reduced->correction;
  const std::optional<ReductionKind> kind = ReductionKindOf(op);
  if (!kind) {
    return std::nullopt;
  }
  spec.kind = *kind;
  if (IsIndexed(spec.kind) && spec.dims.size() != 1 && !reduced->all) {
    return std::nullopt;
  }
  if (spec.kind == ReductionKind::kMaxWithIndex || spec.kind == ReductionKind::kMinWithIndex ||
      spec.kind == ReductionKind::kVarMean) {
    spec.outputs = TupleOutputs(graph, node, 2);
  } else {
    spec.outputs = {node.value};
  }
  if (spec.outputs[0] < 0 && (spec.outputs.size() < 2 || spec.outputs[1] < 0)) {
    return std::nullopt;
  }
  if ((spec.kind == ReductionKind::kMaxWithIndex || spec.kind == ReductionKind::kMinWithIndex) &&
      spec.outputs[1] < 0) {  // `x.max(dim)[0]`: no index read, a plain max (no pairs to carry)
    spec.kind = spec.kind == ReductionKind::kMaxWithIndex ? ReductionKind::kMax : ReductionKind::kMin;
    spec.outputs.resize(1);
  }
  for (int output : spec.outputs) {
    if (output >= 0 && !ValueAt(graph, output).meta) {
      return std::nullopt;
    }
  }
  std::vector<bool> is_reduced(rank, false);
  for (int64_t d : spec.dims) {
    is_reduced[static_cast<size_t>(d)] = true;
  }
  for (size_t d = 0; d < rank; ++d) {
    (is_reduced[d] ? spec.reduced_shape : spec.kept_shape).push_back(input.meta->shape[d]);
  }
  if (spec.Length() == 0 || spec.Rows() == 0) {
    return std::nullopt;
  }
  return spec;
}

namespace {

// The value under any chain of views.
int StripViews(const Graph& graph, int value) {
  while (true) {
    const Node* node = graph.Producer(value);
    if (node == nullptr || ClassifyOp(node->op) != OpClass::kView || node->op == "aten.flip.default") {
      return value;
    }
    value = ViewSource(*node);
  }
}

}  // namespace

std::vector<std::pair<size_t, size_t>> OnlinePairs(const Graph& graph,
                                                   const std::vector<ReductionSpec>& specs) {
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t k = 0; k < specs.size(); ++k) {
    if (specs[k].kind != ReductionKind::kSum) {
      continue;
    }
    const Node* exp = graph.Producer(specs[k].input);
    if (exp == nullptr || exp->op != "aten.exp.default" || exp->args.empty() ||
        exp->args[0].kind != Arg::Kind::kValue) {
      continue;
    }
    const Node* sub = graph.Producer(exp->args[0].value);
    if (sub == nullptr || sub->op != "aten.sub.Tensor" || sub->args.size() != 2 ||
        sub->Kwarg("alpha") != nullptr || sub->args[0].kind != Arg::Kind::kValue ||
        sub->args[1].kind != Arg::Kind::kValue) {
      continue;
    }
    const int u = sub->args[0].value;
    const int m = StripViews(graph, sub->args[1].value);
    const auto* u_meta = &graph.values.at(static_cast<size_t>(u)).meta;
    const auto* sub_meta = &graph.values.at(static_cast<size_t>(sub->value)).meta;
    if (!*u_meta || !*sub_meta || (*u_meta)->shape != (*sub_meta)->shape) {
      continue;
    }
    for (size_t j = 0; j < k; ++j) {
      if (specs[j].kind == ReductionKind::kMax && specs[j].outputs[0] == m && specs[j].input == u &&
          specs[j].dims == specs[k].dims) {
        pairs.emplace_back(j, k);
        break;
      }
    }
  }
  return pairs;
}
}  // namespace egg::expert
