#include "pipeline/pipeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>
#include <set>

#include "common/fs.h"

namespace egg::pipeline {
namespace {

// A candidate's source is "ModelNew <name>"; the fake evaluator looks the name up in a table of outcomes.
struct Outcome {
  harness::EvalStatus status = harness::EvalStatus::kOk;
  double median_ms = 1.0;
  double spread_ms = 0.0;
};

class FakeEvaluator : public CandidateEvaluator {
 public:
  harness::EvalResult Evaluate(const CandidateFile& candidate) override {
    files.push_back(candidate);
    const std::string source = ReadFile(candidate.path);
    const std::string name = source.substr(source.find(' ') + 1);
    ++evaluations[name];
    const Outcome outcome = outcomes.count(name) ? outcomes[name] : Outcome{};
    harness::EvalResult result;
    result.status = outcome.status;
    result.correct = outcome.status == harness::EvalStatus::kOk;
    result.reason = result.correct ? "" : "planted failure";
    if (traced.count(name) != 0) {
      result.kernel_times = traced[name];
    }
    if (result.correct) {
      result.time_ms.candidate = harness::Stats{outcome.median_ms,
                                                outcome.median_ms,
                                                outcome.median_ms - outcome.spread_ms / 2,
                                                outcome.median_ms + outcome.spread_ms / 2,
                                                0,
                                                5,
                                                "fake"};
    }
    return result;
  }
  std::string Profile(const std::string&) override {
    ++profiles;
    return "{}";
  }
  int SmCount() override { return 132; }

  std::vector<harness::ScreenResult> Screen(const std::vector<CandidateFile>& candidates) override {
    std::vector<harness::ScreenResult> results;
    for (const CandidateFile& candidate : candidates) {
      const std::string& path = candidate.path;
      files.push_back(candidate);
      const std::string source = ReadFile(path);
      const std::string name = source.substr(source.find(' ') + 1);
      ++screened[name];
      const Outcome outcome = outcomes.count(name) ? outcomes[name] : Outcome{};
      harness::ScreenResult result;
      result.candidate_path = path;
      result.status = outcome.status;
      if (outcome.status == harness::EvalStatus::kOk) {
        result.time = harness::Stats{outcome.median_ms, outcome.median_ms, outcome.median_ms, outcome.median_ms,
                                     0, 20, "fake"};
      }
      results.push_back(result);
    }
    return results;
  }

  std::map<std::string, Outcome> outcomes;
  std::map<std::string, Json> traced;  // kernel_times of a candidate's evaluation
  std::map<std::string, int> evaluations;
  std::map<std::string, int> screened;
  std::vector<CandidateFile> files;  // every file evaluated or screened, with its origin
  int profiles = 0;
};

// The design record the fakes attach to a candidate "ModelNew <name>".
agents::Design DesignFor(const std::string& name) { return agents::Design{Json{{"name", name}}}; }

class ScriptedCode : public agents::CodeAgent {
 public:
  agents::AgentResult<agents::CodeProposal> Propose(const agents::StageContext& context,
                                                    const agents::ProfileReport*, int, int) override {
    stages_seen.push_back(context.stage);
    contexts.push_back(context);
    std::deque<std::string>& queue = script.count(context.stage) ? script[context.stage] : script["*"];
    if (queue.empty()) {
      return {std::nullopt, "nothing scripted", agents::StopReason::kNone};
    }
    const std::string name = queue.front();
    queue.pop_front();
    if (name == "STOP") {
      return {std::nullopt, "budget spent", agents::StopReason::kBudgetExhausted};
    }
    if (name == "UNWRITTEN") {
      return {std::nullopt, "dynamic batch: the design does not hold at batch 1152",
              agents::StopReason::kNone};
    }
    agents::CodeProposal proposal{"ModelNew " + name, "desc " + name, "move " + name};
    if (designed.count(name) != 0) {
      proposal.design = DesignFor(name);
    }
    return {proposal, "", agents::StopReason::kNone};
  }
  std::vector<agents::CodeProposal> ProposeSpace(const agents::StageContext& context,
                                                 const agents::ProfileReport*) override {
    std::vector<agents::CodeProposal> proposals;
    for (const std::string& name : spaces[context.stage]) {
      proposals.push_back({"ModelNew " + name, "desc " + name, "move " + name, agents::kAuthorExpert, false,
                           DesignFor(name)});
    }
    return proposals;
  }
  bool ProposesBesideSpace() const override { return beside_space; }
  bool beside_space = false;  // hybrid-style: proposals compete after the screened space
  std::map<std::string, std::deque<std::string>> script;
  std::map<std::string, std::vector<std::string>> spaces;  // design spaces per stage (expert-style), designed
  std::set<std::string> designed;  // scripted proposals that carry a design record (the rest: LLM source)
  std::vector<std::string> stages_seen;
  std::vector<agents::StageContext> contexts;
};

class ScriptedProfile : public agents::ProfileAgent {
 public:
  agents::AgentResult<agents::ProfileReport> Analyze(const agents::StageContext&,
                                                     const std::string& profile) override {
    profiles.push_back(profile);
    return {agents::ProfileReport{"memory", {"dram=90%"}, "bigger blocks", "", near_roofline}, "",
            agents::StopReason::kNone};
  }
  bool near_roofline = false;
  std::vector<std::string> profiles;  // what each Analyze was given
};

class ScriptedDebug : public agents::DebugAgent {
 public:
  agents::AgentResult<agents::DebugReport> Repair(const agents::StageContext&,
                                                  const agents::FailedCandidate& failed, int) override {
    repaired.push_back(failed.source + " [" + failed.status + "]");
    designs.push_back(failed.design);
    agents::DebugReport report{"ModelNew fixed", "off by one"};
    if (repairs_designed) {
      report.design = DesignFor("fixed");
    }
    return {report, "", agents::StopReason::kNone};
  }
  std::vector<std::string> repaired;
  std::vector<std::optional<agents::Design>> designs;  // the failing candidates' records, as Debug got them
  bool repairs_designed = false;
};

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto code = std::make_unique<ScriptedCode>();
    auto profile = std::make_unique<ScriptedProfile>();
    auto debug = std::make_unique<ScriptedDebug>();
    code_ = code.get();
    profile_ = profile.get();
    debug_ = debug.get();
    backend_.code = std::move(code);
    backend_.profile = std::move(profile);
    backend_.debug = std::move(debug);
    options_.run_id = "run";
    options_.run_dir =
        (std::filesystem::temp_directory_path() / ("egg-pipeline-" + std::to_string(getpid()))).string();
    options_.seeds = 2;
    options_.rounds = 2;
    options_.candidates_per_round = 1;
  }
  void TearDown() override { std::filesystem::remove_all(options_.run_dir); }
  RunResult Run() { return Pipeline(backend_, evaluator_, nullptr, options_).Run(); }

