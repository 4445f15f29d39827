#include "harness/evaluator.h"

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/version.h"
#include "harness/baselines.h"

namespace egg::harness {
namespace {

constexpr const char* kCpuTimingNote =
    "device cpu: kernels ran in Triton's interpreter; correctness only, no timing here is a performance "
    "figure";

Json TimingJson(const EvalOptions& options, int warmup, int min_trials, double budget_s) {
  const bool cpu_wall = options.device == "cpu" && options.cpu_wall_timing;
  return Json{{"enabled", options.timing && (options.device == "cuda" || cpu_wall)},
              {"cpu_wall", cpu_wall},
              {"warmup", warmup},
              {"min_trials", min_trials},
              {"budget_s", budget_s}};
}

Json TimingJson(const EvalOptions& options) {
  return TimingJson(options, options.warmup, options.min_timing_trials, options.timing_budget_s);
}

// Everything of a screening's settings that can change its result (the cache key's options).
Json ScreenKeyJson(const EvalOptions& options, const ScreenOptions& screen) {
  Json key = Json{{"device", options.device},
                  {"tol", options.tol},
                  {"seed", options.seed},
                  {"init_seed", options.init_seed},
                  {"timing", TimingJson(options, screen.warmup, screen.min_trials, screen.budget_s)}};
  if (options.precision != "fp32") {  // fp32 screenings keep the keys they were stored under
    key["precision"] = options.precision;
    // half screenings judge against the float32 answer as evaluate does (screen.py): not those stored before
    key["judge"] = "float32_answer";
  }
  return key;
}

Json BaseRequest(const std::string& op, const std::string& task_path, const EvalOptions& options) {
  Json request{{"op", op},
               {"task", task_path},
               {"device", options.device},
               {"seed", options.seed},
               {"init_seed", options.init_seed},
               {"precision", options.precision},
               {"timing", TimingJson(options)}};
  if (!options.dynamic.empty()) {
    request["dynamic"] = DynamicField(options.dynamic);
  }
  return request;
}

std::string StringAt(const Json& j, const std::string& pointer, const std::string& fallback) {
  const Json::json_pointer path(pointer);
  return j.contains(path) && j.at(path).is_string() ? j.at(path).get<std::string>() : fallback;
}

std::string GpuName(const Json& hello) { return StringAt(hello, "/device/name", "cpu"); }

std::string VersionOf(const Json& hello, const char* name) {
  return StringAt(hello, std::string("/versions/") + name, "");
}

std::string ErrorText(const Json& response) {
  return StringAt(response, "/error", "the worker refused the request");
}

void RequireFile(const std::string& path, const char* what) {
  if (!FileExists(path)) {
    throw UsageError(std::string(what) + " file not found: " + path);
  }
}

// The baseline op: every setting asked for, eager and torch.compile (and max-autotune when asked) each.
Json BaselineRequest(const std::string& task_path, const EvalOptions& options) {
  Json request = BaseRequest("baseline", task_path, options);
  request["tol"] = options.tol;
  request["settings"] = options.baseline_settings;
  request["runs"] = options.max_autotune ? Json{"eager", "compile", "max-autotune"} : Json{"eager", "compile"};
  return request;
}

Json ScreenRequest(const std::string& task_path, const std::vector<std::string>& candidates,
                   const EvalOptions& options, const ScreenOptions& screen) {
  Json request = BaseRequest("screen", task_path, options);
  request["timing"] = TimingJson(options, screen.warmup, screen.min_trials, screen.budget_s);
  request["tol"] = options.tol;
  request["candidates"] = candidates;
  request["compile_workers"] = screen.compile_workers;
  request["compile_timeout_s"] = screen.compile_timeout_s;
  return request;
}

// The worker's entry for one candidate; throws WorkerError for one outside the contract.
void ReadScreenEntry(const Json& entry, ScreenResult* result) {
  if (!entry.is_object()) {
    throw WorkerError("the worker's screen result holds a non-object entry");
  }
  result->status = ParseStatus(entry.value("status", "crash"));
  result->reason = StringAt(entry, "/reason", "");
  const Json time = entry.value("time_ms", Json());
  result->time = time.is_object() ? std::optional<Stats>(time.get<Stats>()) : std::nullopt;
  const Json error = entry.value("max_abs_err", Json());
  result->max_abs_err = error.is_number() ? std::optional<double>(error.get<double>()) : std::nullopt;
}

std::string UnfinishedReason(const CallResult& call, double timeout_s) {
  if (call.outcome == CallOutcome::kTimeout) {
    return "the screen request exceeded its " + std::to_string(static_cast<int>(timeout_s)) +
           " s wall-clock limit; the worker was killed and replaced";
  }
  return "the worker died during the screen request: " + call.detail;
}

// The timing protocol the worker stated names the candidate's precision setting; the baselines' settings (the
// headline's, the one beside it, every one timed) are known here.
void StateBaselinePrecisions(EvalResult* result) {
  if (!result->timing_protocol.is_object() || !result->baselines.is_object()) {
    return;
  }
  Json& precision = result->timing_protocol["precision"];
  Json settings = Json::array();
  for (const auto& [name, entry] : result->baselines.items()) {
    settings.push_back(name);
  }
  precision["eager"] = result->baseline;
  precision["compile"] = result->baseline;
  precision["beside"] = result->beside_baseline;
  precision["baselines"] = settings;
}

}  // namespace

std::string Evaluator::CacheKey(const std::string& kind, const std::string& task_hash,
                                const std::string& candidate_hash, const Json& options) {
  const Json& hello = worker_.Hello();
  const Json material = {{"kind", kind},
                         {"task", task_hash},
                         {"candidate", candidate_hash},
                         {"gpu", GpuName(hello)},
                         {"torch", VersionOf(hello, "torch")},
                         {"triton", VersionOf(hello, "triton")},
                         {"cuda", VersionOf(hello, "cuda")},
                         {"harness", kHarnessVersion},
                         {"options", options}};
  return Sha256Hex(material.dump());
}

BaselineResult Evaluator::Baseline(const std::string& task_path, const std::string& task_hash,
                                   const EvalOptions& options, std::vector<std::string>* flags) {
  if (!options.timing) {
    return {};
  }
  const std::string memo_key = task_hash + BaselineRequest(task_path, options).dump();
  if (auto found = baselines_.find(memo_key); found != baselines_.end()) {
    return found->second;
  }
  CallResult call = worker_.Call(BaselineRequest(task_path, options), options.baseline_timeout_s);
  if (call.outcome != CallOutcome::kOk) {
    flags->push_back("baseline_failed: " + DescribeOutcome(call.outcome) + ": " + call.detail);
    return {};
  }
  if (!call.response.value("ok", false)) {
    throw WorkerError("the task's reference failed: " + ErrorText(call.response));
  }
  const Json& result = call.response["result"];
  if (result.value("status", "") != "ok") {
    throw WorkerError("the task's reference failed: " + StringAt(result, "/reason", "?"));
  }
  BaselineResult baseline = ParseBaselineSettings(result.value("settings", Json()));
  baseline.by_batch = result.value("by_batch", Json());
  baselines_[memo_key] = baseline;
  return baseline;
}

EvalResult Evaluator::RunCandidate(const std::string& task_path, const std::string& candidate_path,
                                   const EvalOptions& options) {
  Json request = BaseRequest("evaluate", task_path, options);
  request["candidate"] = candidate_path;
  request["tol"] = options.tol;
  request["trials"] = options.trials;
  request["robust_trial"] = options.robust_trial;
  request["variants"] = options.variants;
  CallResult call = worker_.Call(request, options.timeout_s);
  EvalResult result;
  if (call.outcome == CallOutcome::kTimeout) {
    result.status = EvalStatus::kTimeout;
    result.reason = "exceeded the " + std::to_string(static_cast<int>(options.timeout_s)) +
                    " s wall-clock limit; the worker was killed and replaced";
    return result;
  }
  if (call.outcome != CallOutcome::kOk) {
    result.status = EvalStatus::kCrash;
    result.reason = call.detail;
    return result;
  }
  if (!call.response.value("ok", false)) {
    throw WorkerError(ErrorText(call.response));
  }
  result = call.response["result"].get<EvalResult>();
  if (result.worker_tainted) {
    worker_.Restart();
  }
  return result;
}

void Evaluator::Store(const EvalResult& result, const Json& options_json) {
  if (store_ == nullptr) {
    return;
  }
  if (result.status == EvalStatus::kTimeout) {
    timed_out_.insert(result.key);
  }
  const Json& hello = worker_.Hello();
  store_->PutEvaluation({result.key, result.task, result.task_hash, result.candidate, result.candidate_hash,
                         GpuName(hello), VersionOf(hello, "torch"), VersionOf(hello, "triton"),
                         kHarnessVersion, options_json.dump(), StatusName(result.status),
                         Json(result).dump()});
}

EvalResult Evaluator::Evaluate(const std::string& task_file, const std::string& candidate_file,
                               const EvalOptions& options) {
  const std::string task_path = AbsolutePath(task_file);
  const std::string candidate_path = AbsolutePath(candidate_file);
  RequireFile(task_path, "task");
  RequireFile(candidate_path, "candidate");
  const std::string task_hash = FileSha256Hex(task_path);
  const std::string candidate_hash = FileSha256Hex(candidate_path);
  const Json options_json = OptionsKeyJson(options);
  const std::string key = CacheKey("evaluate", task_hash, candidate_hash, options_json);
  if (store_ != nullptr && options.use_cache) {
    if (auto stored = store_->FindEvaluation(key)) {
      EvalResult cached = Json::parse(*stored).get<EvalResult>();
      cached.cached = true;
      if (cached.status != EvalStatus::kTimeout || timed_out_.count(key) != 0) {
        return cached;
      }
    }
  }
  std::vector<std::string> baseline_flags;
  const BaselineResult baseline = Baseline(task_path, task_hash, options, &baseline_flags);
  EvalResult result = RunCandidate(task_path, candidate_path, options);
  result.tol = options.tol;
  result.precision = options.precision;
  result.trials = result.trials == 0 ? options.trials : result.trials;
  result.correct = result.status == EvalStatus::kOk;
  result.flags.insert(result.flags.end(), baseline_flags.begin(), baseline_flags.end());
  AddSpeedups(baseline, &result);
  StateBaselinePrecisions(&result);
  const Json& hello = worker_.Hello();
  result.device = hello.value("device", Json::object());
  result.versions = hello.value("versions", Json::object());
  result.versions["egg"] = EggVersion();
  result.timing_note = options.device == "cuda" ? "" : kCpuTimingNote;
  result.task = task_path;
  result.candidate = candidate_path;
  result.task_hash = task_hash;
  result.candidate_hash = candidate_hash;
  result.key = key;
  result.harness_version = kHarnessVersion;
  Store(result, options_json);
  return result;
}

bool Evaluator::LoadScreening(const std::string& key, ScreenResult* result) {
  if (store_ == nullptr) {
    return false;
  }
  const auto row = store_->FindScreening(key);
  if (!row || (row->status == StatusName(EvalStatus::kTimeout) && timed_out_.count(key) == 0)) {
    return false;
  }
  result->status = ParseStatus(row->status);
  result->reason = row->reason;
  const Json time = Json::parse(row->time_json);
  result->time = time.is_object() ? std::optional<Stats>(time.get<Stats>()) : std::nullopt;
  result->max_abs_err = row->max_abs_err;
  result->cached = true;
  return true;
}

void Evaluator::StoreScreening(const std::string& key, const std::string& task_hash,
                               const ScreenResult& result) {
  if (store_ == nullptr) {
    return;
  }
  if (result.status == EvalStatus::kTimeout) {
    timed_out_.insert(key);
  }
  store_->PutScreening({key, task_hash, result.candidate_hash, StatusName(result.status), result.reason,
                        Json(result.time).dump(), result.max_abs_err});
}

void Evaluator::ScreenPending(const std::string& task_path, const std::string& task_hash,
                              const std::vector<std::string>& keys, const EvalOptions& options,
                              const ScreenOptions& screen, std::vector<size_t> pending,
                              std::vector<ScreenResult>* results) {
  while (!pending.empty()) {
    std::vector<std::string> paths;
    for (size_t index : pending) {
      paths.push_back((*results)[index].candidate_path);
    }
    CallResult call = worker_.Call(ScreenRequest(task_path, paths, options, screen), screen.timeout_s);
    if (call.outcome != CallOutcome::kOk) {
      // Not knowing which candidate did it, the outcome is stored only when it can be only one's.
      const EvalStatus status = call.outcome == CallOutcome::kTimeout ? EvalStatus::kTimeout : EvalStatus::kCrash;
      for (size_t index : pending) {
        (*results)[index].status = status;
        (*results)[index].reason = UnfinishedReason(call, screen.timeout_s);
      }
      if (pending.size() == 1) {
        StoreScreening(keys[pending[0]], task_hash, (*results)[pending[0]]);
      }
      worker_.Restart();
      return;
    }
    if (!call.response.value("ok", false)) {
      throw WorkerError(ErrorText(call.response));
    }
    const Json result = call.response.value("result", Json::object());
    const Json entries = result.value("results", Json());
    if (!entries.is_array() || entries.size() != pending.size()) {
      throw WorkerError("the worker's screen result does not hold one entry per candidate");
    }
    std::vector<size_t> unscreened;
    for (size_t k = 0; k < pending.size(); ++k) {
      ScreenResult& target = (*results)[pending[k]];
      ReadScreenEntry(entries[k], &target);
      if (!entries[k].value("screened", true)) {
        unscreened.push_back(pending[k]);  // the worker lost its CUDA context first: again, in a fresh one
        continue;
      }
      StoreScreening(keys[pending[k]], task_hash, target);
    }
    if (result.value("worker_tainted", false) || !unscreened.empty()) {
      worker_.Restart();
    }
    if (unscreened.size() == pending.size()) {
      return;  // no progress: they keep the worker's not-screened status
    }
    pending = std::move(unscreened);
  }
}

std::vector<ScreenResult> Evaluator::Screen(const std::string& task_file,
                                            const std::vector<std::string>& candidate_files,
                                            const EvalOptions& options, const ScreenOptions& screen) {
  const std::string task_path = AbsolutePath(task_file);
  RequireFile(task_path, "task");
  const std::string task_hash = FileSha256Hex(task_path);
  const Json key_json = ScreenKeyJson(options, screen);
  std::vector<ScreenResult> results(candidate_files.size());
  std::vector<std::string> keys(candidate_files.size());
  std::map<std::string, size_t> first_with_key;  // identical files are screened once
  std::vector<size_t> pending;
  for (size_t index = 0; index < candidate_files.size(); ++index) {
    ScreenResult& result = results[index];
    result.candidate_path = AbsolutePath(candidate_files[index]);
    RequireFile(result.candidate_path, "candidate");
    result.candidate_hash = FileSha256Hex(result.candidate_path);
    keys[index] = CacheKey("screen", task_hash, result.candidate_hash, key_json);
    if (!first_with_key.emplace(keys[index], index).second) {
      continue;
    }
    if (!(options.use_cache && LoadScreening(keys[index], &result))) {
      pending.push_back(index);
    }
  }
  ScreenPending(task_path, task_hash, keys, options, screen, std::move(pending), &results);
  for (size_t index = 0; index < results.size(); ++index) {
    const size_t first = first_with_key.at(keys[index]);
    if (first != index) {
      std::string path = std::move(results[index].candidate_path);
      results[index] = results[first];
      results[index].candidate_path = std::move(path);
    }
  }
  return results;
}

Json Evaluator::Profile(const std::string& task_file, const std::string& candidate_file,
                        const EvalOptions& options, double timeout_s, const std::string& ncu_path) {
  const std::string task_path = AbsolutePath(task_file);
  const std::string candidate_path = AbsolutePath(candidate_file);
  RequireFile(task_path, "task");
  RequireFile(candidate_path, "candidate");
  Json request = BaseRequest("profile", task_path, options);
  request["candidate"] = candidate_path;
  request["ncu"] = ncu_path.empty() ? Json() : Json(ncu_path);
  request["timeout_s"] = timeout_s;
  CallResult call = worker_.Call(request, timeout_s + options.timeout_s);
  if (call.outcome != CallOutcome::kOk) {
    return Json{{"status", DescribeOutcome(call.outcome)}, {"reason", call.detail}};
  }
  if (!call.response.value("ok", false)) {
    throw WorkerError(ErrorText(call.response));
  }
  Json result = call.response["result"];
  if (result.value("status", "") == "rejected") {
    worker_.Restart();  // it tried to leave the sandbox or left processes running
  }
  const std::string task_hash = FileSha256Hex(task_path);
  const std::string candidate_hash = FileSha256Hex(candidate_path);
  result["key"] = CacheKey("profile", task_hash, candidate_hash, OptionsKeyJson(options));
  result["device"] = worker_.Hello().value("device", Json::object());
  result["versions"] = worker_.Hello().value("versions", Json::object());
  if (store_ != nullptr) {
    store_->PutProfile({result["key"], task_hash, candidate_hash, GpuName(worker_.Hello()), result.dump()});
  }
  return result;
}

}  // namespace egg::harness
