#include "expert/patterns/scan.h"

#include <gtest/gtest.h>

#include "expert/codegen/candidate_file.h"
#include "expert/ir/test_graphs.h"
#include "expert/ir/test_nodes.h"
#include "expert/plan/plan.h"

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

using testing::Count;
using testing::GraphJson;
using testing::Input;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

// `op`(x, args...) of x [3, 4, 10] with its (values, indices) read through getitem, values then relu'd.
Json SortGraph(const std::string& op, const Json& args, int64_t kept, const std::string& dtype = "float32") {
  Json all = Json::array({Ref("x")});
  for (const Json& arg : args) {
    all.push_back(arg);
  }
  const Json values = Meta({3, 4, kept}, dtype);
  const Json indices = Meta({3, 4, kept}, "int64");
  return GraphJson({Input("x", 0, Meta({3, 4, 10}, dtype))},
                   {NodeJson("sort", op, all, Json::array({values, indices})),
                    NodeJson("getitem", "getitem", {Ref("sort"), 0}, values),
                    NodeJson("getitem_1", "getitem", {Ref("sort"), 1}, indices),
                    NodeJson("relu", "aten.relu.default", Json::array({Ref("getitem")}), values)},
                   {"relu", "getitem_1"});
}

TEST(ScanPatternTest, SortAndTopkAreSortsOfTheirRows) {
  Graph graph = testing::LoadGraph(SortGraph("aten.sort.default", {1, true}, 10));
  auto sort = ParseScan(graph, graph.nodes[0]);
  ASSERT_TRUE(sort);
  EXPECT_EQ(sort->kind, ScanKind::kSort);
  EXPECT_EQ(sort->dim, 1);
  EXPECT_TRUE(sort->descending);
  EXPECT_EQ(sort->keep, 4);
  EXPECT_EQ(sort->outputs, (std::vector<int>{graph.nodes[1].value, graph.nodes[2].value}));
  graph = testing::LoadGraph(SortGraph("aten.topk.default", {3, -1, false}, 3));
  sort = ParseScan(graph, graph.nodes[0]);
  ASSERT_TRUE(sort);
  EXPECT_EQ(sort->dim, 2);
  EXPECT_FALSE(sort->descending);  // the smallest 3
  EXPECT_EQ(sort->keep, 3);
  // Unsorted top-k (its order is PyTorch's to choose) and integer rows stay in PyTorch.
  graph = testing::LoadGraph(SortGraph("aten.topk.default", {3, -1, true, false}, 3));
  EXPECT_FALSE(ParseScan(graph, graph.nodes[0]));
  graph = testing::LoadGraph(SortGraph("aten.sort.default", Json::array(), 10, "int64"));
  EXPECT_FALSE(ParseScan(graph, graph.nodes[0]));
}

TEST(SortPlanTest, ASortIsOneRowKernelWithItsEpilogue) {
  const Graph graph = testing::LoadGraph(SortGraph("aten.sort.default", Json::array(), 10));
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  ASSERT_EQ(plan.kernels.size(), 1U);
  EXPECT_EQ(plan.kernels[0].kind, KernelKind::kScan);
  EXPECT_EQ(plan.kernels[0].design.algorithm, Algorithm::kSingle);
  EXPECT_EQ(plan.kernels[0].design.rblock, 16);
  const Candidate candidate = GenerateCandidate(graph, "", "sort", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  const std::string& source = *candidate.source;
  EXPECT_EQ(Count(source, "tl.sort(packed, 1, descending=False)"), 1U) << source;
  EXPECT_EQ(Count(source, "tl.store("), 2U)
      << source;  // the indices and relu(values): the values stay in registers
  EXPECT_NE(source.find("9223372036854775807)"), std::string::npos) << source;  // padding sorts last
}

TEST(SortPlanTest, TopkStoresTheFirstKOfEachRowLargestFirst) {
  const Graph graph = testing::LoadGraph(SortGraph("aten.topk.default", {3}, 3));
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  const Candidate candidate = GenerateCandidate(graph, "", "topk", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  const std::string& source = *candidate.source;
  EXPECT_NE(source.find("(9 - rindex).to(tl.int64), -9223372036854775808)"), std::string::npos) << source;
  EXPECT_NE(source.find("indices = 9 - (packed & 0xFFFFFFFF)"), std::string::npos) << source;
  EXPECT_NE(source.find("kmask = xmask & (rindex < 3)"), std::string::npos) << source;
  EXPECT_NE(source.find("tl.store(ptr2 + (rindex + 3*xindex), indices, kmask)"), std::string::npos) << source;
}

}  // namespace
}  // namespace egg::expert