  agents::Backend backend_;
  ScriptedCode* code_ = nullptr;
  ScriptedProfile* profile_ = nullptr;
  ScriptedDebug* debug_ = nullptr;
  FakeEvaluator evaluator_;
  PipelineOptions options_;
};

TEST_F(PipelineTest, RunsAllFiveStagesInOrderAndKeepsTheFastestSeed) {
  code_->script["stage1.seeds"] = {"slow_seed", "fast_seed"};
  evaluator_.outcomes = {{"slow_seed", {harness::EvalStatus::kOk, 4.0}},
                         {"fast_seed", {harness::EvalStatus::kOk, 2.0}}};
  const RunResult result = Run();
  ASSERT_EQ(result.stages.size(), 5U);
  const std::vector<std::string> names = {"stage1.seeds", "stage1.algorithm", "stage2.mapping",
                                          "stage2.tiling", "stage2.memory"};
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(result.stages[i].spec.name, names[i]);
  }
  ASSERT_TRUE(result.correct);
  EXPECT_EQ(result.final->source, "ModelNew fast_seed");
  EXPECT_EQ(result.stages[0].incumbent_ms, 2.0);
}

TEST_F(PipelineTest, WithoutNcuTheProfileAgentGetsTheIncumbentsTracedKernelTimes) {
  code_->script["stage1.seeds"] = {"seed", "seed2"};
  evaluator_.outcomes = {{"seed", {harness::EvalStatus::kOk, 2.0}},
                         {"seed2", {harness::EvalStatus::kOk, 3.0}}};
  evaluator_.traced["seed"] = Json::array(
      {Json{{"name", "egg_k1_var"}, {"launches", 1}, {"us", 700.0}, {"share", 0.7}, {"triton", true}},
       Json{{"name", "cudnn_conv"}, {"launches", 1}, {"us", 300.0}, {"share", 0.3}, {"triton", false}}});
  options_.profile = false;
  options_.rounds = 1;
  Run();
  ASSERT_FALSE(profile_->profiles.empty());
  EXPECT_EQ(evaluator_.profiles, 0) << "no ncu profile was asked for";
  const Json profile = Json::parse(profile_->profiles.front());
  ASSERT_EQ(profile["kernels"].size(), 2U) << profile.dump();
  EXPECT_EQ(profile["kernels"][0]["name"], "egg_k1_var");
  EXPECT_EQ(profile["kernels"][0]["duration_ns"], 700000.0);
  EXPECT_EQ(profile["kernels"][0]["triton"], true);
  EXPECT_EQ(profile["kernels"][1]["triton"], false);
  EXPECT_NE(profile.value("kernels_from", "").find("trace"), std::string::npos);
}

