#include "expert/agents/expert_agents.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "expert/codegen/candidate_file.h"
#include "expert/design/candidate.h"
#include "expert/design/design_space.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::BigSoftmax;

agents::StageContext Context(const std::string& stage, const std::string& incumbent = "",
                             std::optional<agents::Design> design = std::nullopt) {
  agents::StageContext context;
  context.stage = stage;
  context.incumbent_source = incumbent;
  context.incumbent_design = std::move(design);
  return context;
}

TEST(ExpertAgentsTest, CodeAgentSeedsAndSpacesCarryTheirDesignRecords) {
  const Graph graph = BigSoftmax();
  agents::Backend backend = MakeExpertBackend({&graph, "", "softmax.py"});
  std::map<std::string, agents::Design> seeds;  // by source
  for (int index = 0; index < kSeedFamilies; ++index) {
    auto proposal = backend.code->Propose(Context("stage1.seeds"), nullptr, index, kSeedFamilies);
    ASSERT_TRUE(proposal.value) << proposal.failure;
    EXPECT_EQ(proposal.value->move, "seed " + std::to_string(index));
    ASSERT_TRUE(proposal.value->design);
    const auto design = DesignOf(proposal.value->design);
    ASSERT_TRUE(design);
    EXPECT_EQ(design->seed, index);
    // The record is what the file was generated from: it regenerates the same source.
    EXPECT_EQ(GenerateCandidate(graph, "", "softmax.py", *design).source, proposal.value->source);
    seeds.emplace(proposal.value->source, *proposal.value->design);
  }
  EXPECT_EQ(seeds.size(), 3U);
  const auto& [incumbent_source, incumbent_design] = *seeds.begin();
  const auto space =
      backend.code->ProposeSpace(Context("stage2.tiling", incumbent_source, incumbent_design), nullptr);
  EXPECT_FALSE(space.empty());
  EXPECT_LE(space.size(), kStageSpaceLimit);
  for (const agents::CodeProposal& proposal : space) {
    ASSERT_TRUE(DesignOf(proposal.design)) << proposal.move;
    EXPECT_NE(*proposal.design, incumbent_design) << proposal.move;
    EXPECT_EQ(GenerateCandidate(graph, "", "softmax.py", *DesignOf(proposal.design)).source, proposal.source);
  }
  EXPECT_TRUE(backend.code->ProposeSpace(Context("stage1.seeds", incumbent_source, incumbent_design), nullptr)
                  .empty())
      << "a seed 0 of few launches takes no CUDA graph: nothing to screen beside it";
}

