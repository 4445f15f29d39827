// How `egg optimize` shows its progress events (pipeline/progress.h) on stderr: one line per event when
// stderr is not a terminal, one line rewritten in place when it is. Each shows the step, the best kernel so
// far against the baselines, the time spent and, under --time-budget, the search's time left. Not
// thread-safe: one run's events.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "pipeline/progress.h"

namespace egg::cli {

class ProgressRenderer : public pipeline::ProgressSink {
 public:
  enum class Mode { kLines, kTerminal };
  using Writer = std::function<void(const std::string& text)>;
  using Clock = std::function<double()>;  // seconds, monotonic

  // `width`: the terminal's columns (a terminal line is cut to fit); ignored in kLines mode. `clock` null:
  // the steady clock. `timed`: candidates are timed (a GPU run), which the texts say.
  ProgressRenderer(Mode mode, Writer write, Clock clock, size_t width, bool timed);
  void OnProgress(const pipeline::ProgressEvent& event) override;
  // Ends an open terminal line, so that what is printed next starts on a line of its own.
  void Finish();

 private:
  std::string Describe(const pipeline::ProgressEvent& event);
  std::string Times(const pipeline::ProgressEvent& event) const;
  std::string Fit(std::string line) const;

  Mode mode_;
  Writer write_;
  Clock clock_;
  size_t width_;
  double started_s_ = 0;
  bool line_open_ = false;
  bool timed_ = true;
  bool evaluated_before_ = false;
};

// The renderer for this process's stderr (a terminal or not), or null when `quiet`.
std::unique_ptr<ProgressRenderer> MakeStderrProgress(bool quiet, bool timed);

// "1.29x eager, 1.40x torch.compile" style text of the best kernel so far ("none yet" without one).
std::string DescribeBest(const std::optional<pipeline::ProgressBest>& best);

}  // namespace egg::cli
