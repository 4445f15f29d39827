// Scans (cumsum, cumprod) along one dimension, parsed.
#pragma once

#include <optional>
#include <string>

#include "expert/ir/graph.h"

namespace egg::expert {

struct ScanSpec {
  std::string kind;  // sum | prod
  int node = -1;
  int input = -1;
  int64_t dim = 0;
};
std::optional<ScanSpec> ParseScan(const Graph& graph, const Node& node);

}  // namespace egg::expert
