// The stage machine of `egg optimize` (docs/pipeline.md): seeds, then algorithmic refinement, then the three
// hardware-tuning stages; in each, Profile -> Code -> harness -> Debug, with an acceptance rule that keeps
// the incumbent unless a correct candidate beats it by more than the measured noise. Only the finalized
// StageOutcome crosses a stage boundary. Knows nothing of LLMs or Triton syntax. Writes every candidate and
// decision to the store as it happens.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agents/agents.h"
#include "harness/eval_types.h"
#include "pipeline/candidate_evaluator.h"
#include "pipeline/progress.h"
#include "pipeline/proposals.h"
#include "pipeline/stages.h"
#include "store/store.h"

namespace egg::pipeline {

inline constexpr int kHistoryLength = 6;
inline constexpr double kMinNoiseFraction = 0.01;
inline constexpr int kUnpaidRoundsToStop = 2;

struct PipelineOptions {
  std::string run_id;
  std::string run_dir;  // candidate files are written here
  std::string task_source;
  double tol = 1e-2;
  std::string precision = "fp32";  // the task's dtype (fp32, bf16, fp16): the agents are told
  int seeds = 3;
  int rounds = 2;
  int candidates_per_round = 2;
  int debug_attempts = 2;
  bool refine_seeds = true;  // stage1.seeds: one brief refinement of every correct seed
  bool screen_seeds = false; // stage1.seeds: screen all seeds together, fully evaluate the fastest that passes
  bool tune = true;          // run the stages after the seeds (false: say why in tuning_note)
  bool profile = true;       // profile the incumbent (ncu) before every refinement round
  // Code requests of one round (or of the seeds) in flight at once; 1: asked one at a time, each seeing the
  // candidates before it. Above 1 the backend's agents must be thread-safe (the LLM backend's are).
  int agent_concurrency = 1;
  // Wall-clock seconds for the run (0: none). Once they are spent and a correct kernel is in hand, no new
  // candidate starts: the run ends with the incumbent, stopped_because "time_budget_used".
  double time_budget_s = 0;
  std::function<double()> clock;  // seconds, monotonic; the steady clock when empty (tests pass a fake)
  // Called as each stage starts, with the incumbent's speedup over eager so far (progress displays).
  std::function<void(const std::string& stage, std::optional<double> speedup_vs_eager)> on_stage;
  ProgressSink* progress = nullptr;  // not owned; every step of the search is reported to it (null: none)
  std::string tuning_note;
};

struct CandidateRecord {
  std::string id;
  std::string stage;
  std::string origin;  // code | debug
  std::string author = "llm";  // who proposed it (expert | llm); a repair keeps its proposal's author
  bool untrusted = true;       // an LLM wrote its source (CandidateFile)
  std::string parent_id;
  std::string source;
  std::optional<agents::Design>
      design;  // what the source was generated from (the agent's); none for LLM source
  std::string description;
  std::string move;
  std::string path;
  harness::EvalResult eval;
  std::optional<double> MedianMs() const;
};

struct DecisionRecord {
  std::string stage;
  int round = 0;
  std::string candidate_id;
  std::string move;
  bool accepted = false;
  std::string reason;
  std::optional<double> incumbent_ms;
  std::optional<double> candidate_ms;
  std::string author;  // the decided candidate's: expert | llm
};

struct StageRecord {
  StageSpec spec;
  int rounds_run = 0;
  std::string stopped_because;
  std::string incumbent_id;
  std::optional<double> incumbent_ms;
  std::optional<double> incumbent_speedup_vs_eager;
  std::vector<DecisionRecord> decisions;
  std::vector<CandidateRecord> candidates;
};

struct RunResult {
  bool correct = false;
  // completed | budget_exhausted | llm_unavailable | llm_config_error | time_budget_used
  std::string stopped_because = "completed";
  std::string reason;
  std::optional<CandidateRecord> final;
  std::vector<StageRecord> stages;
  Json screened = Json::array();  // every screened design: stage, round, id, move, status, median_ms
};

// Acceptance: correct and median faster than the incumbent's by more than the noise; a dynamic candidate
// timed at several sizes (by_batch) by the geometric mean of its time ratios at every size both were timed
// at. Sets *reason.
bool Accept(const CandidateRecord& candidate, const CandidateRecord* incumbent, std::string* reason);

class Pipeline {
 public:
  Pipeline(agents::Backend& backend, CandidateEvaluator& evaluator, store::Store* store,
           PipelineOptions options)
      : backend_(backend), evaluator_(evaluator), store_(store), options_(std::move(options)) {}
  RunResult Run();

