// Reductions of the captured graph (sum, mean, max, var...): what each combines over which dimensions, and
// the online-softmax pattern among a kernel's reductions.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "expert/ir/graph.h"
#include "expert/ir/name_table.h"

namespace egg::expert {

// What a reduction combines. max_with_index and min_with_index are aten.max.dim and min.dim (values and
// indices); var_mean is both statistics.
enum class ReductionKind {
  kSum,
  kMean,
  kMax,
  kMin,
  kProd,
  kArgmax,
  kArgmin,
  kVar,
  kStd,
  kAny,
  kAll,
  kMaxWithIndex,
  kMinWithIndex,
  kVarMean,
};

template <>
struct EnumNames<ReductionKind> {
  static constexpr std::array<std::pair<ReductionKind, std::string_view>, 14> kTable{{
      {ReductionKind::kSum, "sum"},
      {ReductionKind::kMean, "mean"},
      {ReductionKind::kMax, "max"},
      {ReductionKind::kMin, "min"},
      {ReductionKind::kProd, "prod"},
      {ReductionKind::kArgmax, "argmax"},
      {ReductionKind::kArgmin, "argmin"},
      {ReductionKind::kVar, "var"},
      {ReductionKind::kStd, "std"},
      {ReductionKind::kAny, "any"},
      {ReductionKind::kAll, "all"},
      {ReductionKind::kMaxWithIndex, "max_with_index"},
      {ReductionKind::kMinWithIndex, "min_with_index"},
      {ReductionKind::kVarMean, "var_mean"},
  }};
};

// Reductions that find an extreme's position (argmax, argmin, max.dim, min.dim).
inline bool IsIndexed(ReductionKind kind) {
  return kind == ReductionKind::kArgmax || kind == ReductionKind::kArgmin ||
         kind == ReductionKind::kMaxWithIndex || kind == ReductionKind::kMinWithIndex;
}
// Reductions toward the maximum (max, argmax, max.dim).
inline bool IsMaxLike(ReductionKind kind) {
  return kind == ReductionKind::kMax || kind == ReductionKind::kArgmax ||
         kind == ReductionKind::kMaxWithIndex;
}
// Reductions toward the minimum (min, argmin, min.dim).
inline bool IsMinLike(ReductionKind kind) {
  return kind == ReductionKind::kMin || kind == ReductionKind::kArgmin ||
         kind == ReductionKind::kMinWithIndex;
}
// Variance statistics (var, std, var_mean): Welford.
inline bool IsVariance(ReductionKind kind) {
  return kind == ReductionKind::kVar || kind == ReductionKind::kStd || kind == ReductionKind::kVarMean;
}
// Boolean reductions (any, all).
inline bool IsLogical(ReductionKind kind) {
  return kind == ReductionKind::kAny || kind == ReductionKind::kAll;
}

// A reduction node, parsed: what it combines, over which dimensions of which input.
struct ReductionSpec {
  ReductionKind kind = ReductionKind::kSum;
  int node = -1;
  int input = -1;
  std::vector<int64_t> dims;  // reduced dimensions of the input, sorted
  double correction = 1;
  std::vector<int> outputs;  // values holding the results (getitem values for tuple-producing nodes)
  std::vector<int64_t> kept_shape;
  std::vector<int64_t> reduced_shape;
  int64_t Rows() const { return Product(kept_shape); }
  int64_t Length() const { return Product(reduced_shape); }
};
std::optional<ReductionSpec> ParseReduction(const Graph& graph, const Node& node);

// Pairs (index of a max, index of a sum) among `specs` where the sum is of exp(u - max(u)) over the same
// rows: online softmax computes both in one pass.
std::vector<std::pair<size_t, size_t>> OnlinePairs(const Graph& graph,
                                                   const std::vector<ReductionSpec>& specs);

}  // namespace egg::expert
