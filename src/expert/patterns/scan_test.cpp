#include "expert/patterns/scan.h"

#include <gtest/gtest.h>

#include "expert/ir/test_graphs.h"
#include "expert/ir/test_nodes.h"

namespace egg::expert {
namespace {

TEST(ScanPatternTest, CumsumIsASumScanAlongItsDimension) {
  const Graph graph = testing::Fixture("level1_92_cumsum_exclusive");
  const Node& node = testing::NodeWithOp(graph, "aten.cumsum.default");
  const auto scan = ParseScan(graph, node);
  ASSERT_TRUE(scan);
  EXPECT_EQ(scan->kind, ScanKind::kSum);
  EXPECT_EQ(scan->input, node.args[0].value);
  EXPECT_EQ(scan->dim, 1);
}

}  // namespace
}  // namespace egg::expert
