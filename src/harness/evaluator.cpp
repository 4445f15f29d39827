#include "harness/evaluator.h"

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"

namespace egg::harness {
namespace {

constexpr const char* kCpuTimingNote =
    "device cpu: kernels ran in Triton's interpreter; correctness only, no timing here is a performance "
    "figure";

Json TimingJson(const EvalOptions& options) {
  const bool cpu_wall = options.device == "cpu" && options.cpu_wall_timing;
  return Json{{"enabled", options.timing && (options.device == "cuda" || cpu_wall)},
              {"cpu_wall", cpu_wall},
              {"warmup", options.warmup},
              {"min_trials", options.min_timing_trials},
              {"budget_s", options.timing_budget_s}};
}

Json BaseRequest(const std::string& op, const std::string& task_path, const EvalOptions& options) {
  return Json{{"op", op},
              {"task", task_path},
              {"device", options.device},
              {"seed", options.seed},
              {"init_seed", options.init_seed},
              {"timing", TimingJson(options)}};
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

}  // namespace

void AddSpeedups(const BaselineResult& baseline, EvalResult* result) {
  const auto& candidate = result->time_ms.candidate;
  result->time_ms.eager = baseline.eager;
  result->time_ms.compile = baseline.compile;
  result->compile_baseline_error = baseline.compile_error;
  if (!candidate || candidate->mean <= 0 || !result->correct) {
    return;
  }
  if (baseline.eager) {
    result->speedup_vs_eager = baseline.eager->mean / candidate->mean;
    result->speedup_median_vs_eager = baseline.eager->median / candidate->median;
  }
  if (baseline.compile) {
    result->speedup_vs_compile = baseline.compile->mean / candidate->mean;
    result->speedup_median_vs_compile = baseline.compile->median / candidate->median;
  }
  const bool suspicious = result->speedup_vs_eager.value_or(0) > kSuspiciousSpeedup ||
                          result->speedup_vs_compile.value_or(0) > kSuspiciousSpeedup;
  if (suspicious) {
    result->flags.emplace_back("speedup_over_10x: review this candidate before trusting it");
  }
}

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
  BaselineResult baseline;
  if (options.device != "cuda" || !options.timing) {
    return baseline;
  }
  const std::string memo_key = task_hash + TimingJson(options).dump() + std::to_string(options.seed);
  if (auto found = baselines_.find(memo_key); found != baselines_.end()) {
    return found->second;
  }
  CallResult call = worker_.Call(BaseRequest("baseline", task_path, options), options.baseline_timeout_s);
  if (call.outcome != CallOutcome::kOk) {
    flags->push_back("baseline_failed: " + DescribeOutcome(call.outcome) + ": " + call.detail);
    return baseline;
  }
  if (!call.response.value("ok", false)) {
    throw WorkerError("the task's reference failed: " + ErrorText(call.response));
  }
  const Json& result = call.response["result"];
  if (result.value("status", "") != "ok") {
    throw WorkerError("the task's reference failed: " + StringAt(result, "/reason", "?"));
  }
  baseline.eager = result.value("eager", Json()).get<std::optional<Stats>>();
  baseline.compile = result.value("compile", Json()).get<std::optional<Stats>>();
  if (const std::string error = StringAt(result, "/compile_error", ""); !error.empty()) {
    baseline.compile_error = error;
  }
  baseline.compile_s = result.value("compile_s", Json()).get<std::optional<double>>();
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
      return cached;
    }
  }
  std::vector<std::string> baseline_flags;
  const BaselineResult baseline = Baseline(task_path, task_hash, options, &baseline_flags);
  EvalResult result = RunCandidate(task_path, candidate_path, options);
  result.tol = options.tol;
  result.trials = result.trials == 0 ? options.trials : result.trials;
  result.correct = result.status == EvalStatus::kOk;
  result.flags.insert(result.flags.end(), baseline_flags.begin(), baseline_flags.end());
  AddSpeedups(baseline, &result);
  const Json& hello = worker_.Hello();
  result.device = hello.value("device", Json::object());
  result.versions = hello.value("versions", Json::object());
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
