#include "expert/patterns/scan.h"

#include "expert/patterns/node_args.h"

namespace egg::expert {
namespace {

// sort(x, dim=-1, descending=False), sort.stable(x, *, stable, dim, descending) and
// topk(x, k, dim=-1, largest=True, sorted=True): float32 rows that fit one tile, topk sorted.
std::optional<ScanSpec> ParseSort(const Graph& graph, const Node& node, const Value& input) {
  const auto& shape = input.meta->shape;
  ScanSpec sort;
  sort.kind = ScanKind::kSort;
  sort.node = static_cast<int>(&node - graph.nodes.data());
  sort.input = node.args[0].value;
  const bool topk = node.op == "aten.topk.default";
  constexpr size_t kKeywordOnly = 99;  // sort.stable's dim and descending
  const size_t dim_position = topk ? 2 : (node.op == "aten.sort.default" ? 1 : kKeywordOnly);
  sort.dim = NormalizeDim(IntArg(node, dim_position, "dim", -1), shape.size());
  const int64_t length = shape.at(static_cast<size_t>(sort.dim));
  sort.descending =
      topk ? BoolArg(node, 3, "largest", true) : BoolArg(node, dim_position + 1, "descending", false);
  sort.keep = topk ? IntArg(node, 1, "k", -1) : length;
  sort.outputs = TupleOutputs(graph, node, 2);
  if (input.meta->dtype != DType::kFloat32 || length > kMaxSortLength || sort.keep < 1 ||
      sort.keep > length || (topk && !BoolArg(node, 4, "sorted", true))) {
    return std::nullopt;
  }
  return sort;
}

}  // namespace

std::optional<ScanSpec> ParseScan(const Graph& graph, const Node& node) {
  const Value* tensor = TensorInput(graph, node);
  if (tensor == nullptr || tensor->meta->shape.empty()) {
    return std::nullopt;
  }
  const Value& input = *tensor;
  if (node.op != "aten.cumsum.default" && node.op != "aten.cumprod.default") {
    return ParseSort(graph, node, input);
  }
  ScanSpec scan;
  scan.node = static_cast<int>(&node - graph.nodes.data());
  scan.input = node.args[0].value;
  scan.kind = node.op == "aten.cumsum.default" ? ScanKind::kSum : ScanKind::kProd;
  scan.dim = NormalizeDim(IntArg(node, 1, "dim", 0), input.meta->shape.size());
  return scan;
}
}  // namespace egg::expert
