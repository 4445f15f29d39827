#include "harness/eval_types.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "common/error.h"

namespace egg::harness {
namespace {

constexpr std::array<std::pair<EvalStatus, const char*>, 7> kStatusNames = {{
    {EvalStatus::kOk, "ok"},
    {EvalStatus::kCompileError, "compile_error"},
    {EvalStatus::kRuntimeError, "runtime_error"},
    {EvalStatus::kMismatch, "mismatch"},
    {EvalStatus::kTimeout, "timeout"},
    {EvalStatus::kCrash, "crash"},
    {EvalStatus::kRejected, "rejected"},
}};

template <typename T>
void ReadOptional(const Json& j, const char* name, std::optional<T>& out) {
  if (auto found = j.find(name); found != j.end() && !found->is_null()) {
    out = found->get<T>();
  } else {
    out = std::nullopt;
  }
}

template <typename T>
void ReadValue(const Json& j, const char* name, T& out) {
  if (auto found = j.find(name); found != j.end() && !found->is_null()) {
    out = found->get<T>();
  }
}

}  // namespace

std::string StatusName(EvalStatus status) {
  for (const auto& [value, name] : kStatusNames) {
    if (value == status) {
      return name;
    }
  }
  return "crash";
}

EvalStatus ParseStatus(const std::string& name) {
  for (const auto& [value, known] : kStatusNames) {
    if (name == known) {
      return value;
    }
  }
  throw WorkerError("the worker reported an unknown status '" + name + "'");
}

void to_json(Json& j, const Stats& stats) {
  j = Json{{"mean", stats.mean}, {"median", stats.median}, {"p20", stats.p20},
           {"p80", stats.p80},   {"std", stats.std},       {"n", stats.n}, {"timer", stats.timer}};
}

void from_json(const Json& j, Stats& stats) {
  ReadValue(j, "mean", stats.mean);
  ReadValue(j, "median", stats.median);
  ReadValue(j, "p20", stats.p20);
  ReadValue(j, "p80", stats.p80);
  ReadValue(j, "std", stats.std);
  ReadValue(j, "n", stats.n);
  ReadValue(j, "timer", stats.timer);
}

void to_json(Json& j, const RobustTrial& robust) {
  j = Json{{"correct", robust.correct},
           {"max_abs_err", robust.max_abs_err},
           {"max_rel_err", robust.max_rel_err},
           {"rel_l2_err", robust.rel_l2_err},
           {"reason", robust.reason}};
}

void from_json(const Json& j, RobustTrial& robust) {
  ReadValue(j, "correct", robust.correct);
  ReadOptional(j, "max_abs_err", robust.max_abs_err);
  ReadOptional(j, "max_rel_err", robust.max_rel_err);
  ReadOptional(j, "rel_l2_err", robust.rel_l2_err);
  ReadValue(j, "reason", robust.reason);
}

void to_json(Json& j, const EvalResult& r) {
  j = Json{
      {"status", StatusName(r.status)},
      {"reason", r.reason},
      {"correct", r.correct},
      {"max_abs_err", r.max_abs_err},
      {"max_rel_err", r.max_rel_err},
      {"rel_l2_err", r.rel_l2_err},
      {"tol", r.tol},
      {"precision", r.precision},
      {"trials", r.trials},
      {"trials_passed", r.trials_passed},
      {"robust", r.robust},
      {"time_ms",
       Json{{"candidate", r.time_ms.candidate}, {"eager", r.time_ms.eager}, {"compile", r.time_ms.compile}}},
      {"speedup_vs_eager", r.speedup_vs_eager},
      {"speedup_vs_compile", r.speedup_vs_compile},
      {"speedup_median_vs_eager", r.speedup_median_vs_eager},
      {"speedup_median_vs_compile", r.speedup_median_vs_compile},
      {"compile_baseline_error", r.compile_baseline_error},
      {"baseline", r.baseline},
      {"beside_baseline", r.beside_baseline},
      {"baselines", r.baselines},
      {"speedups", r.speedups},
      {"vacuous", r.vacuous},
      {"float32_answer", r.float32_answer},
      {"io_bytes", r.io_bytes},
      {"batch_sizes", r.batch_sizes},
      {"batch_dims", r.batch_dims},
      {"by_batch", r.by_batch},
      {"triton_launches", r.triton_launches},
      {"triton_kernels", r.triton_kernels},
      {"triton_time_share", r.triton_time_share},
      {"kernel_times", r.kernel_times},
      {"flags", r.flags},
      {"timing_note", r.timing_note},
      {"timing_protocol", r.timing_protocol},
      {"device", r.device},
      {"versions", r.versions},
      {"harness_version", r.harness_version},
      {"task", r.task},
      {"candidate", r.candidate},
      {"task_hash", r.task_hash},
      {"candidate_hash", r.candidate_hash},
      {"key", r.key},
      {"cached", r.cached}};
}

void from_json(const Json& j, EvalResult& r) {
  r.status = ParseStatus(j.value("status", "crash"));
  ReadValue(j, "reason", r.reason);
  ReadValue(j, "correct", r.correct);
  ReadOptional(j, "max_abs_err", r.max_abs_err);
  ReadOptional(j, "max_rel_err", r.max_rel_err);
  ReadOptional(j, "rel_l2_err", r.rel_l2_err);
  ReadValue(j, "tol", r.tol);
  ReadValue(j, "precision", r.precision);
  ReadValue(j, "trials", r.trials);
  ReadValue(j, "trials_passed", r.trials_passed);
  ReadOptional(j, "robust", r.robust);
  if (auto time = j.find("time_ms"); time != j.end() && time->is_object()) {
    ReadOptional(*time, "candidate", r.time_ms.candidate);
    ReadOptional(*time, "eager", r.time_ms.eager);
    ReadOptional(*time, "compile", r.time_ms.compile);
  }
  ReadOptional(j, "speedup_vs_eager", r.speedup_vs_eager);
  ReadOptional(j, "speedup_vs_compile", r.speedup_vs_compile);
  ReadOptional(j, "speedup_median_vs_eager", r.speedup_median_vs_eager);
  ReadOptional(j, "speedup_median_vs_compile", r.speedup_median_vs_compile);
  ReadOptional(j, "compile_baseline_error", r.compile_baseline_error);
  ReadValue(j, "baseline", r.baseline);
  ReadValue(j, "beside_baseline", r.beside_baseline);
  ReadValue(j, "baselines", r.baselines);
  ReadValue(j, "speedups", r.speedups);
  ReadValue(j, "vacuous", r.vacuous);
  ReadValue(j, "float32_answer", r.float32_answer);
  ReadOptional(j, "io_bytes", r.io_bytes);
  ReadValue(j, "batch_sizes", r.batch_sizes);
  if (!r.batch_sizes.is_array()) {
    r.batch_sizes = Json::array();
  }
  ReadValue(j, "batch_dims", r.batch_dims);
  if (r.batch_dims.empty() && !r.batch_sizes.empty()) {  // the worker writes batch_dim for one dimension
    r.batch_dims = {j.value("batch_dim", 0)};
  }
  ReadValue(j, "by_batch", r.by_batch);
  ReadValue(j, "triton_launches", r.triton_launches);
  ReadValue(j, "triton_kernels", r.triton_kernels);
  ReadOptional(j, "triton_time_share", r.triton_time_share);
  ReadValue(j, "kernel_times", r.kernel_times);
  if (!r.kernel_times.is_array()) {
    r.kernel_times = Json::array();
  }
  ReadValue(j, "flags", r.flags);
  ReadValue(j, "worker_tainted", r.worker_tainted);
  ReadValue(j, "timing_note", r.timing_note);
  ReadValue(j, "timing_protocol", r.timing_protocol);
  ReadValue(j, "device", r.device);
  ReadValue(j, "versions", r.versions);
  ReadValue(j, "harness_version", r.harness_version);
  ReadValue(j, "task", r.task);
  ReadValue(j, "candidate", r.candidate);
  ReadValue(j, "task_hash", r.task_hash);
  ReadValue(j, "candidate_hash", r.candidate_hash);
  ReadValue(j, "key", r.key);
  ReadValue(j, "cached", r.cached);
}

Json OptionsKeyJson(const EvalOptions& o) {
  Json key = Json{{"device", o.device},
                  {"tol", o.tol},
                  {"trials", o.trials},
                  {"seed", o.seed},
                  {"init_seed", o.init_seed},
                  {"timing", o.timing && o.device == "cuda"},
                  {"warmup", o.warmup},
                  {"min_timing_trials", o.min_timing_trials},
                  {"timing_budget_s", o.timing_budget_s},
                  {"robust_trial", o.robust_trial},
                  {"baselines", o.baseline_settings},
                  {"max_autotune", o.max_autotune}};
  if (o.variants) {  // only when asked: rows stored before the check existed keep their keys
    key["variants"] = true;
  }
  if (o.precision != "fp32") {  // likewise: fp32 rows keep their keys
    key["precision"] = o.precision;
  }
  if (!o.dynamic.empty()) {  // checked at other batches too
    key["dynamic"] = DynamicField(o.dynamic);
  }
  return key;
}

Json DynamicField(const std::vector<DynamicSize>& sizes) {
  const auto one = [](const DynamicSize& size) {
    Json field = {{"batch_max", size.max}};
    if (size.dim != 0) {  // a dynamic batch's requests and keys as they were before other dimensions
      field["dim"] = size.dim;
    }
    return field;
  };
  if (sizes.size() == 1) {
    return one(sizes[0]);
  }
  Json dims = Json::array();
  for (const DynamicSize& size : sizes) {
    dims.push_back({{"dim", size.dim}, {"batch_max", size.max}});
  }
  return {{"dims", dims}};
}

std::variant<std::vector<DynamicSize>, std::string> ParseDynamicSizes(const std::string& dims,
                                                                      const std::vector<int64_t>& maxima) {
  constexpr size_t kMaxDynamicSizes = 3;
  std::vector<DynamicSize> sizes;
  for (size_t start = 0; start <= dims.size();) {
    const size_t comma = std::min(dims.find(',', start), dims.size());
    const std::string name = dims.substr(start, comma - start);
    const std::optional<int> dim = ParseDynamicDim(name);
    if (!dim) {
      return fmt::format("each dynamic dimension is batch or dimN (dim1, dim2, ...), not '{}'", name);
    }
    if (std::any_of(sizes.begin(), sizes.end(), [&](const DynamicSize& size) { return size.dim == *dim; })) {
      return fmt::format("dim {} is named twice in '{}'", *dim, dims);
    }
    sizes.push_back({*dim, 0});
    start = comma + 1;
  }
  if (sizes.size() > kMaxDynamicSizes) {
    return fmt::format("at most {} dynamic dimensions, not {}", kMaxDynamicSizes, sizes.size());
  }
  if (maxima.size() > sizes.size()) {
    return fmt::format("--max-size gives {} sizes for {} dynamic dimension(s)", maxima.size(), sizes.size());
  }
  for (size_t i = 0; i < maxima.size(); ++i) {
    sizes[i].max = maxima[i];
  }
  std::sort(sizes.begin(), sizes.end(),
            [](const DynamicSize& a, const DynamicSize& b) { return a.dim < b.dim; });
  return sizes;
}

std::string DimLabel(int dim) { return dim == 0 ? "batch" : fmt::format("dim {}", dim); }

DimsText DescribeDims(const std::vector<int>& dims) {
  if (dims.size() > 1) {
    std::vector<std::string> labels;
    for (int dim : dims) {
      labels.push_back(DimLabel(dim));
    }
    return {fmt::format("{}", fmt::join(labels, " and ")), "sizes"};
  }
  const int dim = dims.empty() ? 0 : dims[0];
  return {DimLabel(dim), dim == 0 ? "batch" : "size"};
}

std::string PointText(const Json& point) {
  if (!point.is_array()) {
    return point.dump();
  }
  std::vector<std::string> sizes;
  for (const Json& size : point) {
    sizes.push_back(size.dump());
  }
  return fmt::format("{}", fmt::join(sizes, "x"));
}

std::string PointsText(const Json& points) {
  std::vector<std::string> texts;
  for (const Json& point : points) {
    texts.push_back(PointText(point));
  }
  return fmt::format("{}", fmt::join(texts, ", "));
}

Json RowPoint(const Json& row) {
  return row.contains("sizes") ? row.at("sizes") : row.value("batch", Json());
}

std::optional<int> ParseDynamicDim(const std::string& text) {
  if (text == "batch") {
    return 0;
  }
  constexpr int kMaxDim = 16;
  const std::string digits = text.size() > 3 && text.starts_with("dim") ? text.substr(3) : "";
  if (digits.empty() || digits.size() > 2 || !std::all_of(digits.begin(), digits.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      })) {
    return std::nullopt;
  }
  const int dim = std::stoi(digits);
  return dim < kMaxDim ? std::optional<int>(dim) : std::nullopt;
}

void CheckPrecision(const std::string& precision) {
  for (const char* name : kPrecisionNames) {
    if (precision == name) {
      return;
    }
  }
  throw UsageError("precision must be fp32, bf16 or fp16, not " + precision);
}

double DefaultTolerance(const std::string& precision) {
  constexpr double kFloat32Tol = 1e-4;
  constexpr double kHalfTol = 1e-2;
  return IsHalfPrecision(precision) ? kHalfTol : kFloat32Tol;
}

}  // namespace egg::harness