TEST(ExpertAgentsTest, SeedZeroOfAForwardOfManyLaunchesIsGraphed) {
  // x @ w0, relu, @ w1, relu, ... eight products: eight launches, none left to PyTorch
  std::vector<Json> inputs = {testing::Input("x", 0, testing::Meta({64, 64}))};
  std::vector<Json> nodes;
  std::string last = "x";
  for (int i = 0; i < 8; ++i) {
    const std::string w = "w" + std::to_string(i);
    const std::string mm = "mm" + std::to_string(i);
    const std::string relu = "relu" + std::to_string(i);
    inputs.push_back(testing::Input(w, i + 1, testing::Meta({64, 64})));
    nodes.push_back(testing::NodeJson(
        mm, "aten.mm.default", Json::array({testing::Ref(last), testing::Ref(w)}), testing::Meta({64, 64})));
    nodes.push_back(testing::NodeJson(relu, "aten.relu.default", Json::array({testing::Ref(mm)}),
                                      testing::Meta({64, 64})));
    last = relu;
  }
  const Graph graph = testing::LoadGraph(testing::GraphJson(inputs, nodes, {last}));
  agents::Backend backend = MakeExpertBackend({&graph, "", "chain.py"});
  auto seed0 = backend.code->Propose(Context("stage1.seeds"), nullptr, 0, kSeedFamilies);
  ASSERT_TRUE(seed0.value) << seed0.failure;
  EXPECT_EQ(seed0.value->move, "seed 0 graphed");
  const auto design = DesignOf(seed0.value->design);
  ASSERT_TRUE(design);
  EXPECT_TRUE(design->plan.cuda_graph);
  EXPECT_NE(seed0.value->source.find("return _egg_graphed(self, self._egg_forward, ("), std::string::npos);
  EXPECT_EQ(GenerateCandidate(graph, "", "chain.py", *design).source, seed0.value->source);
  auto seed1 = backend.code->Propose(Context("stage1.seeds"), nullptr, 1, kSeedFamilies);
  ASSERT_TRUE(seed1.value) << seed1.failure;
  EXPECT_EQ(seed1.value->move, "seed 1") << "the other seeds launch kernel by kernel";
  EXPECT_FALSE(DesignOf(seed1.value->design)->plan.cuda_graph);
  // Screened beside the seeds: seed 0's kernels launched one by one, so that the graph is measured, not
  // assumed.
  const auto companions = backend.code->ProposeSpace(Context("stage1.seeds"), nullptr);
  ASSERT_EQ(companions.size(), 1U);
  EXPECT_EQ(companions[0].move, "seed 0 launched one by one");
  const auto plain = DesignOf(companions[0].design);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->seed, 0);
  EXPECT_FALSE(plain->plan.cuda_graph);
  EXPECT_EQ(companions[0].source.find("_egg_graphed(self"), std::string::npos);
  EXPECT_EQ(GenerateCandidate(graph, "", "chain.py", *plain).source, companions[0].source);
  agents::StageContext refining = Context("stage1.seeds");
  refining.refining_seed = true;
  EXPECT_TRUE(backend.code->ProposeSpace(refining, nullptr).empty())
      << "a seed's refinement has no companion";
}

TEST(ExpertAgentsTest, CodeAgentReadsTheIncumbentsDesignFromTheContextNeverFromItsSource) {
  const Graph graph = BigSoftmax();
  agents::Backend backend = MakeExpertBackend({&graph, "", "softmax.py"});
  const Candidate seed = GenerateCandidate(graph, "", "softmax.py", SeedDesign(0, 1e-2).design);
  ASSERT_TRUE(seed.source);
  ASSERT_NE(seed.source->find(kDesignMarker), std::string::npos);  // the comment line is in the file
  // The compiler's own file without its design record (as an LLM edit of it would come): refused, gracefully.
  EXPECT_TRUE(backend.code->ProposeSpace(Context("stage2.tiling", *seed.source), nullptr).empty());
  const auto refused = backend.code->Propose(Context("stage2.tiling", *seed.source), nullptr, 0, 1);
  EXPECT_FALSE(refused.value);
  EXPECT_EQ(refused.stop, agents::StopReason::kNone);
  EXPECT_NE(refused.failure.find("no expert design record"), std::string::npos) << refused.failure;
  // A record that is not a design record is refused the same way.
  for (const Json& broken : {Json::array({1, 2}), Json{{"seed", "zero"}}}) {
    EXPECT_TRUE(
        backend.code->ProposeSpace(Context("stage2.tiling", *seed.source, agents::Design{broken}), nullptr)
            .empty())
        << broken;
  }
  // With the record in the context the source is not needed at all.
  const auto from_design = backend.code->Propose(
      Context("stage2.tiling", "class ModelNew: pass", DesignMessage(seed.design)), nullptr, 0, 1);
  ASSERT_TRUE(from_design.value) << from_design.failure;
  EXPECT_TRUE(from_design.value->design);
}