TEST(WithTracedKernelsTest, KeepsAProfileThatNamesKernelsAndOneWithoutATrace) {
  harness::EvalResult traced;
  traced.kernel_times =
      Json::array({Json{{"name", "egg_k0_mm"}, {"us", 5.0}, {"triton", true}}, Json("junk")});
  const std::string ncu =
      R"({"kernels":[{"name":"egg_k0_mm","duration_ns":4800.0,"dram_throughput_pct":80}]})";
  EXPECT_EQ(WithTracedKernels(ncu, traced), ncu);
  EXPECT_EQ(WithTracedKernels("{}", harness::EvalResult{}), "{}");
  const Json filled =
      Json::parse(WithTracedKernels(R"({"roofline":{"bound":"memory"},"kernels":[]})", traced));
  EXPECT_EQ(filled["roofline"]["bound"], "memory");
  ASSERT_EQ(filled["kernels"].size(), 1U) << "the malformed entry is skipped";
  EXPECT_EQ(filled["kernels"][0]["duration_ns"], 5000.0);
  EXPECT_EQ(Json::parse(WithTracedKernels("not json", traced))["kernels"].size(), 1U);
}

TEST_F(PipelineTest, TheBackendsCompanionsOfItsSeedsAreScreenedWithThem) {
  code_->script["stage1.seeds"] = {"graphed", "other"};
  code_->spaces["stage1.seeds"] = {"launched"};  // the expert's: seed 0 without its CUDA graph
  evaluator_.outcomes = {{"graphed", {harness::EvalStatus::kOk, 3.0}},
                         {"other", {harness::EvalStatus::kOk, 4.0}},
                         {"launched", {harness::EvalStatus::kOk, 2.0}}};
  options_.screen_seeds = true;
  options_.refine_seeds = false;
  options_.rounds = 1;
  const RunResult result = Run();
  ASSERT_TRUE(result.correct);
  EXPECT_EQ(evaluator_.screened["launched"], 1);
  EXPECT_EQ(evaluator_.screened["graphed"], 1);
  EXPECT_EQ(result.stages[0].incumbent_ms, 2.0);
  EXPECT_EQ(result.final->source, "ModelNew launched") << "measurement, not the rule, picks the form";
}

TEST_F(PipelineTest, WithoutTuningTheSeedsCompanionsAreNotScreened) {
  code_->script["stage1.seeds"] = {"graphed", "other"};
  code_->spaces["stage1.seeds"] = {"launched"};
  options_.screen_seeds = true;
  options_.refine_seeds = false;
  options_.tune = false;  // the CPU: the interpreter's times decide nothing
  const RunResult result = Run();
  ASSERT_TRUE(result.correct);
  EXPECT_EQ(evaluator_.screened["graphed"], 1);
  EXPECT_EQ(evaluator_.screened.count("launched"), 0U);
}

TEST_F(PipelineTest, AcceptsOnlyWhatBeatsTheNoiseAndReverts) {
  code_->script["stage1.seeds"] = {"seed", "seed2"};
  code_->script["stage1.algorithm"] = {"within_noise", "clearly_faster"};
  evaluator_.outcomes = {{"seed", {harness::EvalStatus::kOk, 10.0, 1.0}},
                         {"seed2", {harness::EvalStatus::kOk, 12.0}},
                         {"within_noise", {harness::EvalStatus::kOk, 9.5}},
                         {"clearly_faster", {harness::EvalStatus::kOk, 5.0}}};
  const RunResult result = Run();
  const StageRecord& algorithm = result.stages[1];
  ASSERT_EQ(algorithm.decisions.size(), 2U);
  EXPECT_FALSE(algorithm.decisions[0].accepted) << algorithm.decisions[0].reason;
  EXPECT_TRUE(algorithm.decisions[1].accepted) << algorithm.decisions[1].reason;
  EXPECT_EQ(result.final->source, "ModelNew clearly_faster");
  EXPECT_EQ(algorithm.stopped_because, "round budget used");
}

TEST_F(PipelineTest, ASeedThatCannotBeWrittenIsADecisionSayingWhy) {
  code_->script["stage1.seeds"] = {"UNWRITTEN", "seed"};
  evaluator_.outcomes = {{"seed", {harness::EvalStatus::kOk, 3.0}}};
  const RunResult result = Run();
  EXPECT_TRUE(result.correct);
  const auto& decisions = result.stages[0].decisions;
  ASSERT_FALSE(decisions.empty());
  EXPECT_EQ(decisions[0].candidate_id, "unwritten-1");
  EXPECT_FALSE(decisions[0].accepted);
  EXPECT_EQ(decisions[0].reason, "not written: dynamic batch: the design does not hold at batch 1152");
  EXPECT_EQ(result.final->source, "ModelNew seed");
}

