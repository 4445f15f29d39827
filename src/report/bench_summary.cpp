#include "report/bench_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

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
  const size_t total = rows.size();
  size_t correct = 0;
  std::map<std::string, std::vector<double>> speedups;
  for (const Json& row : rows) {
    if (!CorrectAt(row, tol_key, run_tol_key)) {
      continue;
    }
    ++correct;
    for (const char* key : {"speedup_vs_eager", "speedup_vs_compile"}) {
      if (auto value = NumberAt(row, key)) {
        speedups[key].push_back(*value);
      }
    }
  }
  Json metrics = {{"correct", correct},
                  {"correct_rate", total == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(total)}};
  for (const char* key : {"speedup_vs_eager", "speedup_vs_compile"}) {
    const std::string name = std::string(key).substr(std::string("speedup_").size());
    const std::vector<double>& values = speedups[key];
    Json fast = Json::object();
    for (double p : kFastThresholds) {
      const auto count = std::count_if(values.begin(), values.end(), [p](double v) { return v > p; });
      fast[fmt::format("{:g}", p)] =
          total == 0 ? 0.0 : static_cast<double>(count) / static_cast<double>(total);
    }
    metrics["fast_p_" + name] = fast;
    metrics["speedup_" + name] = SpeedupStats(values);
  }
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
