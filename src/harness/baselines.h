// The timing baselines of one task: PyTorch eager and torch.compile under named float32 precision settings
// (python/egg_worker/precision.py), each with its error against the exact reference, and the rule that picks
// which setting a tolerance's headline speedup is measured against (docs/harness.md, "Baselines").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "harness/eval_types.h"

namespace egg::harness {

inline constexpr double kSuspiciousSpeedup = 10.0;

// The runs of the reference under one setting: "eager", "compile" (inductor, default mode), "max-autotune".
struct BaselineRun {
  std::optional<Stats> time;
  std::optional<double> compile_s;  // the first compiled call, outside the timed region
  std::string error;                // why it did not run (a torch.compile failure), one line
  Json accuracy;                    // {max_abs_err, max_rel_err, rel_l2_err, within_tol} or null
};

struct PrecisionBaseline {
  std::string setting;  // "default", "strict" or "tf32"
  Json flags;           // the switches it ran under, as the worker read them back
  std::map<std::string, BaselineRun> runs;
};

struct BaselineResult {
  std::vector<PrecisionBaseline> settings;  // in the order asked
  // a dynamic batch on a GPU: [{batch, settings: {<setting>: {eager, compile, compile_s, error}}}], eager and
  // torch.compile(dynamic=True) at each batch a candidate is checked at (python/egg_worker/baseline.py)
  Json by_batch;

  const PrecisionBaseline* Find(const std::string& setting) const;
  bool Empty() const { return settings.empty(); }
};

// Which settings a result at `tol` is reported against: the headline and the one beside it. At tol >= 1e-3
// the headline is `default` (PyTorch as shipped, KernelBench's rule) with `tf32` (precision-matched) beside
// it; below, `strict` (like for like) with `default` beside it. A setting that was not measured is skipped.
struct HeadlineBaselines {
  std::string headline;
  std::string beside;
};
HeadlineBaselines HeadlineFor(double tol, const BaselineResult& baseline);
// The rule alone, for any tolerance: "default" at tol >= 1e-3, else "strict".
std::string HeadlineSettingFor(double tol);

// The `settings` object of the worker's baseline result; throws WorkerError when it is not one.
BaselineResult ParseBaselineSettings(const Json& settings);
Json BaselineJson(const BaselineResult& baseline);

// Fills the result's baseline fields: time_ms.eager/compile and speedup_vs_* of the headline setting, the
// per-setting `speedups`, `baseline`/`beside_baseline`, and the >10x review flag with the achieved bandwidth
// of candidate and baseline over the bytes any implementation must move (io_bytes); for a dynamic batch, each
// timed batch's speedups against that batch's baselines (`by_batch`).
void AddSpeedups(const BaselineResult& baseline, EvalResult* result);

// The baseline flags a user gives (`--baselines default,strict,tf32,max-autotune`): settings, and whether
// torch.compile's max-autotune mode is timed too; throws UsageError for an unknown name or no setting.
void ParseBaselineNames(const std::vector<std::string>& names, EvalOptions* options);

}  // namespace egg::harness