TEST_F(PipelineTest, EveryDecisionIsKeptInTheStageTheStoreAndTheProgress) {
  code_->script["stage1.seeds"] = {"seed"};
  code_->script["stage1.algorithm"] = {"broken", "seed"};  // wrong after its repairs, then a duplicate
  evaluator_.outcomes = {{"seed", {harness::EvalStatus::kOk, 3.0}},
                         {"broken", {harness::EvalStatus::kCompileError}},
                         {"fixed", {harness::EvalStatus::kRuntimeError}}};
  options_.seeds = 1;
  options_.refine_seeds = false;
  auto store = store::Store::Open(":memory:");
  store::RunRow run;
  run.id = "run";
  store->PutRun(run);
  std::vector<ProgressEvent> events;
  struct Sink : ProgressSink {
    explicit Sink(std::vector<ProgressEvent>* out) : events(out) {}
    void OnProgress(const ProgressEvent& event) override { events->push_back(event); }
    std::vector<ProgressEvent>* events;
  } sink(&events);
  options_.progress = &sink;
  const RunResult result = Pipeline(backend_, evaluator_, store.get(), options_).Run();
  ASSERT_TRUE(result.correct);
  const std::vector<DecisionRecord>& decisions = result.stages[1].decisions;
  ASSERT_EQ(decisions.size(), 2U);
  EXPECT_EQ(decisions[0].reason.rfind("not correct after repairs: ", 0), 0U) << decisions[0].reason;
  EXPECT_EQ(decisions[1].reason.rfind("duplicate: ", 0), 0U) << decisions[1].reason;
  std::vector<std::string> stored;
  for (const store::DecisionRow& row : store->DecisionsForRun("run")) {
    if (row.stage == "stage1.algorithm") {
      stored.push_back(row.reason.substr(0, row.reason.find(':')));
    }
  }
  EXPECT_EQ(stored, (std::vector<std::string>{"not correct after repairs", "duplicate"}));
  std::vector<std::string> shown;
  for (const ProgressEvent& event : events) {
    if (event.kind == ProgressKind::kDecided && event.stage == "stage1.algorithm") {
      shown.push_back(event.detail.substr(0, event.detail.find(':')));
    }
  }
  EXPECT_EQ(shown, std::vector<std::string>{"not correct after repairs"}) << "a duplicate is no news";
}

TEST_F(PipelineTest, FailedCandidatesGoToDebugAndTheRepairIsMeasured) {
  code_->script["stage1.seeds"] = {"broken"};
  evaluator_.outcomes = {{"broken", {harness::EvalStatus::kCompileError}},
                         {"fixed", {harness::EvalStatus::kOk, 3.0}}};
  options_.seeds = 1;
  const RunResult result = Run();
  ASSERT_EQ(debug_->repaired.size(), 1U);
  EXPECT_EQ(debug_->repaired[0], "ModelNew broken [compile_error]");
  const auto& seeds = result.stages[0].candidates;
  ASSERT_EQ(seeds.size(), 2U);
  EXPECT_EQ(seeds[1].origin, "debug");
  EXPECT_EQ(seeds[1].parent_id, seeds[0].id);
  EXPECT_TRUE(result.correct);
}

TEST_F(PipelineTest, DesignRecordsTravelWithCandidatesToTheAgentsAndTheStore) {
  code_->designed = {"seed"};
  code_->script["stage1.seeds"] = {"seed"};
  code_->spaces["stage1.algorithm"] = {"tile"};
  code_->script["stage1.algorithm"] = {"llm_edit"};  // beside the space, no design record
  code_->beside_space = true;
  options_.seeds = 1;
  options_.refine_seeds = false;
  evaluator_.outcomes = {{"seed", {harness::EvalStatus::kOk, 10.0}},
                         {"tile", {harness::EvalStatus::kOk, 5.0}},
                         {"llm_edit", {harness::EvalStatus::kOk, 2.0}}};
  auto store = store::Store::Open(":memory:");
  store::RunRow run;
  run.id = "run";
  store->PutRun(run);
  const RunResult result = Pipeline(backend_, evaluator_, store.get(), options_).Run();
  ASSERT_TRUE(result.correct);
  // Each candidate keeps the record its proposal carried.
  const auto& seeds = result.stages[0].candidates;
  ASSERT_EQ(seeds.size(), 1U);
  EXPECT_EQ(seeds[0].design, DesignFor("seed"));
  const auto& algorithm = result.stages[1].candidates;
  ASSERT_EQ(algorithm.size(), 2U);
  EXPECT_EQ(algorithm[0].design, DesignFor("tile"));
  EXPECT_FALSE(algorithm[1].design) << "LLM-written source has no design record";
  EXPECT_EQ(result.final->source, "ModelNew llm_edit");
  EXPECT_FALSE(result.final->design);
  // The incumbent's record reaches the agents: the seed's, then the accepted design's, then none after the
  // LLM edit was accepted.
  std::map<std::string, std::vector<std::optional<agents::Design>>> seen;
  for (const auto& context : code_->contexts) {
    seen[context.stage].push_back(context.incumbent_design);
  }
  ASSERT_FALSE(seen["stage1.algorithm"].empty());
  EXPECT_EQ(seen["stage1.algorithm"].front(), DesignFor("tile"));
  ASSERT_FALSE(seen["stage2.mapping"].empty());
  EXPECT_FALSE(seen["stage2.mapping"].front());
  // The store has the record of every designed candidate, screened or evaluated, and null for the LLM's.
  std::map<std::string, std::optional<std::string>> stored;
  for (const auto& row : store->CandidatesForRun("run")) {
    stored[row.source] = row.design_json;
  }
  ASSERT_EQ(stored.size(), 3U);
  EXPECT_EQ(stored["ModelNew seed"], DesignFor("seed").record.dump());
  EXPECT_EQ(stored["ModelNew tile"], DesignFor("tile").record.dump());
  EXPECT_EQ(stored["ModelNew llm_edit"], std::nullopt);
}