TEST(ExpertAgentsTest, DebugAgentRepairsFromTheDesignRecord) {
  const Graph graph = BigSoftmax();
  agents::Backend backend = MakeExpertBackend({&graph, "", "softmax.py"});
  const Candidate failing = GenerateCandidate(graph, "", "softmax.py", {});
  ASSERT_TRUE(failing.source);
  const agents::FailedCandidate failed{*failing.source, DesignMessage(failing.design), "mismatch",
                                       "not allclose"};
  auto repaired = backend.debug->Repair(Context("stage1.seeds"), failed, 0);
  ASSERT_TRUE(repaired.value) << repaired.failure;
  EXPECT_NE(repaired.value->source, *failing.source);
  EXPECT_NE(repaired.value->diagnosis.find("mismatch"), std::string::npos);
  const auto design = DesignOf(repaired.value->design);
  ASSERT_TRUE(design);
  EXPECT_EQ(GenerateCandidate(graph, "", "softmax.py", *design).source, repaired.value->source);
  EXPECT_FALSE(backend.debug->Repair(Context("stage1.seeds"), failed, 5).value);
  // The same file without its record: no repair (the comment line in it is not read).
  const auto refused =
      backend.debug->Repair(Context("stage1.seeds"), {*failing.source, std::nullopt, "mismatch", "x"}, 0);
  EXPECT_FALSE(refused.value);
  EXPECT_NE(refused.failure.find("no expert design record"), std::string::npos) << refused.failure;
}

TEST(ExpertAgentsTest, ProfileRulesNameTheBottleneck) {
  Json profile = {{"roofline", {{"bound", "memory"}, {"pct_of_roof", 93.0}}}, {"kernels", Json::array()}};
  agents::ProfileReport report = AnalyzeProfile(profile, "stage2.tiling");
  EXPECT_TRUE(report.near_roofline);
  profile["roofline"]["pct_of_roof"] = 40.0;
  profile["kernels"] = Json::array({{{"name", "egg_k0_amax"}, {"triton", true}, {"duration_ns", 900000.0},
                                     {"dram_throughput_pct", 35.0}, {"achieved_occupancy_pct", 12.0},
                                     {"compute_throughput_pct", 10.0}, {"registers_per_thread", 128}},
                                    {{"name", "cublas"}, {"triton", false}, {"duration_ns", 5e6}}});
  report = AnalyzeProfile(profile, "stage2.mapping");
  EXPECT_FALSE(report.near_roofline);
  EXPECT_EQ(report.bottleneck, "occupancy");
  EXPECT_NE(std::find(report.evidence.begin(), report.evidence.end(), "kernel=egg_k0_amax"), report.evidence.end());
  profile["kernels"][0]["achieved_occupancy_pct"] = 60.0;
  EXPECT_EQ(AnalyzeProfile(profile, "stage2.memory").bottleneck, "latency");
  profile["kernels"][0]["dram_throughput_pct"] = 85.0;
  EXPECT_EQ(AnalyzeProfile(profile, "stage2.memory").bottleneck, "memory");
  Json many = {{"kernels", Json::array()}};
  for (int k = 0; k < 4; ++k) {
    many["kernels"].push_back({{"name", "egg_k" + std::to_string(k)}, {"triton", true}, {"duration_ns", 3000.0},
                               {"dram_throughput_pct", 20.0}});
  }
  EXPECT_EQ(AnalyzeProfile(many, "stage1.algorithm").bottleneck, "launch");
  // a kernel trace (no ncu): times alone still name the hottest Triton kernel, not the library one
  Json traced = {
      {"kernels",
       Json::array({{{"name", "cudnn_conv"}, {"triton", false}, {"duration_ns", 9e5}},
                    {{"name", "egg_k1_var"}, {"triton", true}, {"duration_ns", 6e5}, {"share", 0.4}},
                    {{"name", "egg_k0_add"}, {"triton", true}, {"duration_ns", 5e4}}})}};
  report = AnalyzeProfile(traced, "stage2.tiling");
  EXPECT_EQ(report.bottleneck, "other");
  EXPECT_EQ(report.move, "tune the hottest kernel");
  EXPECT_EQ(std::count(report.evidence.begin(), report.evidence.end(), "kernel=egg_k1_var"), 1);
  EXPECT_EQ(std::count(report.evidence.begin(), report.evidence.end(), "kernel=cudnn_conv"), 0);
  EXPECT_NE(std::find(report.evidence.begin(), report.evidence.end(), "share_of_gpu_time_pct=40.0"),
            report.evidence.end());
  EXPECT_EQ(std::count_if(report.evidence.begin(), report.evidence.end(),
                          [](const std::string& item) { return item.find("dram") != std::string::npos; }),
            0);
}

}  // namespace
}  // namespace egg::expert
