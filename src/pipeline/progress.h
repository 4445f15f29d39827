// Where a run of `egg optimize` is, as typed events: the pipeline and the task runner around it report to a
// ProgressSink, which renders them (cli/progress_renderer.h) or records them (tests). A sink is called from
// the thread that runs the search, in the order things happen; it must not throw.
#pragma once

#include <optional>
#include <string>

namespace egg::pipeline {

enum class ProgressKind {
  kCapture,    // capturing the task's forward (detail: the task's file name)
  kCaptured,   // total: ops in the captured graph
  kStage,      // a stage starts
  kPlan,       // proposals asked for: total seeds or designs expected (0: not known yet), round
  kProfile,    // Nsight Compute on the incumbent before a round
  kScreen,     // total candidates compiled (in parallel) and checked in one screening
  kScreened,   // done of total passed; median_ms: the fastest passing (on a GPU)
  kEvaluate,   // candidate_id: correctness trials and the full timing (detail: code | debug)
  kEvaluated,  // candidate_id, detail: its status, median_ms
  kDecided,    // candidate_id, accepted, detail: the reason
  kStageDone,  // detail: why the stage stopped
  kFinal,      // candidate_id: the final kernel evaluated again (detail: how)
  kDone,       // accepted: a verified kernel was written; detail: the run's stop reason
};

// The name of a kind as renderers print it ("capture", "screened", "done"...).
std::string ProgressKindName(ProgressKind kind);

// The incumbent as measured in full, against the baselines (speedups: ratios of medians).
struct ProgressBest {
  std::string candidate_id;
  std::optional<double> median_ms;
  std::optional<double> speedup_vs_eager;
  std::optional<double> speedup_vs_compile;
};

struct ProgressEvent {
  ProgressKind kind = ProgressKind::kStage;
  std::string stage{};  // empty outside the stages (capture, final, done)
  int round = 0;        // 0-based
  int done = 0;
  int total = 0;
  std::string candidate_id{};
  bool accepted = false;
  std::string detail{};
  std::optional<double> median_ms{};
  std::optional<ProgressBest> best{};        // the incumbent so far (none before the first correct kernel)
  std::optional<double> search_elapsed_s{};  // since the search began (none before it: capture)
  double budget_s = 0;                       // --time-budget of the search (0: none)
};

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  virtual void OnProgress(const ProgressEvent& event) = 0;
};

}  // namespace egg::pipeline
