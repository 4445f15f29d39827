// Finding nodes in a fixture graph by op, for the rooms' tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "expert/ir/graph.h"

namespace egg::expert::testing {

// The `nth` node (0-based) whose op is `op`; fails the test when there is none.
inline const Node& NodeWithOp(const Graph& graph, const std::string& op, size_t nth = 0) {
  for (const Node& node : graph.nodes) {
    if (node.op == op && nth-- == 0) {
      return node;
    }
  }
  ADD_FAILURE() << "no node " << op;
  return graph.nodes.front();
}

}  // namespace egg::expert::testing
