#include "expert/design/design_move.h"

#include <gtest/gtest.h>

#include "expert/codegen/candidate_file.h"
#include "expert/design/legality.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::FixtureJson;
using testing::LoadGraph;
using testing::Scaled;

Candidate Softmax(const Graph& graph) {
  return GenerateCandidate(graph, "", "softmax.py", SeedDesign(0, 1e-2).design);
}

Graph SmallSoftmax() { return LoadGraph(Scaled(FixtureJson("level1_23_Softmax"), 64, 4096)); }

Json Move(const std::string& kernel, const std::string& field, const Json& value) {
  return Json{{"kernel", kernel}, {"field", field}, {"value", value}, {"description", "why"}};
}

TEST(DesignMoveTest, ALegalMoveChangesOneFieldOfTheIncumbentsDesign) {
  const Graph graph = SmallSoftmax();
  const Candidate incumbent = Softmax(graph);
  ASSERT_TRUE(incumbent.source) << incumbent.problem;
  const KernelPlan& kernel = incumbent.plan.kernels.front();
  const int warps = kernel.design.num_warps == 4 ? 8 : 4;
  const MoveCheck check = CheckDesignMove(incumbent, Move(kernel.name, "num_warps", warps));
  ASSERT_TRUE(check.move) << check.rule;
  EXPECT_EQ(check.move->design.kernels.at(kernel.name).num_warps, warps);
  EXPECT_EQ(check.move->move, "llm: " + kernel.name + " num_warps " + std::to_string(warps));
  EXPECT_EQ(check.move->description, "why");
  const Candidate realized = GenerateCandidate(graph, "", "softmax.py", check.move->design);
  ASSERT_TRUE(realized.source);
  EXPECT_EQ(realized.plan.kernels.front().design.num_warps, warps)
      << "the compiler realized the move as asked";
}

TEST(DesignMoveTest, IllegalMovesNameTheRuleTheyBreak) {
  const Graph graph = SmallSoftmax();
  const Candidate incumbent = Softmax(graph);
  const std::string name = incumbent.plan.kernels.front().name;
  const int64_t xblock = incumbent.plan.kernels.front().design.xblock;
  EXPECT_NE(CheckDesignMove(incumbent, Move(name, "num_warps", 3)).rule.find("DesignFits"),
            std::string::npos);
  EXPECT_NE(
      CheckDesignMove(incumbent, Move("egg_k9_nope", "xblock", 64)).rule.find("unknown kernel 'egg_k9_nope'"),
      std::string::npos);
  EXPECT_NE(CheckDesignMove(incumbent, Move(name, "colour", 1)).rule.find("unknown field 'colour'"),
            std::string::npos);
  EXPECT_NE(CheckDesignMove(incumbent, Move(name, "xblock", "big")).rule.find("takes an integer"),
            std::string::npos);
  EXPECT_NE(CheckDesignMove(incumbent, Move(name, "xblock", xblock)).rule.find("changes nothing"),
            std::string::npos);
  EXPECT_NE(CheckDesignMove(incumbent, Move(name, "xblock", int64_t{1} << 30)).rule.find("Design"),
            std::string::npos);
  EXPECT_NE(CheckDesignMove(incumbent, Json{{"field", "xblock"}}).rule.find("names its"), std::string::npos);
  EXPECT_FALSE(CheckDesignMove(incumbent, Move(name, "num_warps", 3)).move);
}

TEST(DesignMoveTest, PlanMovesTakeBooleansAndChangeTheFusionOptions) {
  const Graph graph = SmallSoftmax();
  const Candidate incumbent = Softmax(graph);
  const MoveCheck split = CheckDesignMove(incumbent, Move("plan", "fuse_epilogues", false));
  ASSERT_TRUE(split.move) << split.rule;
  EXPECT_FALSE(split.move->design.plan.fuse_epilogues);
  EXPECT_NE(CheckDesignMove(incumbent, Move("plan", "fuse_epilogues", 0)).rule.find("true or false"),
            std::string::npos);
  EXPECT_NE(CheckDesignMove(incumbent, Move("plan", "inline_all", true)).rule.find("unknown plan field"),
            std::string::npos);
  const Json record = DesignRecordJson(incumbent);
  EXPECT_EQ(record["kernels"].size(), incumbent.plan.kernels.size());
  EXPECT_TRUE(record["plan"]["fuse_epilogues"].get<bool>());
}

}  // namespace
}  // namespace egg::expert
