#include "report/run_report.h"

#include <gtest/gtest.h>

namespace egg::report {
namespace {

pipeline::CandidateRecord Candidate(const std::string& id, const std::string& author, bool correct,
                                    const std::string& origin = "code", const std::string& parent = "") {
  pipeline::CandidateRecord candidate;
  candidate.id = id;
  candidate.author = author;
  candidate.origin = origin;
  candidate.parent_id = parent;
  candidate.eval.correct = correct;
  candidate.eval.status = correct ? harness::EvalStatus::kOk : harness::EvalStatus::kCompileError;
  return candidate;
}

pipeline::DecisionRecord Decision(const std::string& id, const std::string& author, bool accepted) {
  pipeline::DecisionRecord decision;
  decision.stage = "stage1.algorithm";
  decision.candidate_id = id;
  decision.author = author;
  decision.accepted = accepted;
  return decision;
}

TEST(RunReportTest, ProvenanceCountsEachSourcesProposalsRepairsAndAcceptances) {
  pipeline::RunResult result;
  pipeline::StageRecord stage;
  stage.candidates = {Candidate("e1", "expert", true), Candidate("l1", "llm", false),
                      Candidate("l1r", "llm", true, "debug", "l1"), Candidate("l2", "llm", true)};
  stage.decisions = {Decision("e1", "expert", true), Decision("l1r", "llm", true),
                     Decision("l2", "llm", false)};
  result.stages.push_back(stage);
  result.screened = Json::array({Json{{"id", "e1"}, {"author", "expert"}, {"status", "ok"}},
                                 Json{{"id", "e2"}, {"author", "expert"}, {"status", "mismatch"}}});
  const Json llm = {{"calls", 5}, {"input_tokens", 100}, {"output_tokens", 20}, {"cost_usd", 0.5}};
  const Json provenance = ProvenanceJson(result, llm);
  EXPECT_EQ(provenance["expert"], (Json{{"proposed", 2}, {"correct", 1}, {"accepted", 1}}));
  EXPECT_EQ(provenance["llm"]["proposed"], 2) << "a repair counts for the proposal it repaired";
  EXPECT_EQ(provenance["llm"]["correct"], 2);
  EXPECT_EQ(provenance["llm"]["accepted"], 1);
  EXPECT_EQ(provenance["llm"]["calls"], 5);
  EXPECT_EQ(provenance["llm"]["cost_usd"], 0.5);
  ASSERT_EQ(provenance["accepted"].size(), 2U);
  EXPECT_EQ(provenance["accepted"][1]["author"], "llm");
  EXPECT_FALSE(ProvenanceJson(result, Json::object())["llm"].contains("calls"));
}

}  // namespace
}  // namespace egg::report

namespace egg::report {
namespace {

TEST(RunReportTest, TrajectorySaysTheBatchesADynamicResultWasCheckedAt) {
  Json report = {{"task", "t.py"}, {"final", {{"tol", 1e-4}, {"batch_sizes", {1, 3, 17, 32}}}}};
  const std::string text = TrajectoryMarkdown(report);
  EXPECT_NE(text.find("dynamic batch: also correct at batch 1, 3, 17, 32, with the kernels (no fallback)"),
            std::string::npos)
      << text;
  report["final"].erase("batch_sizes");
  EXPECT_EQ(TrajectoryMarkdown(report).find("dynamic batch"), std::string::npos);
}

TEST(RunReportTest, TrajectoryGivesADynamicResultsSpeedupsAtEachTimedBatch) {
  const Json at_batch = {{"batch", 3},
                         {"time_ms", {{"candidate", {{"mean", 0.05}}}}},
                         {"speedups", {{"strict", {{"eager", 1.5}, {"compile", 0.8}}}}}};
  const Json report = {{"task", "t.py"},
                       {"final",
                        {{"tol", 1e-4},
                         {"baseline", "strict"},
                         {"speedups", {{"strict", {{"eager", 2.0}, {"compile", 1.2}}}}},
                         {"by_batch", Json::array({at_batch, {{"batch", 17}}})}}}};
  const std::string text = TrajectoryMarkdown(report);
  EXPECT_NE(
      text.find("dynamic batch, speedups at each batch (vs PyTorch strict; torch.compile(dynamic=True)):\n"
                "- batch 3: candidate 0.0500 ms (mean), 1.50x eager, 0.80x torch.compile\n"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("batch 17"), std::string::npos) << "an untimed batch has no line";
}

}  // namespace
}  // namespace egg::report
