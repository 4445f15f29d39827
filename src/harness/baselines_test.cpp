#include "harness/baselines.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace egg::harness {
namespace {

Json Settings(std::initializer_list<const char*> names) {
  Json settings = Json::object();
  for (const char* name : names) {
    settings[name] = {{"flags", {{"cudnn_allow_tf32", true}}},
                      {"runs", {{"eager", {{"time_ms", {{"mean", 2.0}, {"median", 2.0}}}, {"error", ""}}}}}};
  }
  return settings;
}

TEST(BaselinesTest, HeadlineFollowsTheToleranceAndSkipsWhatWasNotMeasured) {
  const BaselineResult all = ParseBaselineSettings(Settings({"default", "strict", "tf32"}));
  EXPECT_EQ(HeadlineFor(1e-2, all).headline, "default");
  EXPECT_EQ(HeadlineFor(1e-2, all).beside, "tf32");
  EXPECT_EQ(HeadlineFor(1e-3, all).headline, "default");
  EXPECT_EQ(HeadlineFor(1e-4, all).headline, "strict");
  EXPECT_EQ(HeadlineFor(1e-4, all).beside, "default");
  const BaselineResult tf32_only = ParseBaselineSettings(Settings({"tf32"}));
  EXPECT_EQ(HeadlineFor(1e-4, tf32_only).headline, "tf32");
  EXPECT_EQ(HeadlineFor(1e-4, tf32_only).beside, "");
  EXPECT_EQ(HeadlineFor(1e-2, tf32_only).beside, "") << "never beside itself";
  EXPECT_EQ(HeadlineFor(1e-2, BaselineResult{}).headline, "");
}

TEST(BaselinesTest, ParsesRunsAndRoundTripsThroughJson) {
  Json settings = Settings({"strict"});
  settings["strict"]["runs"]["compile"] = {
      {"time_ms", nullptr}, {"compile_s", 3.5}, {"error", "inductor: boom"}, {"accuracy", nullptr}};
  const BaselineResult parsed = ParseBaselineSettings(settings);
  const PrecisionBaseline* strict = parsed.Find("strict");
  ASSERT_NE(strict, nullptr);
  EXPECT_DOUBLE_EQ(strict->runs.at("eager").time->mean, 2.0);
  EXPECT_FALSE(strict->runs.at("compile").time.has_value());
  EXPECT_EQ(strict->runs.at("compile").error, "inductor: boom");
  EXPECT_EQ(parsed.Find("default"), nullptr);
  const BaselineResult again = ParseBaselineSettings(BaselineJson(parsed));
  EXPECT_DOUBLE_EQ(*again.Find("strict")->runs.at("compile").compile_s, 3.5);
}

TEST(BaselinesTest, AWorkerAnswerOutsideTheContractIsAWorkerError) {
  EXPECT_THROW(ParseBaselineSettings(Json::array()), EggError);
  EXPECT_THROW(ParseBaselineSettings(Settings({"fp8"})), EggError);
  Json bad_run = Settings({"default"});
  bad_run["default"]["runs"]["eager"] = "fast";
  EXPECT_THROW(ParseBaselineSettings(bad_run), EggError);
}

TEST(BaselinesTest, NoSpeedupForAWrongOrUntimedCandidate) {
  const BaselineResult baseline = ParseBaselineSettings(Settings({"default", "strict"}));
  EvalResult wrong;
  wrong.tol = 1e-4;
  wrong.correct = false;
  wrong.time_ms.candidate = Stats{1.0, 1.0};
  AddSpeedups(baseline, &wrong);
  EXPECT_EQ(wrong.baseline, "strict");
  EXPECT_DOUBLE_EQ(wrong.time_ms.eager->mean, 2.0) << "the baseline's time is reported all the same";
  EXPECT_FALSE(wrong.speedup_vs_eager.has_value());
  EXPECT_TRUE(wrong.speedups.is_null());
}

TEST(BaselinesTest, ADynamicBatchHasItsSpeedupsAtEachTimedBatch) {
  BaselineResult baseline = ParseBaselineSettings(Settings({"strict", "default"}));
  auto runs = [](double eager, double compile) {
    return Json{{"eager", {{"mean", eager}, {"median", eager}}},
                {"compile", {{"mean", compile}, {"median", compile}}},
                {"compile_s", 9.0},
                {"error", ""}};
  };
  baseline.by_batch =
      Json::array({{{"batch", 1}, {"settings", {{"strict", runs(0.4, 0.2)}}}},
                   {{"batch", 64}, {"settings", {{"strict", runs(3.0, 1.5)}, {"default", runs(2.5, 1.0)}}}}});
  EvalResult result;
  result.tol = 1e-4;
  result.correct = true;
  result.time_ms.candidate = Stats{1.0, 1.0};
  result.by_batch = Json::array({{{"batch", 1}, {"time_ms", {{"mean", 0.1}, {"median", 0.1}}}},
                                 {{"batch", 3}, {"time_ms", {{"mean", 0.2}, {"median", 0.2}}}},
                                 {{"batch", 64}, {"time_ms", {{"mean", 1.0}, {"median", 1.0}}}}});
  AddSpeedups(baseline, &result);
  EXPECT_DOUBLE_EQ(result.by_batch[0]["speedups"]["strict"]["eager"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(result.by_batch[0]["speedups"]["strict"]["compile"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(result.by_batch[0]["time_ms"]["candidate"]["mean"].get<double>(), 0.1);
  EXPECT_DOUBLE_EQ(result.by_batch[0]["time_ms"]["strict"]["compile_s"].get<double>(), 9.0);
  EXPECT_FALSE(result.by_batch[1].contains("speedups")) << "no baseline timed at batch 3";
  EXPECT_DOUBLE_EQ(result.by_batch[2]["speedups"]["default"]["compile"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(result.by_batch[2]["speedups"]["strict"]["eager"].get<double>(), 3.0);
  const EvalResult again = Json(result).get<EvalResult>();
  EXPECT_EQ(again.by_batch, result.by_batch) << "by_batch reaches report.json and the store";
}

}  // namespace
}  // namespace egg::harness
