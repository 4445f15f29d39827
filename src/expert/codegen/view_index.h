// Views as index maps (codegen/ only): the index into a view's source for an index into the view, PyTorch
// broadcasting, and the constant node arguments code generation reads (a non-constant one throws NotFusable).
#pragma once

#include <string>
#include <vector>

#include "expert/ir/graph.h"
#include "expert/ir/index_expr.h"

namespace egg::expert {

// The index of `input` (shape `input_shape`) read by an op whose output index is `index` over `out_shape`,
// under PyTorch broadcasting (dimensions aligned on the right, size-1 dimensions fixed at 0).
std::vector<Index> BroadcastIndex(const std::vector<Index>& index, const std::vector<int64_t>& out_shape,
                                  const std::vector<int64_t>& input_shape);
// The index into a view node's source for an index into the view (throws NotFusable for unknown views).
std::vector<Index> ViewSourceIndex(const Graph& graph, const Node& node, const std::vector<Index>& index);

// The shape of tensor value `value` (NotFusable for a non-tensor).
const std::vector<int64_t>& ShapeOf(const Graph& graph, int value);
// A node's constant int list / int argument (empty / `fallback` when absent, NotFusable when not constant).
std::vector<int64_t> IntsOf(const Node& node, size_t position, const std::string& key);
int64_t IntOf(const Node& node, size_t position, const std::string& key, int64_t fallback);

}  // namespace egg::expert