TEST_F(PipelineTest, DebugGetsTheFailingCandidatesDesignAndTheRepairKeepsItsOwn) {
  code_->designed = {"broken"};
  code_->script["stage1.seeds"] = {"broken"};
  debug_->repairs_designed = true;
  evaluator_.outcomes = {{"broken", {harness::EvalStatus::kCompileError}},
                         {"fixed", {harness::EvalStatus::kOk, 3.0}}};
  options_.seeds = 1;
  options_.refine_seeds = false;
  const RunResult result = Run();
  ASSERT_EQ(debug_->designs.size(), 1U);
  EXPECT_EQ(debug_->designs[0], DesignFor("broken"));
  ASSERT_TRUE(result.correct);
  EXPECT_EQ(result.final->design, DesignFor("fixed"));
  // A repair without a record (an LLM's) leaves none, though its proposal had one.
  debug_->repairs_designed = false;
  code_->script["stage1.seeds"] = {"broken"};
  std::filesystem::remove_all(options_.run_dir);
  const RunResult llm_repaired = Run();
  ASSERT_TRUE(llm_repaired.correct);
  EXPECT_FALSE(llm_repaired.final->design);
}

TEST_F(PipelineTest, StopsCleanlyWhenTheBudgetIsSpent) {
  code_->script["stage1.seeds"] = {"seed", "STOP"};
  const RunResult result = Run();
  EXPECT_EQ(result.stopped_because, "budget_exhausted");
  EXPECT_TRUE(result.correct) << "the seed found before the budget ran out is kept";
  for (size_t i = 1; i < result.stages.size(); ++i) {
    EXPECT_EQ(result.stages[i].stopped_because, "budget_exhausted");
    EXPECT_TRUE(result.stages[i].candidates.empty());
  }
}

// A clock that moves 10 s with every full evaluation.
std::function<double()> TenSecondsAnEvaluation(const FakeEvaluator& evaluator) {
  return [&evaluator] {
    int count = 0;
    for (const auto& [name, n] : evaluator.evaluations) {
      count += n;
    }
    return 10.0 * count;
  };
}

TEST_F(PipelineTest, TheTimeBudgetEndsTheRunWithTheIncumbent) {
  code_->script["stage1.seeds"] = {"first", "refined", "second"};  // seed 0, its refinement, seed 1
  code_->script["*"] = {"later"};
  options_.time_budget_s = 15;
  options_.clock = TenSecondsAnEvaluation(evaluator_);
  const RunResult result = Run();
  ASSERT_TRUE(result.correct);
  EXPECT_EQ(result.stopped_because, "time_budget_used");
  EXPECT_NE(result.reason.find("15 s"), std::string::npos) << result.reason;
  // first (10 s) and its refinement (20 s) ran; at 20 s the budget is spent and nothing else starts.
  EXPECT_EQ(evaluator_.evaluations["first"], 1);
  EXPECT_EQ(evaluator_.evaluations["refined"], 1) << "the refinement started before the budget was spent";
  EXPECT_EQ(evaluator_.evaluations["second"], 0);
  EXPECT_EQ(evaluator_.evaluations["later"], 0);
  for (size_t i = 1; i < result.stages.size(); ++i) {
    EXPECT_EQ(result.stages[i].stopped_because, "time_budget_used");
    EXPECT_TRUE(result.stages[i].candidates.empty());
  }
}

TEST_F(PipelineTest, TheTimeBudgetNeverEndsARunWithoutACorrectKernel) {
  code_->script["stage1.seeds"] = {"broken", "good"};
  evaluator_.outcomes = {{"broken", {harness::EvalStatus::kRuntimeError}},
                         {"fixed", {harness::EvalStatus::kRuntimeError}},
                         {"good", {harness::EvalStatus::kOk, 2.0}}};
  options_.refine_seeds = false;
  options_.time_budget_s = 1;
  options_.clock = TenSecondsAnEvaluation(evaluator_);
  const RunResult result = Run();
  ASSERT_TRUE(result.correct) << "spent budget, but no correct kernel yet: the search goes on";
  EXPECT_EQ(result.final->source, "ModelNew good");
  EXPECT_EQ(result.stopped_because, "time_budget_used");
  EXPECT_EQ(evaluator_.profiles, 0) << "no refinement round started after the budget was spent";
}

TEST_F(PipelineTest, StageStopsWhenRoundsStopPayingOrAtTheRoofline) {
  code_->script["stage1.seeds"] = {"seed"};
  code_->script["*"] = {"worse1", "worse2", "worse3", "worse4", "worse5", "worse6", "worse7", "worse8"};
  evaluator_.outcomes = {{"seed", {harness::EvalStatus::kOk, 1.0}}};
  for (int i = 1; i <= 8; ++i) {
    evaluator_.outcomes["worse" + std::to_string(i)] = {harness::EvalStatus::kOk, 2.0};
  }
  options_.seeds = 1;
  const RunResult result = Run();
  EXPECT_EQ(result.stages[1].stopped_because, "rounds stopped paying");
  EXPECT_EQ(result.stages[1].rounds_run, 2);
  profile_->near_roofline = true;
  code_->script["stage1.seeds"] = {"seed"};
  const RunResult at_roof = Run();
  EXPECT_NE(at_roof.stages[1].stopped_because.find("near the roofline"), std::string::npos);
  EXPECT_EQ(at_roof.stages[1].candidates.size(), 0U);
}

