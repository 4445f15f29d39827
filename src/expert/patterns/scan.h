// Scans (cumsum, cumprod) and sorts (sort, topk) along one dimension, parsed: kernels over rows.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "expert/ir/graph.h"
#include "expert/ir/name_table.h"

namespace egg::expert {

// kSort: sort and topk, a row sorted in one tile (float32 rows of at most kMaxSortLength).
enum class ScanKind { kSum, kProd, kSort };

inline constexpr int64_t kMaxSortLength = 16384;

template <>
struct EnumNames<ScanKind> {
  static constexpr std::array<std::pair<ScanKind, std::string_view>, 3> kTable{{
      {ScanKind::kSum, "sum"},
      {ScanKind::kProd, "prod"},
      {ScanKind::kSort, "sort"},
  }};
};

struct ScanSpec {
  ScanKind kind = ScanKind::kSum;
  int node = -1;
  int input = -1;
  int64_t dim = 0;
  // kSort: largest first (sort's descending, topk's largest), how many of each row are kept (topk's k; the
  // whole row for sort), and the (values, indices) getitem values (-1 where unused).
  bool descending = false;
  int64_t keep = 0;
  std::vector<int> outputs;
};
std::optional<ScanSpec> ParseScan(const Graph& graph, const Node& node);

}  // namespace egg::expert
