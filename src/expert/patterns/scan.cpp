#include "expert/patterns/scan.h"

#include "expert/patterns/node_args.h"

namespace egg::expert {

std::optional<ScanSpec> ParseScan(const Graph& graph, const Node& node) {
  const Value* tensor = TensorInput(graph, node);
  if (tensor == nullptr || tensor->meta->shape.empty()) {
    return std::nullopt;
  }
  const Value& input = *tensor;
  ScanSpec scan;
  scan.node = static_cast<int>(&node - graph.nodes.data());
  scan.input = node.args[0].value;
  scan.kind = node.op == "aten.cumsum.default" ? ScanKind::kSum : ScanKind::kProd;
  scan.dim = NormalizeDim(IntArg(node, 1, "dim", 0), input.meta->shape.size());
  return scan;
}
}  // namespace egg::expert