TEST_F(PipelineTest, OnlyFinalizedDecisionsCrossStagesAndDuplicatesAreNotReevaluated) {
  code_->script["stage1.seeds"] = {"seed", "seed"};
  code_->script["stage1.algorithm"] = {"loser", "winner"};
  evaluator_.outcomes = {{"seed", {harness::EvalStatus::kOk, 10.0}},
                         {"loser", {harness::EvalStatus::kOk, 20.0}},
                         {"winner", {harness::EvalStatus::kOk, 5.0}}};
  Run();
  EXPECT_EQ(evaluator_.evaluations["seed"], 1) << "a duplicate proposal is not evaluated again";
  const agents::StageContext* mapping = nullptr;
  for (const auto& context : code_->contexts) {
    if (context.stage == "stage2.mapping") {
      mapping = &context;
      break;
    }
  }
  ASSERT_NE(mapping, nullptr);
  EXPECT_TRUE(mapping->history.empty()) << "exploration of earlier stages is dropped";
  EXPECT_NE(mapping->accepted_decisions.find("move winner"), std::string::npos);
  EXPECT_EQ(mapping->accepted_decisions.find("move loser"), std::string::npos);
  EXPECT_EQ(mapping->incumbent_source, "ModelNew winner");
}

TEST_F(PipelineTest, EachCorrectSeedIsBrieflyRefined) {
  code_->script["stage1.seeds"] = {"seed", "refined_seed"};
  evaluator_.outcomes = {{"seed", {harness::EvalStatus::kOk, 4.0}},
                         {"refined_seed", {harness::EvalStatus::kOk, 2.0}}};
  options_.seeds = 1;
  const RunResult result = Run();
  ASSERT_GE(code_->contexts.size(), 2U);
  EXPECT_FALSE(code_->contexts[0].refining_seed);
  EXPECT_TRUE(code_->contexts[1].refining_seed);
  EXPECT_EQ(code_->contexts[1].incumbent_source, "ModelNew seed");
  EXPECT_EQ(result.stages[0].incumbent_ms, 2.0);
  EXPECT_EQ(result.final->source.substr(0, 22), "ModelNew refined_seed") << "the faster refinement is kept";
}

TEST_F(PipelineTest, DesignSpacesAreScreenedAndOnlyTheFastestIsFullyEvaluated) {
  code_->script["stage1.seeds"] = {"seed"};
  options_.seeds = 1;
  options_.refine_seeds = false;
  code_->spaces["stage2.tiling"] = {"tile_a", "tile_b", "tile_broken", "tile_c"};
  evaluator_.outcomes = {{"seed", {harness::EvalStatus::kOk, 10.0}},
                         {"tile_a", {harness::EvalStatus::kOk, 8.0}},
                         {"tile_b", {harness::EvalStatus::kOk, 4.0}},
                         {"tile_broken", {harness::EvalStatus::kMismatch}},
                         {"tile_c", {harness::EvalStatus::kOk, 6.0}}};
  const RunResult result = Run();
  EXPECT_EQ(evaluator_.screened.size(), 4U);
  EXPECT_EQ(evaluator_.evaluations["tile_b"], 1);  // the fastest screened design is fully evaluated
  EXPECT_EQ(evaluator_.evaluations.count("tile_a"), 0U);
  EXPECT_EQ(evaluator_.evaluations.count("tile_broken"), 0U);
  const StageRecord& tiling = result.stages[3];
  ASSERT_FALSE(tiling.decisions.empty());
  EXPECT_TRUE(tiling.decisions[0].accepted) << tiling.decisions[0].reason;
  EXPECT_EQ(result.final->source, "ModelNew tile_b");
  // The second round screens nothing new: the space is exhausted.
  EXPECT_EQ(tiling.stopped_because, "design space exhausted");
  EXPECT_EQ(result.screened.size(), 4U);
}

TEST_F(PipelineTest, BesideAScreenedSpaceProposalsCompeteAndCarryTheirOrigin) {
  code_->script["stage1.seeds"] = {"seed"};
  options_.seeds = 1;
  options_.rounds = 1;
  options_.refine_seeds = false;
  code_->beside_space = true;
  code_->spaces["stage2.tiling"] = {"tile_a"};
  code_->script["stage2.tiling"] = {"llm_edit"};
  evaluator_.outcomes = {{"seed", {harness::EvalStatus::kOk, 10.0}},
                         {"tile_a", {harness::EvalStatus::kOk, 8.0}},
                         {"llm_edit", {harness::EvalStatus::kOk, 5.0}}};
  const RunResult result = Run();
  const StageRecord& tiling = result.stages[3];
  ASSERT_EQ(tiling.decisions.size(), 2U);
  EXPECT_TRUE(tiling.decisions[0].accepted && tiling.decisions[1].accepted);
  EXPECT_EQ(tiling.decisions[0].author, "expert");
  EXPECT_EQ(tiling.decisions[1].author, "llm");
  EXPECT_EQ(result.final->source, "ModelNew llm_edit");
  for (const CandidateFile& file : evaluator_.files) {
    const bool expert_file = ReadFile(file.path).find("tile_a") != std::string::npos;
    EXPECT_EQ(file.untrusted, !expert_file) << file.path;
  }
}

