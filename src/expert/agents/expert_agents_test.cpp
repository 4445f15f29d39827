#include "expert/agents/expert_agents.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "expert/codegen/candidate_file.h"
#include "expert/design/candidate.h"
#include "expert/design/design_space.h"
#include "expert/design/legality.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::FixtureJson;
using testing::LoadGraph;
using testing::Scaled;

Graph BigSoftmax() { return LoadGraph(Scaled(FixtureJson("level1_23_Softmax"), 64, 65536)); }

agents::StageContext Context(const std::string& stage, const std::string& incumbent = "",
                             std::optional<agents::Design> design = std::nullopt) {
  agents::StageContext context;
  context.stage = stage;
  context.incumbent_source = incumbent;
  context.incumbent_design = std::move(design);
  return context;
}

TEST(DesignSpaceTest, StageMovesChangeOneDecisionAndArePruned) {
  const Graph graph = BigSoftmax();
  const Candidate incumbent = GenerateCandidate(graph, "", "softmax", SeedDesign(0, 1e-2).design);
  ASSERT_TRUE(incumbent.source);
  const KernelPlan& kernel = incumbent.plan.kernels[0];
  for (const std::string stage : {"stage1.algorithm", "stage2.mapping", "stage2.tiling", "stage2.memory"}) {
    const auto moves = StageMoves(graph, stage, incumbent, "", 5);
    EXPECT_FALSE(moves.empty()) << stage;
    EXPECT_LE(moves.size(), 5U);
    std::set<std::string> designs;
    for (const DesignMove& move : moves) {
      EXPECT_TRUE(designs.insert(move.design.ToJson().dump()).second) << "duplicate move in " << stage;
      EXPECT_NE(move.design.ToJson(), incumbent.design.ToJson());
      const auto found = move.design.kernels.find(kernel.name);
      if (found != move.design.kernels.end()) {
        EXPECT_TRUE(WorthMeasuring(kernel, found->second)) << move.move;
      }
    }
  }
  for (const DesignMove& move : StageMoves(graph, "stage2.tiling", incumbent, "", 3)) {
    int changed = 0;
    for (const auto& [name, design] : move.design.kernels) {
      const KernelDesign& before = incumbent.design.kernels.at(name);
      if (design == before) {
        continue;
      }
      ++changed;
      EXPECT_EQ(design.algorithm, before.algorithm) << move.move;
      EXPECT_TRUE(design.rblock != before.rblock || design.xblock != before.xblock) << move.move;
    }
    EXPECT_EQ(changed, 1) << move.move;
  }
}

TEST(DesignSpaceTest, PruningRejectsTilesThatSpillOrIdle) {
  const Graph graph = BigSoftmax();
  const Candidate candidate = GenerateCandidate(graph, "", "softmax", {});
  const KernelPlan& kernel = candidate.plan.kernels[0];
  KernelDesign design = kernel.design;
  design.rblock = 16384;
  design.xblock = 16;
  design.num_warps = 1;  // 8192 elements per thread
  EXPECT_FALSE(WorthMeasuring(kernel, design));
  design = kernel.design;
  design.rblock = 16;
  design.xblock = 1;
  design.num_warps = 16;  // 512 threads for 16 elements
  EXPECT_FALSE(WorthMeasuring(kernel, design));
}

// x @ W.T + b with its epilogue, M scaled from 48 to 512 so that every seed tile fits inside it.
Graph BigGemm() { return LoadGraph(Scaled(FixtureJson("level2_12_Gemm_Multiply_LeakyReLU"), 48, 512)); }

std::string MatmulPrecision(const Candidate& candidate) {
  for (const KernelPlan& kernel : candidate.plan.kernels) {
    if (kernel.kind == KernelKind::kMatmul) {
      return NameText(kernel.design.precision);
    }
  }
  return "none";
}

