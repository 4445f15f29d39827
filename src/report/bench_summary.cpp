#include "report/bench_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

#include "harness/baselines.h"

namespace egg::report {
namespace {

std::optional<double> NumberAt(const Json& row, const char* key) {
  const auto found = row.find(key);
  if (found == row.end() || !found->is_number()) {
    return std::nullopt;
  }
  const double value = found->get<double>();
  return std::isfinite(value) && value > 0 ? std::optional<double>(value) : std::nullopt;
}

bool CorrectAt(const Json& row, const std::string& tol_key, const std::string& run_tol_key) {
  if (tol_key == run_tol_key) {
    return row.value("correct", false);
  }
  const Json at = row.value("at_tol", Json::object());
  return row.value("correct", false) && at.is_object() && at.contains(tol_key) &&
         at[tol_key].value("correct", false);
}

Json SpeedupStats(const std::vector<double>& values) {
  if (values.empty()) {
    return Json{{"n", 0}, {"geomean", nullptr}, {"mean", nullptr}, {"median", nullptr}};
  }
  double log_sum = 0;
  double sum = 0;
  for (double v : values) {
    log_sum += std::log(v);
    sum += v;
  }
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  return Json{{"n", n},
              {"geomean", std::exp(log_sum / static_cast<double>(n))},
              {"mean", sum / static_cast<double>(n)},
              {"median", median}};
}

constexpr const char* kRuns[] = {"eager", "compile", "max-autotune"};

// fast_p_<name> and speedup_<name> of `values` (speedups of correct tasks) among `total` tasks.
void AddSpeedupMetrics(const std::vector<double>& values, size_t total, const std::string& name,
                       Json* metrics) {
  Json fast = Json::object();
  for (double p : kFastThresholds) {
    const auto count = std::count_if(values.begin(), values.end(), [p](double v) { return v > p; });
    fast[fmt::format("{:g}", p)] = total == 0 ? 0.0 : static_cast<double>(count) / static_cast<double>(total);
  }
  (*metrics)["fast_p_" + name] = fast;
  (*metrics)["speedup_" + name] = SpeedupStats(values);
}

double MeanAt(const Json& stats) { return stats.is_object() ? stats.value("mean", 0.0) : 0.0; }

// Summed mean times (ms) of egg and of each baseline run, over the tasks correct at the run's tolerance with
// every one of them timed: the suite's total GPU time, side by side.
Json TotalTimes(const std::vector<Json>& rows, const std::string& tol_key, const std::string& run_tol_key) {
  double candidate_ms = 0;
  std::map<std::string, double> baseline_ms;
  size_t counted = 0;
  for (const Json& row : rows) {
    const Json times = row.value("time_ms", Json::object());
    const Json baselines = row.value("baselines", Json::object());
    if (!CorrectAt(row, tol_key, run_tol_key) || !times.is_object() || !baselines.is_object() ||
        MeanAt(times.value("candidate", Json())) <= 0) {
      continue;
    }
    std::map<std::string, double> row_ms;
    for (const auto& [setting, entry] : baselines.items()) {
      const Json runs = entry.value("runs", Json::object());
      for (const auto& [run, value] : runs.items()) {
        row_ms[setting + "." + run] = MeanAt(value.value("time_ms", Json()));
      }
    }
    if (row_ms.empty() ||
        std::any_of(row_ms.begin(), row_ms.end(), [](const auto& kv) { return kv.second <= 0; })) {
      continue;
    }
    ++counted;
    candidate_ms += MeanAt(times["candidate"]);
    for (const auto& [key, ms] : row_ms) {
      baseline_ms[key] += ms;
    }
  }
  Json totals = {{"tasks", counted}, {"candidate", candidate_ms}};
  for (const auto& [key, ms] : baseline_ms) {
    totals[key] = ms;
  }
  return totals;
}

Json LlmTotals(const std::vector<Json>& rows) {
  double cost = 0;
  int64_t tokens = 0;
  int64_t calls = 0;
  for (const Json& row : rows) {
    const Json llm = row.value("llm", Json::object());
    if (!llm.is_object()) {
      continue;
    }
    cost += llm.value("cost_usd", 0.0);
    tokens += llm.value("input_tokens", int64_t{0}) + llm.value("output_tokens", int64_t{0});
    calls += llm.value("calls", int64_t{0});
  }
  return Json{{"calls", calls}, {"tokens", tokens}, {"cost_usd", cost}};
}

Json GroupMetrics(const std::vector<Json>& rows, const std::vector<std::string>& tol_keys,
                  const std::string& run_tol_key) {
  double wall = 0;
  for (const Json& row : rows) {
    wall += row.value("wall_s", 0.0);
  }
  Json tols = Json::object();
  for (const std::string& key : tol_keys) {
    tols[key] = TolMetrics(rows, key, run_tol_key);
  }
  return Json{{"tasks", rows.size()},
              {"wall_s", wall},
              {"wall_s_per_task", rows.empty() ? 0.0 : wall / static_cast<double>(rows.size())},
              {"llm", LlmTotals(rows)},
              {"tol", tols}};
}

}  // namespace

std::string TolKey(double tol) { return fmt::format("{:g}", tol); }

int TaskLevel(const std::string& path) {
  static const std::regex level(R"((?:^|/)level(\d+)/[^/]+$)");
  std::smatch match;
  if (std::regex_search(path, match, level)) {
    return std::stoi(match[1].str());
  }
  return 0;
}

Json TolMetrics(const std::vector<Json>& rows, const std::string& tol_key, const std::string& run_tol_key) {
  const std::string headline = harness::HeadlineSettingFor(std::stod(tol_key));
  size_t correct = 0;
  size_t vacuous = 0;
  size_t float32_answer = 0;  // half precision: correct against the float32 answer, not by KernelBench's rule
  std::map<std::string, std::map<std::string, std::vector<double>>> speedups;  // setting -> run -> values
  std::vector<double> headline_eager;
  std::vector<double> headline_compile;
  for (const Json& row : rows) {
    if (!CorrectAt(row, tol_key, run_tol_key)) {
      continue;
    }
    ++correct;
    vacuous += row.value("vacuous", false) ? 1U : 0U;
    float32_answer += row.value("float32_answer", false) ? 1U : 0U;
    Json per_setting = row.value("speedups", Json::object());
    if (!per_setting.is_object()) {
      per_setting = Json::object();
    }
    for (const auto& [setting, runs] : per_setting.items()) {
      for (const char* run : kRuns) {
        if (auto value = NumberAt(runs, run)) {
          speedups[setting][run].push_back(*value);
        }
      }
    }
    // rows of the run's own tolerance carry their headline; older rows (no speedups) only that
    const bool own = tol_key == run_tol_key || !per_setting.contains(headline);
    auto pick = [&](const char* legacy, const char* run) {
      return own ? NumberAt(row, legacy) : NumberAt(per_setting[headline], run);
    };
    if (auto value = pick("speedup_vs_eager", "eager")) {
      headline_eager.push_back(*value);
    }
    if (auto value = pick("speedup_vs_compile", "compile")) {
      headline_compile.push_back(*value);
    }
  }
  const size_t total = rows.size();
  Json metrics = {
      {"correct", correct},
      {"correct_rate", total == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(total)},
      {"vacuous", vacuous},
      {"float32_answer", float32_answer},
      {"baseline", headline}};
  AddSpeedupMetrics(headline_eager, total, "vs_eager", &metrics);
  AddSpeedupMetrics(headline_compile, total, "vs_compile", &metrics);
  Json baselines = Json::object();
  for (const auto& [setting, runs] : speedups) {
    for (const auto& [run, values] : runs) {
      AddSpeedupMetrics(values, total, "vs_" + run, &baselines[setting]);
    }
  }
  metrics["baselines"] = baselines;
  metrics["total_ms"] = TotalTimes(rows, tol_key, run_tol_key);
  return metrics;
}

Json BenchSummary(const Json& rows, double run_tol, const std::vector<double>& extra_tols) {
  const std::string run_key = TolKey(run_tol);
  std::vector<std::string> tol_keys = {run_key};
  for (double tol : extra_tols) {
    if (TolKey(tol) != run_key) {
      tol_keys.push_back(TolKey(tol));
    }
  }
  std::vector<Json> all;
  std::map<int, std::vector<Json>> by_level;
  for (const Json& row : rows) {
    all.push_back(row);
    by_level[row.value("level", TaskLevel(row.value("path", "")))].push_back(row);
  }
  Json levels = Json::object();
  for (const auto& [level, level_rows] : by_level) {
    levels[std::to_string(level)] = GroupMetrics(level_rows, tol_keys, run_key);
  }
  return Json{{"run_tol", run_key}, {"overall", GroupMetrics(all, tol_keys, run_key)}, {"levels", levels}};
}

}  // namespace egg::report
