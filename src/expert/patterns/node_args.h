// Reading a captured node's arguments, shared by the pattern matchers (and codegen/'s view index algebra).
#pragma once

#include <string>
#include <vector>

#include "expert/ir/graph.h"

namespace egg::expert {

int64_t NormalizeDim(int64_t dim, size_t rank);
int64_t IntArg(const Node& node, size_t position, const std::string& key, int64_t fallback);
bool BoolArg(const Node& node, size_t position, const std::string& key, bool fallback);
// getitem users of a tuple-producing node: element index -> value (-1 when unused).
std::vector<int> TupleOutputs(const Graph& graph, const Node& node, size_t count);
std::vector<int64_t> ExpandTo(std::vector<int64_t> values, int count, int64_t fallback);
// The tensor value of a node's first argument, or nullptr.
const Value* TensorInput(const Graph& graph, const Node& node);

}  // namespace egg::expert