TEST(DesignSpaceTest, MatmulProductsTakeTheFastestPrecisionTheToleranceAllows) {
  const Graph graph = BigGemm();
  const Candidate loose = GenerateCandidate(graph, "", "gemm", SeedDesign(0, 1e-2).design);
  ASSERT_TRUE(loose.source) << loose.problem;
  EXPECT_EQ(MatmulPrecision(loose), "tf32");
  EXPECT_NE(loose.source->find("input_precision=\"tf32\""), std::string::npos);
  EXPECT_EQ(MatmulPrecision(GenerateCandidate(graph, "", "gemm", SeedDesign(2, 1e-3).design)), "tf32");
  // seed 1 keeps ieee products at any tolerance; at KernelBench's 1e-4 the others take tf32x3 (float32
  // accuracy on the tensor cores), each in the tile measured fastest for its products
  EXPECT_EQ(MatmulPrecision(GenerateCandidate(graph, "", "gemm", SeedDesign(1, 1e-2).design)), "ieee");
  for (int seed = 0; seed < kSeedFamilies; ++seed) {
    const Candidate exact = GenerateCandidate(graph, "", "gemm", SeedDesign(seed, 1e-4).design);
    ASSERT_TRUE(exact.source) << exact.problem;
    EXPECT_EQ(MatmulPrecision(exact), seed == 1 ? "ieee" : "tf32x3") << seed;
    const KernelDesign& tile = exact.plan.kernels.at(0).design;
    if (seed == 0) {
      EXPECT_EQ(std::make_tuple(tile.xblock, tile.yblock, tile.num_warps, tile.num_stages),
                std::make_tuple(int64_t{128}, int64_t{64}, 4, 4));
      EXPECT_NE(exact.source->find("input_precision=\"tf32x3\""), std::string::npos);
    } else if (seed == 1) {
      EXPECT_EQ(std::make_tuple(tile.xblock, tile.yblock, tile.num_warps),
                std::make_tuple(int64_t{64}, int64_t{64}, 4));
    }
  }
  // A tf32 candidate that mismatches is repaired first with ieee products, its tiles kept.
  const auto repairs = RepairMoves(loose, "mismatch", "not allclose");
  ASSERT_FALSE(repairs.empty());
  EXPECT_EQ(repairs[0].move, "ieee products");
  const Candidate exact = GenerateCandidate(graph, "", "gemm", repairs[0].design);
  EXPECT_EQ(MatmulPrecision(exact), "ieee");
  EXPECT_EQ(exact.plan.kernels.at(0).design.xblock, loose.plan.kernels.at(0).design.xblock);
  for (const DesignMove& move : RepairMoves(loose, "compile_error", "OutOfResources: shared memory")) {
    EXPECT_NE(move.move, "ieee products");
  }
}

TEST(DesignSpaceTest, ManyLaunchesMakeACudaGraphTheFirstMemoryMove) {
  // 38_LSTMBidirectional reduced: 6 layers x 2 directions of projection and time-loop launches, then a
  // linear layer.
  const Graph graph = testing::Fixture("level3_38_LSTMBidirectional");
  const Candidate incumbent = GenerateCandidate(graph, "", "lstm", SeedDesign(0, 1e-2).design);
  ASSERT_TRUE(incumbent.source) << incumbent.problem;
  EXPECT_EQ(incumbent.source->find("_egg_graphed"), std::string::npos);  // never without the move
  const auto moves = StageMoves(graph, "stage2.memory", incumbent, "", 5);
  ASSERT_FALSE(moves.empty());
  EXPECT_EQ(moves.front().move, "cuda graph");
  EXPECT_NE(moves.front().description.find("25 launches"), std::string::npos) << moves.front().description;
  EXPECT_TRUE(moves.front().design.plan.cuda_graph);
  EXPECT_EQ(moves.front().design.kernels, incumbent.design.kernels);  // nothing else changes

  const Candidate graphed = GenerateCandidate(graph, "", "lstm", moves.front().design);
  ASSERT_TRUE(graphed.source) << graphed.problem;
  const std::string& source = *graphed.source;
  EXPECT_NE(source.find("        return _egg_graphed(self, self._egg_forward, (x, h0, c0,))\n\n"
                        "    def _egg_forward(self, x, h0, c0):\n"),
            std::string::npos) << source;
  EXPECT_NE(source.find("with torch.cuda.graph(graph):"), std::string::npos);
  EXPECT_TRUE(graphed.design.plan.cuda_graph);  // the design record says so, and regenerates the file
  EXPECT_EQ(*GenerateCandidate(graph, "", "lstm", graphed.design).source, source);
  for (const DesignMove& move : StageMoves(graph, "stage2.memory", graphed, "", 20)) {
    EXPECT_NE(move.move, "cuda graph");
  }
  // A forward with few launches keeps them.
  const Graph softmax = BigSoftmax();
  const Candidate single = GenerateCandidate(softmax, "", "softmax", SeedDesign(0, 1e-2).design);
  for (const DesignMove& move : StageMoves(softmax, "stage2.memory", single, "", 20)) {
    EXPECT_NE(move.move, "cuda graph");
  }
}

