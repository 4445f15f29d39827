// Pooling nodes (max, avg, adaptive avg; 1-3 spatial dimensions), parsed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "expert/ir/graph.h"

namespace egg::expert {

struct PoolSpec {
  std::string kind;  // max | avg
  int node = -1;
  int input = -1;
  int output = -1;  // the value of pooled results
  int spatial = 2;  // 1, 2 or 3 spatial dimensions
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<int64_t> divisor_override;
  bool adaptive = false;
};
std::optional<PoolSpec> ParsePool(const Graph& graph, const Node& node);

}  // namespace egg::expert
