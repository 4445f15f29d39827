#include "report/bench_summary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <utility>

namespace egg::report {
namespace {

Json Row(const std::string& path, bool correct, double vs_eager, double vs_compile, bool ok_tight) {
  return Json{{"path", path},
              {"correct", correct},
              {"speedup_vs_eager", vs_eager},
              {"speedup_vs_compile", vs_compile},
              {"wall_s", 10.0},
              {"at_tol", {{"0.0001", {{"correct", ok_tight}}}}}};
}

TEST(BenchSummaryTest, LevelsComeFromThePath) {
  EXPECT_EQ(TaskLevel("/kb/level2/12_Gemm.py"), 2);
  EXPECT_EQ(TaskLevel("level1/1_x.py"), 1);
  EXPECT_EQ(TaskLevel("/tmp/suite/relu.py"), 0);
  EXPECT_EQ(TaskLevel("/tmp/level3x/relu.py"), 0);
}

TEST(BenchSummaryTest, KernelBenchDefinitions) {
  const Json rows = Json::array({Row("/kb/level1/a.py", true, 2.0, 1.2, true),
                                 Row("/kb/level1/b.py", true, 0.5, 0.4, false),
                                 Row("/kb/level1/c.py", false, 9.0, 9.0, false),
                                 Row("/kb/level2/d.py", true, 4.0, 1.0, true)});
  const Json summary = BenchSummary(rows, 1e-2, {1e-4});
  EXPECT_EQ(summary["run_tol"], "0.01");
  const Json& loose = summary["overall"]["tol"]["0.01"];
  EXPECT_EQ(loose["correct"], 3);
  EXPECT_DOUBLE_EQ(loose["correct_rate"].get<double>(), 0.75);
  // fast_p counts correct tasks faster than p over ALL tasks; the wrong task's 9x never counts.
  EXPECT_DOUBLE_EQ(loose["fast_p_vs_eager"]["1"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(loose["fast_p_vs_eager"]["0"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(loose["fast_p_vs_compile"]["1"].get<double>(), 0.25);  // 1.0 is not faster than 1.0
  EXPECT_NEAR(loose["speedup_vs_eager"]["geomean"].get<double>(), std::cbrt(2.0 * 0.5 * 4.0), 1e-12);
  EXPECT_NEAR(loose["speedup_vs_eager"]["mean"].get<double>(), 6.5 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(loose["speedup_vs_eager"]["median"].get<double>(), 2.0);
  const Json& tight = summary["overall"]["tol"]["0.0001"];
  EXPECT_EQ(tight["correct"], 2);
  EXPECT_DOUBLE_EQ(tight["fast_p_vs_eager"]["1.5"].get<double>(), 0.5);
  EXPECT_EQ(summary["levels"]["1"]["tasks"], 3);
  EXPECT_EQ(summary["levels"]["2"]["tol"]["0.01"]["correct"], 1);
  EXPECT_DOUBLE_EQ(summary["overall"]["wall_s"].get<double>(), 40.0);
}

// A row of a run at tol 1e-2 whose candidate took 1 ms, with baselines {setting: {eager ms, compile ms}}.
Json TimedRow(const std::string& path, const std::map<std::string, std::pair<double, double>>& baselines,
              bool ok_tight) {
  Json speedups = Json::object();
  Json settings = Json::object();
  for (const auto& [name, times] : baselines) {
    speedups[name] = {{"eager", times.first}, {"compile", times.second}};
    settings[name] = {{"runs", {{"eager", {{"time_ms", {{"mean", times.first}}}}},
                                {"compile", {{"time_ms", {{"mean", times.second}}}}}}}};
  }
  return Json{{"path", path},
              {"correct", true},
              {"speedup_vs_eager", baselines.at("default").first},
              {"speedup_vs_compile", baselines.at("default").second},
              {"speedups", speedups},
              {"baselines", settings},
              {"time_ms", {{"candidate", {{"mean", 1.0}}}}},
              {"at_tol", {{"0.0001", {{"correct", ok_tight}}}}}};
}

TEST(BenchSummaryTest, EveryBaselineHasItsMetricsAndTheHeadlineFollowsTheTolerance) {
  const Json rows = Json::array(
      {TimedRow("/kb/level1/a.py", {{"default", {4.0, 2.0}}, {"strict", {8.0, 4.0}}, {"tf32", {2.0, 0.5}}}, true),
       TimedRow("/kb/level1/b.py", {{"default", {1.0, 1.0}}, {"strict", {2.0, 2.0}}, {"tf32", {1.0, 0.5}}}, false)});
  const Json summary = BenchSummary(rows, 1e-2, {1e-4});
  const Json& loose = summary["overall"]["tol"]["0.01"];
  EXPECT_EQ(loose["baseline"], "default");
  EXPECT_NEAR(loose["speedup_vs_compile"]["geomean"].get<double>(), std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(loose["baselines"]["tf32"]["speedup_vs_compile"]["geomean"].get<double>(), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(loose["baselines"]["strict"]["fast_p_vs_eager"]["1.5"].get<double>(), 1.0);
  EXPECT_EQ(loose["total_ms"]["tasks"], 2);
  EXPECT_DOUBLE_EQ(loose["total_ms"]["candidate"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(loose["total_ms"]["tf32.compile"].get<double>(), 1.0);
  // the re-check at 1e-4 is headlined against strict, over the one task that passed it
  const Json& tight = summary["overall"]["tol"]["0.0001"];
  EXPECT_EQ(tight["baseline"], "strict");
  EXPECT_EQ(tight["correct"], 1);
  EXPECT_DOUBLE_EQ(tight["speedup_vs_compile"]["geomean"].get<double>(), 4.0);
  EXPECT_EQ(tight["total_ms"]["tasks"], 1);
}

TEST(BenchSummaryTest, HalfRowsJudgedAgainstTheFloat32AnswerAreCountedApart) {
  Json by_float32 = Row("/kb/level1/a.py", true, 2.0, 1.0, false);
  by_float32["float32_answer"] = true;
  Json wrong_by_float32 = Row("/kb/level1/b.py", false, 2.0, 1.0, false);
  wrong_by_float32["float32_answer"] = true;  // a failed row's flag counts nowhere
  const Json rows =
      Json::array({by_float32, wrong_by_float32, Row("/kb/level1/c.py", true, 1.0, 1.0, false)});
  const Json summary = BenchSummary(rows, 1e-2, {});
  const Json& loose = summary["overall"]["tol"]["0.01"];
  EXPECT_EQ(loose["correct"], 2);
  EXPECT_EQ(loose["float32_answer"], 1);  // so 1 of 3 is correct by KernelBench's own rule
}

TEST(BenchSummaryTest, MissingNumbersAreNotFast) {
  Json untimed = Json{{"path", "/x/level1/a.py"}, {"correct", true}};
  const Json summary = BenchSummary(Json::array({untimed}), 1e-2, {});
  const Json& metrics = summary["overall"]["tol"]["0.01"];
  EXPECT_EQ(metrics["correct"], 1);
  EXPECT_DOUBLE_EQ(metrics["fast_p_vs_eager"]["0"].get<double>(), 0.0);
  EXPECT_TRUE(metrics["speedup_vs_eager"]["geomean"].is_null());
  EXPECT_FALSE(summary["overall"]["tol"].contains("0.0001"));
}

}  // namespace
}  // namespace egg::report