TEST_F(PipelineTest, ScreenedSeedsFullyEvaluateOnlyTheFastestThatPasses) {
  code_->script["stage1.seeds"] = {"slow", "broken", "fast"};
  options_.seeds = 3;
  options_.screen_seeds = true;
  options_.refine_seeds = false;
  options_.tune = false;
  evaluator_.outcomes = {{"slow", {harness::EvalStatus::kOk, 5.0}},
                         {"broken", {harness::EvalStatus::kMismatch}},
                         {"fast", {harness::EvalStatus::kOk, 2.0}}};
  const RunResult result = Run();
  EXPECT_EQ(evaluator_.screened.size(), 3U);
  EXPECT_EQ(evaluator_.evaluations.size(), 1U);
  EXPECT_EQ(evaluator_.evaluations["fast"], 1);
  ASSERT_TRUE(result.correct);
  EXPECT_EQ(result.final->source, "ModelNew fast");
  EXPECT_TRUE(debug_->repaired.empty());
}

TEST_F(PipelineTest, ASingleSeedIsNotScreenedOnlyEvaluated) {
  code_->script["stage1.seeds"] = {"only"};
  options_.seeds = 1;
  options_.screen_seeds = true;
  options_.refine_seeds = false;
  options_.tune = false;
  evaluator_.outcomes = {{"only", {harness::EvalStatus::kOk, 2.0}}};
  const RunResult result = Run();
  EXPECT_TRUE(evaluator_.screened.empty());
  EXPECT_EQ(evaluator_.evaluations["only"], 1);
  ASSERT_TRUE(result.correct);
  EXPECT_EQ(result.final->source, "ModelNew only");
}

TEST_F(PipelineTest, WhenNoSeedPassesTheScreenEachIsRepaired) {
  code_->script["stage1.seeds"] = {"broken", "also_broken"};
  options_.screen_seeds = true;
  options_.tune = false;
  evaluator_.outcomes = {{"broken", {harness::EvalStatus::kCompileError}},
                         {"also_broken", {harness::EvalStatus::kMismatch}},
                         {"fixed", {harness::EvalStatus::kOk, 3.0}}};
  const RunResult result = Run();
  ASSERT_EQ(debug_->repaired.size(), 1U);  // the first seed's repair works, the second is never needed
  EXPECT_EQ(debug_->repaired[0], "ModelNew broken [compile_error]");
  ASSERT_TRUE(result.correct);
  EXPECT_EQ(result.final->source, "ModelNew fixed");
}

TEST_F(PipelineTest, WithoutTuningOnlyTheSeedsRun) {
  code_->script["stage1.seeds"] = {"seed", "other"};
  code_->spaces["stage2.tiling"] = {"tile"};
  options_.tune = false;
  options_.refine_seeds = false;
  options_.tuning_note = "no GPU";
  const RunResult result = Run();
  ASSERT_TRUE(result.correct);
  for (size_t i = 1; i < result.stages.size(); ++i) {
    EXPECT_EQ(result.stages[i].stopped_because, "no GPU");
    EXPECT_TRUE(result.stages[i].candidates.empty());
  }
  EXPECT_TRUE(evaluator_.screened.empty());
  EXPECT_EQ(evaluator_.profiles, 0);
  EXPECT_EQ(code_->contexts.size(), 2U);  // two seeds, no refinements
}

class RecordingSink : public ProgressSink {
 public:
  void OnProgress(const ProgressEvent& event) override { events.push_back(event); }
  std::vector<std::string> Kinds(const std::string& stage) const {
    std::vector<std::string> kinds;
    for (const ProgressEvent& event : events) {
      if (event.stage == stage) {
        kinds.push_back(ProgressKindName(event.kind));
      }
    }
    return kinds;
  }
  std::vector<ProgressEvent> events;
};