TEST(DesignSpaceTest, MatmulStagesMoveTilesPipelineDepthAndPrecision) {
  const Graph graph = BigGemm();
  const Candidate incumbent = GenerateCandidate(graph, "", "gemm", SeedDesign(0, 1e-4).design);
  ASSERT_TRUE(incumbent.source) << incumbent.problem;
  const KernelPlan& kernel = incumbent.plan.kernels.at(0);
  ASSERT_EQ(kernel.kind, KernelKind::kMatmul);
  const KernelDesign& before = kernel.design;
  std::set<Precision> precisions;
  int pipelined = 0;
  for (const std::string stage : {"stage2.mapping", "stage2.tiling", "stage2.memory"}) {
    const auto moves = StageMoves(graph, stage, incumbent, "", 20);
    EXPECT_FALSE(moves.empty()) << stage;
    for (const DesignMove& move : moves) {
      const KernelDesign& after = move.design.kernels.at(kernel.name);
      EXPECT_TRUE(WorthMeasuring(kernel, after)) << move.move;
      EXPECT_FALSE(after == before) << move.move;
      if (stage == "stage2.mapping") {  // output tile only
        EXPECT_EQ(after.rblock, before.rblock) << move.move;
        EXPECT_LE(after.xblock, 512) << move.move;
      } else if (stage == "stage2.tiling") {  // K step only
        EXPECT_EQ(after.xblock, before.xblock) << move.move;
        EXPECT_EQ(after.yblock, before.yblock) << move.move;
        EXPECT_NE(after.rblock, before.rblock) << move.move;
      } else {
        EXPECT_EQ(after.xblock, before.xblock) << move.move;
        pipelined += after.num_stages > 1 ? 1 : 0;
        precisions.insert(after.precision);
      }
    }
  }
  EXPECT_GT(pipelined, 0);
  EXPECT_EQ(precisions, (std::set<Precision>{Precision::kIeee, Precision::kTf32x3}));
  // Pruned before measuring: a 256x256 accumulator over 128 threads (512 registers each), and an operand ring of
  // 5 x (256 + 128) x 128 floats (960 KB of shared memory).
  KernelDesign design = before;
  design.xblock = 256;
  design.yblock = 256;
  design.num_warps = 4;
  EXPECT_FALSE(WorthMeasuring(kernel, design));
  design = before;
  design.xblock = 256;
  design.yblock = 128;
  design.rblock = 128;
  design.num_warps = 8;
  design.num_stages = 5;
  EXPECT_FALSE(WorthMeasuring(kernel, design));
}

TEST(DesignSpaceTest, RepairsGetMoreConservative) {
  const Graph graph = BigSoftmax();
  const Candidate failing = GenerateCandidate(graph, "", "softmax", {});
  const auto moves = RepairMoves(failing, "compile_error", "triton.runtime.errors.OutOfResources: shared memory");
  ASSERT_EQ(moves.size(), 3U);
  EXPECT_EQ(moves[0].move, "halve tiles");
  EXPECT_FALSE(moves.back().design.plan.fuse_epilogues);
  EXPECT_EQ(RepairMoves(failing, "mismatch", "not allclose").size(), 2U);
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
                  .empty());
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
}

}  // namespace
}  // namespace egg::expert
