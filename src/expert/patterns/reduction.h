// Reductions of the captured graph (sum, mean, max, var...): what each combines over which dimensions, and
// the online-softmax pattern among a kernel's reductions.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "expert/ir/graph.h"

namespace egg::expert {

// A reduction node, parsed: what it combines, over which dimensions of which input.
struct ReductionSpec {
  std::string
      kind;  // sum mean max min prod argmax argmin var std any all max_with_index min_with_index var_mean
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
