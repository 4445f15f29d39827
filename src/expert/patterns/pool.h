// Pooling nodes (max, avg, adaptive avg; 1-3 spatial dimensions), parsed.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "expert/ir/graph.h"
#include "expert/ir/name_table.h"

namespace egg::expert {

enum class PoolKind { kMax, kAvg };

template <>
struct EnumNames<PoolKind> {
  static constexpr std::array<std::pair<PoolKind, std::string_view>, 2> kTable{{
      {PoolKind::kMax, "max"},
      {PoolKind::kAvg, "avg"},
  }};
};

struct PoolSpec {
  PoolKind kind = PoolKind::kMax;
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
