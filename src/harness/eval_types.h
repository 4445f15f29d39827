// Typed results of the harness, with their JSON form (the `egg eval --json` contract and the store rows).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/json.h"

namespace egg::harness {

// Part of every cache key: bump it when the worker's verdicts or timings change for the same files.
// 2: library kernels on side streams are timed by the host clock instead of refused.
// 3: baselines under three precision settings, the robustness trial by the relative criterion, vacuous tasks.
// 4: the launch counters are paused while timing (no wrapper's cost per Triton launch in a timed call).
// 5: at bf16/fp16, a candidate more accurate than PyTorch's half result passes against the float32 answer.
inline constexpr const char* kHarnessVersion = "5";

enum class EvalStatus { kOk, kCompileError, kRuntimeError, kMismatch, kTimeout, kCrash, kRejected };

std::string StatusName(EvalStatus status);
// Throws WorkerError for a name outside the contract.
EvalStatus ParseStatus(const std::string& name);

struct Stats {
  double mean = 0;
  double median = 0;
  double p20 = 0;
  double p80 = 0;
  double std = 0;
  int n = 0;
  // "cuda-events", "cuda-synchronized-wall" (side streams: host clock between device synchronizes), or
  // "cpu-interpreter-wall" (never a performance figure)
  std::string timer = "cuda-events";
};

struct TimeMs {
  std::optional<Stats> candidate;
  std::optional<Stats> eager;
  std::optional<Stats> compile;
};

struct RobustTrial {
  bool correct = false;
  std::optional<double> max_abs_err;
  std::optional<double> max_rel_err;
  std::optional<double> rel_l2_err;
  std::string reason;
};

// KernelBench's precisions: the task's floating inputs and the models' parameters and buffers cast to the
// half type (fp32: nothing cast). Throws UsageError for another name.
inline constexpr const char* kPrecisionNames[] = {"fp32", "bf16", "fp16"};
void CheckPrecision(const std::string& precision);
inline bool IsHalfPrecision(const std::string& precision) {
  return precision == "bf16" || precision == "fp16";
}
// KernelBench's tolerance at a precision: 1e-4 in fp32, 1e-2 in bf16 and fp16.
double DefaultTolerance(const std::string& precision);

// One dynamic size of --dynamic: dim `dim` of every tensor input that has one, from 1 to `max` (0: the task's
// own size).
struct DynamicSize {
  int dim = 0;
  int64_t max = 0;
  bool operator==(const DynamicSize&) const = default;
};

struct EvalOptions {
  std::string device = "cpu";  // "cuda" or "cpu"
  int gpu_index = 0;
  std::string precision = "fp32";  // fp32, bf16 or fp16 (kPrecisionNames)
  double tol = 1e-4;  // KernelBench's float32 rule; 1e-2 (TF32-level numerics) only when asked for
  int trials = 5;
  int seed = 1;        // trial i draws its inputs from seed + i
  int init_seed = 42;  // both models are built from this seed
  double timeout_s = 120;
  double baseline_timeout_s = 900;
  bool timing = true;
  int warmup = 10;
  int min_timing_trials = 100;
  double timing_budget_s = 10;
  bool robust_trial = true;
  bool variants = false;  // also check other init arguments and changed attributes (docs/harness.md)
  bool use_cache = true;
  bool cpu_wall_timing = false;  // device cpu: time the interpreter's wall clock, for search decisions only
  std::vector<std::string> baseline_settings = {"default", "strict", "tf32"};  // harness/baselines.h
  bool max_autotune = false;  // also time torch.compile(mode="max-autotune") under each setting
  // --dynamic batch (or dimN, or several: batch,dim1): the batch (dim 0 of every tensor input; dim N of each
  // that has one) is a runtime size, from 1 to its max (0: the task's own size; --max-size); the capture says
  // so and each evaluation also checks other sizes (docs/harness.md). Empty: fixed shapes.
  std::vector<DynamicSize> dynamic;
};

struct EvalResult {
  EvalStatus status = EvalStatus::kCrash;
  std::string reason;
  bool correct = false;
  std::optional<double> max_abs_err;
  std::optional<double> max_rel_err;
  std::optional<double> rel_l2_err;
  double tol = 0;
  std::string precision = "fp32";  // the dtype the task ran in (EvalOptions::precision)
  int trials = 0;
  int trials_passed = 0;
  std::optional<RobustTrial> robust;
  TimeMs time_ms;
  std::optional<double> speedup_vs_eager;
  std::optional<double> speedup_vs_compile;
  std::optional<double> speedup_median_vs_eager;
  std::optional<double> speedup_median_vs_compile;
  std::optional<std::string> compile_baseline_error;
  std::string baseline;         // the setting time_ms.eager/compile and speedup_vs_* are measured under
  std::string beside_baseline;  // the one reported beside it (precision-matched at 1e-2, default at 1e-4)
  Json baselines;               // every setting's runs: times, compile times, errors against the reference
  Json speedups;                // {setting: {run: baseline mean / candidate mean}}
  bool vacuous = false;         // the reference output was the same for every trial's inputs
  bool float32_answer =
      false;  // bf16/fp16: passed against the float32 answer, not allclose to PyTorch's half one
  std::optional<int64_t> io_bytes;  // inputs, outputs, parameters and buffers: what any implementation moves
  // Dynamic sizes: the points the candidate was also checked at (batches [1, 3, 17]; with several dynamic
  // dimensions, [[1, 1], [3, 3], ...]) and the dimensions they are sizes of, in that order ([0]: the batch).
  Json batch_sizes = Json::array();
  std::vector<int> batch_dims;
  // ... and on a GPU timed at: [{batch, time_ms: {candidate, <setting>: {eager, compile}}, speedups:
  // {<setting>: {eager, compile}}}], compile being torch.compile(dynamic=True) (harness/baselines.h,
  // AddSpeedups)
  Json by_batch;
  int triton_launches = 0;
  std::vector<std::string> triton_kernels;
  std::optional<double> triton_time_share;
  // GPU time per kernel name in the traced trial, the longest first: [{name, launches, us, share, triton}]
  // (the worker's guards.kernel_times); empty where no trace was taken (CPU)
  Json kernel_times = Json::array();
  std::vector<std::string> flags;
  bool worker_tainted = false;
  std::string timing_note;
  Json timing_protocol;  // the worker's statement of how it timed (docs/harness.md), null when it did not
                         // answer
  Json device;
  Json versions;
  std::string harness_version = kHarnessVersion;
  std::string task;
  std::string candidate;
  std::string task_hash;
  std::string candidate_hash;
  std::string key;
  bool cached = false;
};

// Settings of a screening (Evaluator::Screen): a quick correctness check and a short timing of many
// candidates in one worker request; the rest of the options (device, tol, seeds) come from EvalOptions.
struct ScreenOptions {
  int compile_workers = 0;         // processes that precompile candidates on a GPU; 0: the worker's CPU count
  double compile_timeout_s = 300;  // per candidate's egg_precompile()
  int warmup = 3;
  int min_trials = 20;
  double budget_s = 1.0;
  double timeout_s = 600;  // the whole request
};

// One candidate's screening. status is ok when it matched the reference once and launched Triton kernels;
// time is measured on a GPU only (or with EvalOptions::cpu_wall_timing, never a performance figure).
struct ScreenResult {
  std::string candidate_path;
  std::string candidate_hash;
  EvalStatus status = EvalStatus::kCrash;
  std::string reason;
  std::optional<Stats> time;
  bool cached = false;
  std::optional<double> max_abs_err;
};

void to_json(Json& j, const Stats& stats);
void from_json(const Json& j, Stats& stats);
void to_json(Json& j, const RobustTrial& robust);
void from_json(const Json& j, RobustTrial& robust);
void to_json(Json& j, const EvalResult& result);
void from_json(const Json& j, EvalResult& result);
Json OptionsKeyJson(const EvalOptions& options);
// The "dynamic" field of a worker request (and of a cache key): one size {"batch_max"}, with "dim" when it is
// not the batch; several {"dims": [{"dim", "batch_max"}, ...]}.
Json DynamicField(const std::vector<DynamicSize>& sizes);
// A dynamic dimension in messages: "batch" for dim 0, "dim 1" for dim 1.
std::string DimLabel(int dim);
// Dynamic dimensions in messages: what they are ("batch", "dim 1", "batch and dim 1") and the word for their
// points ("batch", "size", "sizes").
struct DimsText {
  std::string label;
  std::string unit;
};
DimsText DescribeDims(const std::vector<int>& dims);
// A point of batch_sizes or by_batch's key as text: "3", or "3x5" for several sizes.
std::string PointText(const Json& point);
// Every point of batch_sizes, joined: "1, 3, 17" or "1x1, 3x3".
std::string PointsText(const Json& points);
// The point a by_batch row is at: its "sizes" (several dynamic sizes), else its "batch".
Json RowPoint(const Json& row);
// One dimension of --dynamic's value: "batch" (dim 0) or "dimN" as N, nullopt for anything else.
std::optional<int> ParseDynamicDim(const std::string& text);
// --dynamic's value, "batch", "dim1" or several ("batch,dim1"), and --max-size's (one value per dimension,
// in order; missing ones are the task's own): the sizes, ordered by dimension, or a one-line problem.
std::variant<std::vector<DynamicSize>, std::string> ParseDynamicSizes(const std::string& dims,
                                                                      const std::vector<int64_t>& maxima);

}  // namespace egg::harness