TEST_F(PipelineTest, ProgressEventsFollowTheSearchWithTheBestSoFarAndTheBudget) {
  code_->script["stage1.seeds"] = {"slow", "fast"};
  code_->spaces["stage2.tiling"] = {"tile_a", "tile_b"};
  evaluator_.outcomes = {{"slow", {harness::EvalStatus::kOk, 4.0}},
                         {"fast", {harness::EvalStatus::kOk, 2.0}},
                         {"tile_a", {harness::EvalStatus::kOk, 1.5}},
                         {"tile_b", {harness::EvalStatus::kOk, 1.0}}};
  options_.screen_seeds = true;
  options_.refine_seeds = false;
  options_.profile = false;
  options_.time_budget_s = 1000;
  options_.clock = TenSecondsAnEvaluation(evaluator_);
  RecordingSink sink;
  options_.progress = &sink;
  const RunResult result = Run();
  ASSERT_TRUE(result.correct);
  const std::vector<std::string> seeds = {"stage",    "plan",      "screen",  "screened",
                                          "evaluate", "evaluated", "decided", "stage-done"};
  EXPECT_EQ(sink.Kinds("stage1.seeds"), seeds);
  const std::vector<std::string> tiling = {
      "stage",     "plan",    "screen", "screened",  "evaluate",
      "evaluated", "decided", "plan",   "stage-done"};  // round 2: the space is exhausted
  EXPECT_EQ(sink.Kinds("stage2.tiling"), tiling);
  const auto screened = std::find_if(sink.events.begin(), sink.events.end(), [](const ProgressEvent& event) {
    return event.kind == ProgressKind::kScreened && event.stage == "stage2.tiling";
  });
  ASSERT_NE(screened, sink.events.end());
  EXPECT_EQ(screened->done, 2);
  EXPECT_EQ(screened->total, 2);
  EXPECT_EQ(screened->median_ms, 1.0);
  ASSERT_TRUE(screened->best.has_value()) << "the seed is the best so far";
  EXPECT_EQ(screened->best->median_ms, 2.0);
  EXPECT_EQ(screened->search_elapsed_s, 10.0) << "one evaluation (the seed) at ten seconds each";
  EXPECT_EQ(screened->budget_s, 1000.0);
  const ProgressEvent& last = sink.events.back();
  EXPECT_EQ(last.kind, ProgressKind::kStageDone);
  EXPECT_EQ(last.stage, "stage2.memory");
  ASSERT_TRUE(last.best.has_value());
  EXPECT_EQ(last.best->median_ms, 1.0);
  EXPECT_EQ(sink.events.front().kind, ProgressKind::kStage);
}

TEST(AcceptTest, NeedsCorrectnessAndTimings) {
  CandidateRecord wrong;
  wrong.eval.status = harness::EvalStatus::kMismatch;
  std::string reason;
  EXPECT_FALSE(Accept(wrong, nullptr, &reason));
  CandidateRecord untimed;
  untimed.eval.status = harness::EvalStatus::kOk;
  untimed.eval.correct = true;
  EXPECT_TRUE(Accept(untimed, nullptr, &reason));
  EXPECT_FALSE(Accept(untimed, &untimed, &reason));
  EXPECT_NE(reason.find("not measured"), std::string::npos);
}

// A correct candidate timed at its own size (median `own` ms) and, dynamic, at each {size, median} of
// `sizes`; by_batch as the worker writes it (stats) or, `beside`, with the baselines beside it ({"candidate":
// stats}).
CandidateRecord Timed(double own, const std::vector<std::pair<int64_t, double>>& sizes, bool beside = false) {
  CandidateRecord record;
  record.eval.status = harness::EvalStatus::kOk;
  record.eval.correct = true;
  const auto stats = [](double median) {
    harness::Stats time;
    time.mean = time.median = time.p20 = time.p80 = median;
    return time;
  };
  record.eval.time_ms.candidate = stats(own);
  if (!sizes.empty()) {
    record.eval.by_batch = Json::array();
    for (const auto& [size, median] : sizes) {
      const Json time = stats(median);
      record.eval.by_batch.push_back(
          {{"batch", size}, {"time_ms", beside ? Json{{"candidate", time}} : time}});
    }
  }
  return record;
}

TEST(AcceptTest, ADynamicCandidateIsJudgedAcrossEverySizeBothWereTimedAt) {
  std::string reason;
  // 10% slower at the task's own size, 3x faster at batch 1 and 2x at 3: the geometric mean wins
  const CandidateRecord incumbent = Timed(1.0, {{1, 0.3}, {3, 0.4}});
  const CandidateRecord balanced = Timed(1.1, {{1, 0.1}, {3, 0.2}}, true);
  EXPECT_TRUE(Accept(balanced, &incumbent, &reason)) << reason;
  EXPECT_NE(reason.find("faster across sizes"), std::string::npos) << reason;
  EXPECT_NE(reason.find("the task's own size and 2 more (1, 3)"), std::string::npos) << reason;
  // faster at the task's own size alone, slower elsewhere: refused
  const CandidateRecord top_only = Timed(0.8, {{1, 0.6}, {3, 0.5}});
  EXPECT_FALSE(Accept(top_only, &incumbent, &reason));
  EXPECT_NE(reason.find("not faster across sizes"), std::string::npos) << reason;
  // no size in common beyond the task's own: the median at the task's own size decides, as for fixed shapes
  EXPECT_TRUE(Accept(Timed(0.5, {{17, 9.0}}), &incumbent, &reason));
  EXPECT_NE(reason.find("faster: median"), std::string::npos) << reason;
  EXPECT_TRUE(Accept(Timed(0.5, {}), &incumbent, &reason));
}

}  // namespace
}  // namespace egg::pipeline
