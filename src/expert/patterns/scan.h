// Scans (cumsum, cumprod) along one dimension, parsed.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "expert/ir/graph.h"
#include "expert/ir/name_table.h"

namespace egg::expert {

enum class ScanKind { kSum, kProd };

template <>
struct EnumNames<ScanKind> {
  static constexpr std::array<std::pair<ScanKind, std::string_view>, 2> kTable{{
      {ScanKind::kSum, "sum"},
      {ScanKind::kProd, "prod"},
  }};
};

struct ScanSpec {
  ScanKind kind = ScanKind::kSum;
  int node = -1;
  int input = -1;
  int64_t dim = 0;
};
std::optional<ScanSpec> ParseScan(const Graph& graph, const Node& node);

}  // namespace egg::expert
