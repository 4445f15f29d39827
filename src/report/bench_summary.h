// Suite metrics of `egg bench`, with KernelBench's definitions: correctness rate, fast_p (the share of ALL tasks
// that are correct and faster than the baseline by more than p), the geometric mean of speedups over correct
// tasks (KernelBench's choice) and the arithmetic mean (what the EGG paper reports), per level and overall, at
// every tolerance checked, plus wall time and LLM usage. Pure functions of the rows; never throws for missing
// fields (a task without a number does not count as fast).
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace egg::report {

inline const std::vector<double> kFastThresholds = {0.0, 0.5, 0.8, 1.0, 1.5, 2.0};

// The tolerance keys of a results row: the run's own ("0.01") and those of `at_tol`.
std::string TolKey(double tol);

// Metrics of `rows` at tolerance `tol_key`: a row is correct at the run's tolerance from its `correct`
// field, at another from `at_tol[tol_key].correct`.
Json TolMetrics(const std::vector<Json>& rows, const std::string& tol_key, const std::string& run_tol_key);

// {"overall": {...}, "levels": {"1": {...}}}: each with tasks, wall_s, llm and per-tolerance metrics.
Json BenchSummary(const Json& rows, double run_tol, const std::vector<double>& extra_tols);

// The level of a task from its path (".../level2/x.py" -> 2), 0 when none is named.
int TaskLevel(const std::string& path);

}  // namespace egg::report
