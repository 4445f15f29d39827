#include "harness/baselines.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "common/error.h"

namespace egg::harness {
namespace {

constexpr std::array<const char*, 3> kSettingNames = {"default", "strict", "tf32"};
constexpr const char* kMaxAutotune = "max-autotune";
constexpr double kLooseTol = 1e-3;  // at or above: TF32-level numerics were asked for
constexpr double kBytesPerGigabyte = 1e9;
constexpr double kMsPerSecond = 1e3;

bool KnownSetting(const std::string& name) {
  return std::find(kSettingNames.begin(), kSettingNames.end(), name) != kSettingNames.end();
}

BaselineRun ParseRun(const Json& j) {
  if (!j.is_object()) {
    throw WorkerError("the worker's baseline run is not an object");
  }
  BaselineRun run;
  run.time = j.value("time_ms", Json()).get<std::optional<Stats>>();
  run.compile_s = j.value("compile_s", Json()).get<std::optional<double>>();
  run.error = j.value("error", "");
  run.accuracy = j.value("accuracy", Json());
  return run;
}

Json RunJson(const BaselineRun& run) {
  return Json{
      {"time_ms", run.time}, {"compile_s", run.compile_s}, {"error", run.error}, {"accuracy", run.accuracy}};
}

std::optional<double> Ratio(const std::optional<Stats>& baseline, const Stats& candidate,
                            double Stats::* field) {
  if (!baseline || (*baseline).*field <= 0 || candidate.*field <= 0) {
    return std::nullopt;
  }
  return (*baseline).*field / candidate.*field;
}

std::optional<Stats> RunTime(const PrecisionBaseline* setting, const std::string& run) {
  if (setting == nullptr) {
    return std::nullopt;
  }
  const auto found = setting->runs.find(run);
  return found == setting->runs.end() ? std::nullopt : found->second.time;
}

// "candidate 412 GB/s, torch.compile 398 GB/s over at least 1.07 GB moved": a >10x row explained (or
// exposed).
std::string BandwidthNote(const EvalResult& result) {
  if (!result.io_bytes || !result.time_ms.candidate) {
    return "";
  }
  const double gigabytes = static_cast<double>(*result.io_bytes) / kBytesPerGigabyte;
  auto rate = [&](const std::optional<Stats>& time) {
    return time && time->mean > 0 ? fmt::format("{:.0f} GB/s", gigabytes / (time->mean / kMsPerSecond)) : "-";
  };
  return fmt::format(
      "; achieved over the {:.3g} GB any implementation must move: candidate {}, eager {}, "
      "torch.compile {} ({})",
      gigabytes, rate(result.time_ms.candidate), rate(result.time_ms.eager), rate(result.time_ms.compile),
      result.baseline);
}

// The baselines' entry at `point` (a batch, or several sizes: RowPoint) in the baseline op's by_batch, or
// null.
const Json* BatchBaselines(const Json& by_batch, const Json& point) {
  if (!by_batch.is_array() || point.is_null()) {
    return nullptr;
  }
  for (const Json& entry : by_batch) {
    if (entry.is_object() && RowPoint(entry) == point) {
      return &entry;
    }
  }
  return nullptr;
}

// Each timed batch of a dynamic-batch candidate beside its baselines at that batch: the baselines' times and
// mean ratios per setting (torch.compile here is one dynamic=True module serving every batch).
void AddBatchSpeedups(const BaselineResult& baseline, EvalResult* result) {
  if (!result->by_batch.is_array()) {
    return;
  }
  for (Json& entry : result->by_batch) {
    const Json* base = BatchBaselines(baseline.by_batch, RowPoint(entry));
    const Json candidate = entry.value("time_ms", Json());
    if (base == nullptr || !candidate.is_object() || candidate.value("mean", 0.0) <= 0) {
      continue;
    }
    Json times = {{"candidate", candidate}};
    Json speedups = Json::object();
    const Json settings = base->value("settings", Json::object());
    for (const auto& [setting, runs] : settings.items()) {
      times[setting] = runs;
      for (const char* run : {"eager", "compile"}) {
        const Json time = runs.value(run, Json());
        if (time.is_object() && time.value("mean", 0.0) > 0) {
          speedups[setting][run] = time.value("mean", 0.0) / candidate.value("mean", 0.0);
        }
      }
    }
    entry["time_ms"] = times;
    entry["speedups"] = speedups;
  }
}

}  // namespace

const PrecisionBaseline* BaselineResult::Find(const std::string& setting) const {
  for (const PrecisionBaseline& entry : settings) {
    if (entry.setting == setting) {
      return &entry;
    }
  }
  return nullptr;
}

std::string HeadlineSettingFor(double tol) { return tol >= kLooseTol ? "default" : "strict"; }

HeadlineBaselines HeadlineFor(double tol, const BaselineResult& baseline) {
  HeadlineBaselines names{HeadlineSettingFor(tol), tol >= kLooseTol ? "tf32" : "default"};
  if (baseline.Find(names.headline) == nullptr) {
    names.headline = baseline.Empty() ? "" : baseline.settings.front().setting;
  }
  if (baseline.Find(names.beside) == nullptr || names.beside == names.headline) {
    names.beside = "";
  }
  return names;
}

BaselineResult ParseBaselineSettings(const Json& settings) {
  if (!settings.is_object()) {
    throw WorkerError("the worker's baseline result has no settings object");
  }
  BaselineResult result;
  for (const auto& [name, entry] : settings.items()) {
    if (!KnownSetting(name) || !entry.is_object()) {
      throw WorkerError("the worker's baseline result has an unknown setting '" + name + "'");
    }
    PrecisionBaseline setting{name, entry.value("flags", Json()), {}};
    const Json runs = entry.value("runs", Json::object());
    for (const auto& [run, value] : runs.items()) {
      setting.runs[run] = ParseRun(value);
    }
    result.settings.push_back(std::move(setting));
  }
  return result;
}

Json BaselineJson(const BaselineResult& baseline) {
  Json settings = Json::object();
  for (const PrecisionBaseline& setting : baseline.settings) {
    Json runs = Json::object();
    for (const auto& [name, run] : setting.runs) {
      runs[name] = RunJson(run);
    }
    settings[setting.setting] = Json{{"flags", setting.flags}, {"runs", runs}};
  }
  return settings;
}

void AddSpeedups(const BaselineResult& baseline, EvalResult* result) {
  const HeadlineBaselines names = HeadlineFor(result->tol, baseline);
  const PrecisionBaseline* headline = baseline.Find(names.headline);
  result->baseline = names.headline;
  result->beside_baseline = names.beside;
  result->baselines = baseline.Empty() ? Json() : BaselineJson(baseline);
  result->time_ms.eager = RunTime(headline, "eager");
  result->time_ms.compile = RunTime(headline, "compile");
  if (headline != nullptr && headline->runs.contains("compile") &&
      !headline->runs.at("compile").error.empty()) {
    result->compile_baseline_error = headline->runs.at("compile").error;
  }
  const auto& candidate = result->time_ms.candidate;
  if (!candidate || candidate->mean <= 0 || !result->correct) {
    return;
  }
  result->speedups = Json::object();
  for (const PrecisionBaseline& setting : baseline.settings) {
    for (const auto& [run, measured] : setting.runs) {
      if (auto ratio = Ratio(measured.time, *candidate, &Stats::mean)) {
        result->speedups[setting.setting][run] = *ratio;
      }
    }
  }
  result->speedup_vs_eager = Ratio(result->time_ms.eager, *candidate, &Stats::mean);
  result->speedup_vs_compile = Ratio(result->time_ms.compile, *candidate, &Stats::mean);
  result->speedup_median_vs_eager = Ratio(result->time_ms.eager, *candidate, &Stats::median);
  result->speedup_median_vs_compile = Ratio(result->time_ms.compile, *candidate, &Stats::median);
  AddBatchSpeedups(baseline, result);
  const bool suspicious = result->speedup_vs_eager.value_or(0) > kSuspiciousSpeedup ||
                          result->speedup_vs_compile.value_or(0) > kSuspiciousSpeedup;
  if (suspicious) {
    result->flags.push_back("speedup_over_10x: review this candidate before trusting it" +
                            BandwidthNote(*result));
  }
}

void ParseBaselineNames(const std::vector<std::string>& names, EvalOptions* options) {
  options->baseline_settings.clear();
  options->max_autotune = false;
  for (const std::string& name : names) {
    if (name == kMaxAutotune) {
      options->max_autotune = true;
    } else if (KnownSetting(name)) {
      if (std::find(options->baseline_settings.begin(), options->baseline_settings.end(), name) ==
          options->baseline_settings.end()) {
        options->baseline_settings.push_back(name);
      }
    } else {
      throw UsageError("unknown baseline '" + name + "' (known: default, strict, tf32, max-autotune)");
    }
  }
  if (options->baseline_settings.empty()) {
    throw UsageError("at least one of default, strict, tf32 is needed");
  }
}

}  // namespace egg::harness
