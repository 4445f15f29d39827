#include "harness/evaluator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "common/error.h"

namespace egg::harness {
namespace {

// Answers each Call from a script of canned results and records the requests.
class FakeWorker : public WorkerChannel {
 public:
  CallResult Call(Json request, double timeout_s) override {
    requests.push_back(request);
    timeouts.push_back(timeout_s);
    if (script.empty()) {
      ADD_FAILURE() << "unexpected call " << request.dump();
      return {};
    }
    CallResult next = script.front();
    script.pop_front();
    return next;
  }
  void Restart() override { ++restarts; }
  const Json& Hello() override { return hello; }

  static CallResult Ok(Json result) { return {CallOutcome::kOk, Json{{"ok", true}, {"result", result}}, ""}; }

  std::deque<CallResult> script;
  std::vector<Json> requests;
  std::vector<double> timeouts;
  int restarts = 0;
  Json hello = {{"ok", true},
                {"versions", {{"torch", "2.11"}, {"triton", "3.6.0"}, {"cuda", "13.0"}}},
                {"device", {{"kind", "cuda"}, {"name", "NVIDIA H200"}}}};
};

Json StatsJson(double mean, double median) {
  return Json{{"mean", mean}, {"median", median}, {"p20", median}, {"p80", median}, {"std", 0.0}, {"n", 100}};
}

// A baseline result with one setting per entry: {setting, eager mean, compile mean} (medians 0.9x the means).
Json BaselineJson(const std::vector<std::tuple<std::string, double, double>>& settings) {
  Json entries = Json::object();
  for (const auto& [name, eager, compile] : settings) {
    Json runs = {{"eager", {{"time_ms", StatsJson(eager, 0.9 * eager)}, {"error", ""}}}};
    runs["compile"] = compile > 0 ? Json{{"time_ms", StatsJson(compile, 0.9 * compile)}, {"compile_s", 2.5}}
                                  : Json{{"time_ms", nullptr}, {"error", "inductor failed"}};
    entries[name] = {{"flags", {{"cudnn_allow_tf32", name != "strict"}}}, {"runs", runs}};
  }
  return Json{{"status", "ok"}, {"reason", ""}, {"settings", entries}};
}

Json OkEval(double candidate_ms) {
  return Json{{"status", "ok"},
              {"reason", ""},
              {"trials", 5},
              {"trials_passed", 5},
              {"max_abs_err", 1e-6},
              {"triton_launches", 1},
              {"time_ms", {{"candidate", StatsJson(candidate_ms, candidate_ms)}}}};
}

class EvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("egg-eval-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    task_ = (dir_ / "task.py").string();
    candidate_ = (dir_ / "cand.py").string();
    std::ofstream(task_) << "class Model: pass\n";
    std::ofstream(candidate_) << "class ModelNew: pass\n";
    store_ = store::Store::Open(":memory:");
    options_.device = "cuda";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string task_;
  std::string candidate_;
  std::unique_ptr<store::Store> store_;
  EvalOptions options_;
  FakeWorker worker_;
};

TEST_F(EvaluatorTest, ComputesSpeedupsAgainstEverySettingWithTheStrictHeadlineAtTightTolerance) {
  worker_.script.push_back(
      FakeWorker::Ok(BaselineJson({{"default", 1.5, 0.8}, {"strict", 2.0, 1.0}, {"tf32", 1.0, 0.5}})));
  worker_.script.push_back(FakeWorker::Ok(OkEval(0.5)));
  Evaluator evaluator(worker_, store_.get());
  const EvalResult result = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_EQ(result.status, EvalStatus::kOk);
  EXPECT_TRUE(result.correct);
  EXPECT_EQ(result.baseline, "strict");  // tol 1e-4: like for like
  EXPECT_EQ(result.beside_baseline, "default");
  ASSERT_TRUE(result.speedup_vs_eager.has_value());
  EXPECT_DOUBLE_EQ(*result.speedup_vs_eager, 4.0);
  EXPECT_DOUBLE_EQ(*result.speedup_vs_compile, 2.0);
  EXPECT_DOUBLE_EQ(*result.speedup_median_vs_eager, 3.6);
  EXPECT_DOUBLE_EQ(result.speedups["default"]["compile"].get<double>(), 1.6);
  EXPECT_DOUBLE_EQ(result.speedups["tf32"]["eager"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(result.baselines["tf32"]["runs"]["compile"]["compile_s"].get<double>(), 2.5);
  EXPECT_TRUE(result.flags.empty());
  EXPECT_EQ(worker_.requests[0]["op"], "baseline");
  EXPECT_EQ(worker_.requests[0]["settings"], Json({"default", "strict", "tf32"}));
  EXPECT_EQ(worker_.requests[0]["runs"], Json({"eager", "compile"}));
  EXPECT_EQ(worker_.requests[1]["op"], "evaluate");
  EXPECT_EQ(worker_.requests[1]["candidate"], candidate_);
  EXPECT_DOUBLE_EQ(worker_.timeouts[1], options_.timeout_s);
}

TEST_F(EvaluatorTest, LooseToleranceHeadlineIsPyTorchsDefaultWithTf32Beside) {
  options_.tol = 1e-2;
  worker_.script.push_back(
      FakeWorker::Ok(BaselineJson({{"default", 1.5, 0.8}, {"strict", 2.0, 0.0}, {"tf32", 1.0, 0.5}})));
  worker_.script.push_back(FakeWorker::Ok(OkEval(0.5)));
  Evaluator evaluator(worker_, store_.get());
  const EvalResult result = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_EQ(result.baseline, "default");
  EXPECT_EQ(result.beside_baseline, "tf32");
  EXPECT_DOUBLE_EQ(*result.speedup_vs_compile, 1.6);
  EXPECT_DOUBLE_EQ(result.time_ms.eager->mean, 1.5);
  EXPECT_FALSE(result.compile_baseline_error.has_value());
  EXPECT_FALSE(result.speedups["strict"].contains("compile")) << "strict's torch.compile failed";
}

TEST_F(EvaluatorTest, TheTimingProtocolNamesTheBaselinesSettings) {
  options_.tol = 1e-2;
  worker_.script.push_back(
      FakeWorker::Ok(BaselineJson({{"default", 1.5, 0.8}, {"strict", 2.0, 1.0}, {"tf32", 1.0, 0.5}})));
  Json eval = OkEval(0.5);
  eval["timing_protocol"] = {{"timer", "cuda-events"}, {"precision", {{"candidate", "strict"}}}};
  worker_.script.push_back(FakeWorker::Ok(eval));
  Evaluator evaluator(worker_, store_.get());
  const Json precision = evaluator.Evaluate(task_, candidate_, options_).timing_protocol["precision"];
  EXPECT_EQ(precision["candidate"], "strict") << "the worker's own setting stays";
  EXPECT_EQ(precision["eager"], "default");
  EXPECT_EQ(precision["compile"], "default");
  EXPECT_EQ(precision["beside"], "tf32");
  EXPECT_EQ(precision["baselines"], Json({"default", "strict", "tf32"}));
}

TEST_F(EvaluatorTest, OnlyTheSettingsAskedForAreRequestedAndHeadlined) {
  ParseBaselineNames({"tf32", "max-autotune"}, &options_);
  worker_.script.push_back(FakeWorker::Ok(BaselineJson({{"tf32", 1.0, 0.0}})));
  worker_.script.push_back(FakeWorker::Ok(OkEval(0.5)));
  Evaluator evaluator(worker_, store_.get());
  const EvalResult result = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_EQ(worker_.requests[0]["settings"], Json({"tf32"}));
  EXPECT_EQ(worker_.requests[0]["runs"], Json({"eager", "compile", "max-autotune"}));
  EXPECT_EQ(result.baseline, "tf32");
  EXPECT_EQ(result.beside_baseline, "");
  EXPECT_EQ(result.compile_baseline_error, "inductor failed");
  EXPECT_THROW(ParseBaselineNames({"fp8"}, &options_), EggError);
  EXPECT_THROW(ParseBaselineNames({"max-autotune"}, &options_), EggError);
}

TEST_F(EvaluatorTest, FlagsSpeedupsAboveTenXWithTheAchievedBandwidth) {
  worker_.script.push_back(FakeWorker::Ok(BaselineJson({{"strict", 11.0, 0.0}})));
  Json eval = OkEval(1.0);
  eval["io_bytes"] = int64_t{4000000000};
  worker_.script.push_back(FakeWorker::Ok(eval));
  Evaluator evaluator(worker_, store_.get());
  const EvalResult result = evaluator.Evaluate(task_, candidate_, options_);
  ASSERT_EQ(result.flags.size(), 1U);
  EXPECT_NE(result.flags[0].find("speedup_over_10x"), std::string::npos);
  EXPECT_NE(result.flags[0].find("candidate 4000 GB/s, eager 364 GB/s"), std::string::npos)
      << result.flags[0];
}

TEST_F(EvaluatorTest, TimeoutAndCrashBecomeStoredStatuses) {
  options_.timing = false;
  worker_.script.push_back({CallOutcome::kTimeout, Json(), "killed"});
  Evaluator evaluator(worker_, store_.get());
  const EvalResult timeout = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_EQ(timeout.status, EvalStatus::kTimeout);
  EXPECT_FALSE(timeout.correct);
  ASSERT_TRUE(store_->FindEvaluation(timeout.key).has_value());

  std::ofstream(candidate_) << "class ModelNew: crash = True\n";
  worker_.script.push_back({CallOutcome::kCrashed, Json(), "worker died: signal 11 (Segmentation fault)"});
  const EvalResult crash = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_EQ(crash.status, EvalStatus::kCrash);
  EXPECT_NE(crash.reason.find("signal 11"), std::string::npos);
  EXPECT_NE(crash.key, timeout.key);
}

TEST_F(EvaluatorTest, AStoredTimeoutIsEvaluatedAgain) {
  // A timeout is the limit's and the machine's load's answer, not the candidate's: the evaluator that met
  // it answers it again (a search waits once), a later one (a longer --timeout, an idle machine) runs the
  // candidate, and its result replaces the stored row.
  options_.timing = false;
  worker_.script.push_back({CallOutcome::kTimeout, Json(), "killed"});
  {
    Evaluator first(worker_, store_.get());
    EXPECT_EQ(first.Evaluate(task_, candidate_, options_).status, EvalStatus::kTimeout);
    EXPECT_TRUE(first.Evaluate(task_, candidate_, options_).cached);
    EXPECT_EQ(worker_.requests.size(), 1U);
  }
  Evaluator evaluator(worker_, store_.get());
  worker_.script.push_back(FakeWorker::Ok(OkEval(1.0)));
  const EvalResult again = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_FALSE(again.cached);
  EXPECT_EQ(again.status, EvalStatus::kOk);
  EXPECT_EQ(worker_.requests.size(), 2U);
  EXPECT_TRUE(evaluator.Evaluate(task_, candidate_, options_).cached) << "the ok row is kept";
  EXPECT_EQ(worker_.requests.size(), 2U);
}

TEST_F(EvaluatorTest, SecondAskReturnsStoredRowWithoutCallingWorker) {
  options_.timing = false;
  worker_.script.push_back(FakeWorker::Ok(OkEval(1.0)));
  Evaluator evaluator(worker_, store_.get());
  const EvalResult first = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_FALSE(first.cached);
  const EvalResult second = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(worker_.requests.size(), 1U);
  options_.tol = 1e-2;
  worker_.script.push_back(FakeWorker::Ok(OkEval(1.0)));
  const EvalResult other_tol = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_FALSE(other_tol.cached) << "the tolerance is part of the key";
  EXPECT_EQ(worker_.requests.size(), 2U);
}

TEST_F(EvaluatorTest, HalfPrecisionTravelsInEveryRequestAndKeysItsRowsApart) {
  options_.timing = false;
  worker_.script.push_back(FakeWorker::Ok(OkEval(1.0)));
  Evaluator evaluator(worker_, store_.get());
  const EvalResult fp32 = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_EQ(fp32.precision, "fp32");
  EXPECT_FALSE(OptionsKeyJson(options_).contains("precision")) << "fp32 rows keep the keys they had";
  options_.precision = "bf16";
  options_.tol = DefaultTolerance("bf16");
  worker_.script.push_back(FakeWorker::Ok(OkEval(1.0)));
  const EvalResult bf16 = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_FALSE(bf16.cached) << "the precision is part of the key";
  EXPECT_NE(bf16.key, fp32.key);
  EXPECT_EQ(bf16.precision, "bf16");
  EXPECT_DOUBLE_EQ(bf16.tol, 1e-2);
  EXPECT_EQ(worker_.requests.back()["precision"], "bf16");
  EXPECT_EQ(Json(bf16)["precision"], "bf16");
  EXPECT_EQ(Json(bf16).get<EvalResult>().precision, "bf16");
}

TEST(EvalTypesTest, DynamicDimensionsAreBatchOrDimN) {
  EXPECT_EQ(ParseDynamicDim("batch"), 0);
  EXPECT_EQ(ParseDynamicDim("dim0"), 0);
  EXPECT_EQ(ParseDynamicDim("dim2"), 2);
  for (const char* bad : {"dim", "dim-1", "dim1,dim2", "seq", "dimx", "dim99", ""}) {
    EXPECT_FALSE(ParseDynamicDim(bad)) << bad;
  }
  EXPECT_EQ(DynamicField({{0, 32}}), (Json{{"batch_max", 32}})) << "a dynamic batch keeps the keys it had";
  EXPECT_EQ(DynamicField({{1, 0}}), (Json{{"batch_max", 0}, {"dim", 1}}));
  EXPECT_EQ(DynamicField({{0, 8}, {1, 0}}),
            (Json{{"dims", {{{"dim", 0}, {"batch_max", 8}}, {{"dim", 1}, {"batch_max", 0}}}}}));
  using Sizes = std::vector<DynamicSize>;
  EXPECT_EQ(std::get<Sizes>(ParseDynamicSizes("dim1,batch", {64})), (Sizes{{0, 0}, {1, 64}}))
      << "ordered by dimension, each max given in --dynamic's order";
  EXPECT_EQ(std::get<Sizes>(ParseDynamicSizes("batch", {})), (Sizes{{0, 0}}));
  EXPECT_EQ(std::get<std::string>(ParseDynamicSizes("batch,seq", {})),
            "each dynamic dimension is batch or dimN (dim1, dim2, ...), not 'seq'");
  EXPECT_EQ(std::get<std::string>(ParseDynamicSizes("dim0,batch", {})),
            "dim 0 is named twice in 'dim0,batch'");
  EXPECT_EQ(std::get<std::string>(ParseDynamicSizes("batch", {4, 8})),
            "--max-size gives 2 sizes for 1 dynamic dimension(s)");
  EXPECT_EQ(std::get<std::string>(ParseDynamicSizes("dim0,dim1,dim2,dim3", {})),
            "at most 3 dynamic dimensions, not 4");
  EXPECT_EQ(DimLabel(0), "batch");
  EXPECT_EQ(DimLabel(3), "dim 3");
}

TEST_F(EvaluatorTest, ADynamicDimensionTravelsInTheRequestAndKeysItsRowsApart) {
  options_.timing = false;
  options_.dynamic = {{0, 0}};
  worker_.script.push_back(FakeWorker::Ok(OkEval(1.0)));
  Evaluator evaluator(worker_, store_.get());
  const EvalResult batch = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_EQ(worker_.requests.back()["dynamic"], (Json{{"batch_max", 0}}));
  options_.dynamic = {{1, 0}};
  worker_.script.push_back(FakeWorker::Ok(OkEval(1.0)));
  const EvalResult dim1 = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_FALSE(dim1.cached) << "the dimension is part of the key";
  EXPECT_NE(dim1.key, batch.key);
  EXPECT_EQ(worker_.requests.back()["dynamic"], (Json{{"batch_max", 0}, {"dim", 1}}));
}

TEST(EvalTypesTest, PrecisionsAndTheirTolerances) {
  EXPECT_DOUBLE_EQ(DefaultTolerance("fp32"), 1e-4);
  EXPECT_DOUBLE_EQ(DefaultTolerance("bf16"), 1e-2);
  EXPECT_DOUBLE_EQ(DefaultTolerance("fp16"), 1e-2);
  EXPECT_TRUE(IsHalfPrecision("fp16"));
  EXPECT_FALSE(IsHalfPrecision("fp32"));
  EXPECT_NO_THROW(CheckPrecision("bf16"));
  EXPECT_THROW(CheckPrecision("fp8"), EggError);
}

TEST_F(EvaluatorTest, KeyChangesWithGpuAndVersions) {
  options_.timing = false;
  worker_.script.push_back(FakeWorker::Ok(OkEval(1.0)));
  worker_.script.push_back(FakeWorker::Ok(OkEval(1.0)));
  Evaluator evaluator(worker_, store_.get());
  const std::string h200_key = evaluator.Evaluate(task_, candidate_, options_).key;
  worker_.hello["versions"]["triton"] = "3.7.0";
  const EvalResult newer = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_NE(newer.key, h200_key);
  EXPECT_FALSE(newer.cached);
}

TEST_F(EvaluatorTest, TaintedWorkerIsRestarted) {
  options_.timing = false;
  Json rejected = {{"status", "rejected"}, {"reason", "patched torch.allclose"}, {"worker_tainted", true}};
  worker_.script.push_back(FakeWorker::Ok(rejected));
  Evaluator evaluator(worker_, store_.get());
  const EvalResult result = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_EQ(result.status, EvalStatus::kRejected);
  EXPECT_EQ(worker_.restarts, 1);
}

TEST_F(EvaluatorTest, MissingFilesAndBrokenTasksThrow) {
  Evaluator evaluator(worker_, store_.get());
  EXPECT_THROW(evaluator.Evaluate((dir_ / "nope.py").string(), candidate_, options_), EggError);
  options_.timing = false;
  worker_.script.push_back({CallOutcome::kOk, Json{{"ok", false}, {"error", "bad task: no get_inputs"}}, ""});
  try {
    evaluator.Evaluate(task_, candidate_, options_);
    FAIL() << "a broken task must be a run-ending error";
  } catch (const EggError& error) {
    EXPECT_NE(std::string(error.what()).find("get_inputs"), std::string::npos);
  }
}

TEST_F(EvaluatorTest, CpuResultsCarryTheInterpreterNoteAndUntimedBaselines) {
  options_.device = "cpu";
  worker_.script.push_back(FakeWorker::Ok(BaselineJson({{"strict", 0.0, 0.0}})));
  worker_.script.push_back(FakeWorker::Ok(OkEval(1.0)));
  Evaluator evaluator(worker_, nullptr);
  const EvalResult result = evaluator.Evaluate(task_, candidate_, options_);
  EXPECT_NE(result.timing_note.find("interpreter"), std::string::npos);
  EXPECT_EQ(worker_.requests[0]["op"], "baseline") << "the baselines' errors are recorded on the cpu too";
  EXPECT_EQ(worker_.requests[0]["timing"]["enabled"], false);
  EXPECT_EQ(worker_.requests[1]["timing"]["enabled"], false);
  EXPECT_FALSE(result.speedup_vs_eager.has_value());
}

// ---------------------------------------------------------------- Screen

Json ScreenEntry(const std::string& status, bool screened = true) {
  Json entry = {{"candidate", "?"},       {"status", status},     {"reason", status == "ok" ? "" : status},
                {"time_ms", Json()},      {"max_abs_err", 0.25},  {"screened", screened}};
  if (status == "ok") {
    entry["time_ms"] = StatsJson(0.5, 0.4);
    entry["max_abs_err"] = 0.0;
  }
  return entry;
}

CallResult ScreenResponse(const std::vector<Json>& entries, bool tainted = false) {
  return FakeWorker::Ok(
      {{"results", entries}, {"compile_s", 1.0}, {"screen_s", 2.0}, {"worker_tainted", tainted}});
}

class ScreenTest : public EvaluatorTest {
 protected:
  std::vector<std::string> Candidates(int count) {
    std::vector<std::string> paths;
    for (int i = 0; i < count; ++i) {
      const std::string path = (dir_ / ("screen_" + std::to_string(i) + ".py")).string();
      std::ofstream(path) << "class ModelNew: variant = " << i << "\n";
      paths.push_back(path);
    }
    return paths;
  }
  ScreenOptions screen_;
};

TEST_F(ScreenTest, SendsOneRequestAndKeepsTheOrder) {
  const auto paths = Candidates(3);
  worker_.script.push_back(
      ScreenResponse({ScreenEntry("ok"), ScreenEntry("mismatch"), ScreenEntry("compile_error")}));
  screen_.compile_workers = 4;
  Evaluator evaluator(worker_, store_.get());
  const auto results = evaluator.Screen(task_, paths, options_, screen_);
  ASSERT_EQ(worker_.requests.size(), 1U);
  const Json& request = worker_.requests[0];
  EXPECT_EQ(request["op"], "screen");
  EXPECT_EQ(request["task"], task_);
  EXPECT_EQ(request["candidates"], Json(paths));
  EXPECT_EQ(request["device"], "cuda");
  EXPECT_EQ(request["tol"], options_.tol);
  EXPECT_EQ(request["seed"], options_.seed);
  EXPECT_EQ(request["init_seed"], options_.init_seed);
  EXPECT_EQ(request["compile_workers"], 4);
  EXPECT_EQ(request["compile_timeout_s"], 300.0);
  EXPECT_EQ(request["timing"],
            (Json{{"enabled", true}, {"cpu_wall", false}, {"warmup", 3}, {"min_trials", 20}, {"budget_s", 1.0}}));
  EXPECT_DOUBLE_EQ(worker_.timeouts[0], screen_.timeout_s);
  ASSERT_EQ(results.size(), 3U);
  EXPECT_EQ(results[0].status, EvalStatus::kOk);
  ASSERT_TRUE(results[0].time.has_value());
  EXPECT_DOUBLE_EQ(results[0].time->median, 0.4);
  EXPECT_EQ(results[1].status, EvalStatus::kMismatch);
  EXPECT_FALSE(results[1].time.has_value());
  EXPECT_DOUBLE_EQ(results[1].max_abs_err.value_or(0), 0.25);
  EXPECT_EQ(results[2].status, EvalStatus::kCompileError);
  for (size_t i = 0; i < paths.size(); ++i) {
    EXPECT_EQ(results[i].candidate_path, paths[i]);
    EXPECT_EQ(results[i].candidate_hash.size(), 64U);
    EXPECT_FALSE(results[i].cached);
  }
  EXPECT_EQ(worker_.restarts, 0);
}

TEST_F(ScreenTest, CachedCandidatesAreNotSentAgain) {
  const auto paths = Candidates(3);
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok"), ScreenEntry("mismatch")}));
  Evaluator evaluator(worker_, store_.get());
  evaluator.Screen(task_, {paths[0], paths[1]}, options_, screen_);
  worker_.script.push_back(ScreenResponse({ScreenEntry("rejected")}));
  const auto results = evaluator.Screen(task_, paths, options_, screen_);
  ASSERT_EQ(worker_.requests.size(), 2U);
  EXPECT_EQ(worker_.requests[1]["candidates"], Json({paths[2]}));
  EXPECT_TRUE(results[0].cached);
  EXPECT_EQ(results[0].status, EvalStatus::kOk);
  ASSERT_TRUE(results[0].time.has_value());
  EXPECT_DOUBLE_EQ(results[0].time->mean, 0.5);
  EXPECT_TRUE(results[1].cached);
  EXPECT_EQ(results[1].status, EvalStatus::kMismatch);
  EXPECT_EQ(results[1].reason, "mismatch");
  EXPECT_DOUBLE_EQ(results[1].max_abs_err.value_or(0), 0.25);
  EXPECT_FALSE(results[2].cached);
  EXPECT_EQ(results[2].status, EvalStatus::kRejected);

  options_.use_cache = false;
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok"), ScreenEntry("ok"), ScreenEntry("ok")}));
  const auto fresh = evaluator.Screen(task_, paths, options_, screen_);
  EXPECT_EQ(worker_.requests[2]["candidates"].size(), 3U);
  EXPECT_FALSE(fresh[0].cached);
  EXPECT_EQ(fresh[1].status, EvalStatus::kOk);
}

TEST_F(ScreenTest, ATimedOutScreeningIsScreenedAgain) {
  const auto paths = Candidates(1);
  worker_.script.push_back(ScreenResponse({ScreenEntry("timeout")}));
  EXPECT_EQ(Evaluator(worker_, store_.get()).Screen(task_, paths, options_, screen_)[0].status,
            EvalStatus::kTimeout);
  Evaluator evaluator(worker_, store_.get());
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok")}));
  const auto again = evaluator.Screen(task_, paths, options_, screen_);
  EXPECT_FALSE(again[0].cached);
  EXPECT_EQ(again[0].status, EvalStatus::kOk);
  EXPECT_TRUE(evaluator.Screen(task_, paths, options_, screen_)[0].cached);
  EXPECT_EQ(worker_.requests.size(), 2U);
}

TEST_F(ScreenTest, KeyCoversTheScreenTimingAndTolerance) {
  const auto paths = Candidates(1);
  Evaluator evaluator(worker_, store_.get());
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok")}));
  evaluator.Screen(task_, paths, options_, screen_);
  screen_.min_trials = 50;
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok")}));
  EXPECT_FALSE(evaluator.Screen(task_, paths, options_, screen_)[0].cached);
  options_.tol = 1e-2;
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok")}));
  EXPECT_FALSE(evaluator.Screen(task_, paths, options_, screen_)[0].cached);
  screen_.compile_workers = 7;  // how it is run, not what it finds
  EXPECT_TRUE(evaluator.Screen(task_, paths, options_, screen_)[0].cached);
  EXPECT_EQ(worker_.requests.size(), 3U);
}

TEST_F(ScreenTest, CrashMarksEveryUnfinishedCandidateAndRestarts) {
  const auto paths = Candidates(3);
  worker_.script.push_back({CallOutcome::kCrashed, Json(), "worker died: signal 11 (Segmentation fault)"});
  Evaluator evaluator(worker_, store_.get());
  const auto results = evaluator.Screen(task_, paths, options_, screen_);
  for (const auto& result : results) {
    EXPECT_EQ(result.status, EvalStatus::kCrash);
    EXPECT_NE(result.reason.find("signal 11"), std::string::npos);
  }
  EXPECT_EQ(worker_.restarts, 1);
  // nobody knows which one crashed: nothing is stored, and they are screened again
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok"), ScreenEntry("ok"), ScreenEntry("ok")}));
  const auto again = evaluator.Screen(task_, paths, options_, screen_);
  EXPECT_EQ(worker_.requests[1]["candidates"].size(), 3U);
  EXPECT_EQ(again[2].status, EvalStatus::kOk);
}

TEST_F(ScreenTest, TimeoutOfALoneCandidateIsStored) {
  const auto paths = Candidates(1);
  screen_.timeout_s = 30;
  worker_.script.push_back({CallOutcome::kTimeout, Json(), "killed"});
  Evaluator evaluator(worker_, store_.get());
  const auto results = evaluator.Screen(task_, paths, options_, screen_);
  EXPECT_EQ(results[0].status, EvalStatus::kTimeout);
  EXPECT_NE(results[0].reason.find("30 s"), std::string::npos);
  EXPECT_EQ(worker_.restarts, 1);
  const auto again = evaluator.Screen(task_, paths, options_, screen_);
  EXPECT_TRUE(again[0].cached);
  EXPECT_EQ(again[0].status, EvalStatus::kTimeout);
}

TEST_F(ScreenTest, UnscreenedCandidatesGoToAFreshWorker) {
  const auto paths = Candidates(3);
  worker_.script.push_back(ScreenResponse(
      {ScreenEntry("ok"), ScreenEntry("runtime_error"), ScreenEntry("runtime_error", /*screened=*/false)},
      /*tainted=*/true));
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok")}));
  Evaluator evaluator(worker_, store_.get());
  const auto results = evaluator.Screen(task_, paths, options_, screen_);
  ASSERT_EQ(worker_.requests.size(), 2U);
  EXPECT_EQ(worker_.requests[1]["candidates"], Json({paths[2]}));
  EXPECT_EQ(worker_.restarts, 1);
  EXPECT_EQ(results[1].status, EvalStatus::kRuntimeError);
  EXPECT_EQ(results[2].status, EvalStatus::kOk);
}

TEST_F(ScreenTest, TaintedWorkerIsRestarted) {
  worker_.script.push_back(ScreenResponse({ScreenEntry("rejected")}, /*tainted=*/true));
  Evaluator evaluator(worker_, nullptr);
  evaluator.Screen(task_, Candidates(1), options_, screen_);
  EXPECT_EQ(worker_.restarts, 1);
}

TEST_F(ScreenTest, IdenticalFilesAreScreenedOnce) {
  auto paths = Candidates(2);
  const std::string copy = (dir_ / "copy_of_0.py").string();
  std::filesystem::copy_file(paths[0], copy);
  paths.push_back(copy);
  worker_.script.push_back(ScreenResponse({ScreenEntry("mismatch"), ScreenEntry("ok")}));
  Evaluator evaluator(worker_, nullptr);
  const auto results = evaluator.Screen(task_, paths, options_, screen_);
  EXPECT_EQ(worker_.requests[0]["candidates"].size(), 2U);
  EXPECT_EQ(results[2].status, EvalStatus::kMismatch);
  EXPECT_EQ(results[2].candidate_path, copy);
  EXPECT_EQ(results[2].candidate_hash, results[0].candidate_hash);
}

TEST_F(ScreenTest, CpuScreeningIsUntimedUnlessWallClockIsAsked) {
  options_.device = "cpu";
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok")}));
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok")}));
  Evaluator evaluator(worker_, nullptr);
  const auto paths = Candidates(1);
  evaluator.Screen(task_, paths, options_, screen_);
  EXPECT_EQ(worker_.requests[0]["timing"]["enabled"], false);
  options_.cpu_wall_timing = true;
  evaluator.Screen(task_, paths, options_, screen_);
  EXPECT_EQ(worker_.requests[1]["timing"]["enabled"], true);
  EXPECT_EQ(worker_.requests[1]["timing"]["cpu_wall"], true);
}

TEST_F(ScreenTest, RefusedRequestsAndMissingFilesThrow) {
  const auto paths = Candidates(2);
  Evaluator evaluator(worker_, store_.get());
  EXPECT_THROW(evaluator.Screen(task_, {(dir_ / "nope.py").string()}, options_, screen_), EggError);
  worker_.script.push_back({CallOutcome::kOk, Json{{"ok", false}, {"error", "task lacks get_inputs"}}, ""});
  EXPECT_THROW(evaluator.Screen(task_, paths, options_, screen_), EggError);
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok")}));
  EXPECT_THROW(evaluator.Screen(task_, paths, options_, screen_), EggError) << "one entry for two candidates";
  worker_.script.push_back(ScreenResponse({ScreenEntry("ok"), ScreenEntry("great")}));
  EXPECT_THROW(evaluator.Screen(task_, paths, options_, screen_), EggError) << "an unknown status";
}

TEST_F(ScreenTest, EmptyListSendsNothing) {
  Evaluator evaluator(worker_, store_.get());
  EXPECT_TRUE(evaluator.Screen(task_, {}, options_, screen_).empty());
  EXPECT_TRUE(worker_.requests.empty());
}

TEST(EvalTypesTest, JsonRoundTripKeepsContractFields) {
  EvalResult result;
  result.status = EvalStatus::kMismatch;
  result.reason = "trial 2";
  result.max_abs_err = 0.5;
  result.time_ms.candidate = Stats{1, 1, 1, 1, 0, 10};
  result.timing_protocol = Json{{"timer", "cuda-events"}, {"timed_calls", 100}};
  result.kernel_times =
      Json::array({Json{{"name", "egg_k0_mm"}, {"launches", 1}, {"us", 12.5}, {"triton", true}}});
  const Json j = result;
  for (const char* field : {"status", "reason", "correct", "max_abs_err", "max_rel_err", "tol", "time_ms",
                            "speedup_vs_eager", "speedup_vs_compile", "triton_launches", "device", "versions",
                            "harness_version", "timing_protocol", "kernel_times"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  const EvalResult back = j.get<EvalResult>();
  EXPECT_EQ(back.status, EvalStatus::kMismatch);
  EXPECT_EQ(back.reason, "trial 2");
  EXPECT_EQ(back.time_ms.candidate->n, 10);
  EXPECT_EQ(back.timing_protocol, result.timing_protocol);
  EXPECT_EQ(back.kernel_times, result.kernel_times);
  EXPECT_FALSE(back.time_ms.eager.has_value());
  // an older worker's answer (no trace field) or a malformed one reads as no kernel times
  Json older = j;
  older.erase("kernel_times");
  EXPECT_EQ(older.get<EvalResult>().kernel_times, Json::array());
  older["kernel_times"] = "?";
  EXPECT_EQ(older.get<EvalResult>().kernel_times, Json::array());
  EXPECT_THROW(ParseStatus("great"), EggError);
}

}  // namespace
}  // namespace egg::harness