 private:
  agents::StageContext Context(const StageSpec& spec, const StageRecord& record, int round) const;
  // The Code agent's `count` candidates for this round, asked for options_.agent_concurrency at a time.
  Proposals Batch(const StageRecord& record, int round, const agents::ProfileReport* report, int count) const;
  std::optional<CandidateRecord> Attempt(const agents::StageContext& context,
                                         const agents::CodeProposal& proposal, StageRecord* record);
  CandidateRecord Measure(const std::string& stage, const std::string& origin, const std::string& parent_id,
                          const agents::CodeProposal& proposal);
  void RunSeeds(StageRecord* record);
  // One brief refinement of a correct seed; it competes for the incumbent like any seed.
  void RefineSeed(StageRecord* record, const CandidateRecord& seed, int index);
  void RunRefinement(StageRecord* record);
  bool RunRound(StageRecord* record, int round);
  // The Code agent's candidates_per_round proposals, each attempted (Debug repairs) and decided on.
  bool ProposalRound(StageRecord* record, int round, const agents::ProfileReport* report);
  // Screens the proposals not tried yet (kept in *proposals, in order); returns the indices of those that passed,
  // fastest first (untimed: in proposal order).
  std::vector<size_t> Screen(StageRecord* record, int round, std::vector<agents::CodeProposal>* proposals);
  void RunScreenedSeeds(StageRecord* record);
  // A round over a design space: screen every proposal, fully evaluate the fastest, decide on it.
  bool ScreenRound(StageRecord* record, int round, const agents::StageContext& context,
                   std::vector<agents::CodeProposal> proposals);
  void Decide(StageRecord* record, int round, const CandidateRecord& candidate, bool keep_if_first);
  // Keeps a decision: in the stage's record, in the store, and as a progress event unless `quiet` (a
  // duplicate proposal: bookkeeping, not news).
  void Record(StageRecord* record, DecisionRecord decision, bool quiet = false);
  // True once an agent stopped the run, or the time budget is spent with a correct kernel in hand.
  bool Stopped();
  double Now() const;
  void NoteStop(agents::StopReason stop, const std::string& failure);
  void Finalize(StageRecord* record);
  // A seed the Code agent could not write (the expert compiler's problem, an LLM reply with no code; not a
  // stop): a decision of its own, in the trajectory and the store, so that the empty slot says why.
  void NoteUnwritten(StageRecord* record, int index,
                     const agents::AgentResult<agents::CodeProposal>& proposal);
  // True (and a rejected decision recorded) when this run already evaluated the same source.
  bool IsDuplicate(StageRecord* record, int round, const agents::CodeProposal& proposal);
  // Reports `event` to options_.progress with the incumbent, the search's elapsed time and its budget added.
  void Emit(ProgressEvent event) const;
  void EmitScreened(const std::string& stage, int round,
                    const std::vector<harness::ScreenResult>& screened) const;

  agents::Backend& backend_;
  CandidateEvaluator& evaluator_;
  store::Store* store_;
  PipelineOptions options_;
  std::optional<CandidateRecord> incumbent_;
  std::vector<DecisionRecord> accepted_;
  std::set<std::string> tried_ids_;
  Json screened_ = Json::array();
  agents::StopReason stop_ = agents::StopReason::kNone;
  std::string stop_failure_;
  int sm_count_ = 0;
  double started_s_ = 0;
};

}  // namespace egg::pipeline
