#include "pipeline/candidate_evaluator.h"

namespace egg::pipeline {
namespace {

constexpr double kProfileTimeoutS = 600;

}  // namespace

// The single point where a candidate's origin reaches the harness: an untrusted (LLM-written) file is the one
// to route through the candidate sandbox.
harness::EvalResult HarnessCandidateEvaluator::Evaluate(const CandidateFile& candidate) {
  return evaluator_.Evaluate(task_path_, candidate.path, options_);
}

std::vector<harness::ScreenResult> CandidateEvaluator::Screen(const std::vector<CandidateFile>& candidates) {
  std::vector<harness::ScreenResult> results;
  for (const CandidateFile& candidate : candidates) {
    const harness::EvalResult eval = Evaluate(candidate);
    harness::ScreenResult result;
    result.candidate_path = candidate.path;
    result.candidate_hash = eval.candidate_hash;
    result.status = eval.status;
    result.reason = eval.reason;
    result.time = eval.time_ms.candidate;
    result.max_abs_err = eval.max_abs_err;
    results.push_back(result);
  }
  return results;
}

// Screening takes a batch in one worker request; the untrusted ones are the sandbox's to route as in
// Evaluate.
std::vector<harness::ScreenResult> HarnessCandidateEvaluator::Screen(
    const std::vector<CandidateFile>& candidates) {
  std::vector<std::string> paths;
  for (const CandidateFile& candidate : candidates) {
    paths.push_back(candidate.path);
  }
  return evaluator_.Screen(task_path_, paths, options_, harness::ScreenOptions{});
}

std::string HarnessCandidateEvaluator::Profile(const std::string& candidate_path) {
  return CompactProfile(evaluator_.Profile(task_path_, candidate_path, options_, kProfileTimeoutS, ""));
}

int HarnessCandidateEvaluator::SmCount() {
  const Json& device = worker_.Hello().value("device", Json::object());
  const auto found = device.find("sm_count");
  return found != device.end() && found->is_number_integer() ? found->get<int>() : 0;
}

std::string CompactProfile(const Json& profile) {
  Json compact = profile;
  compact.erase("key");
  compact.erase("versions");
  if (auto kernels = compact.find("kernels"); kernels != compact.end() && kernels->is_array()) {
    for (Json& kernel : *kernels) {
      kernel.erase("raw");
      kernel.erase("rules");
    }
  }
  return compact.dump();
}

std::string WithTracedKernels(const std::string& profile, const harness::EvalResult& eval) {
  if (!eval.kernel_times.is_array() || eval.kernel_times.empty()) {
    return profile;
  }
  Json parsed = Json::parse(profile, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) {
    parsed = Json::object();
  }
  if (const auto kernels = parsed.find("kernels");
      kernels != parsed.end() && kernels->is_array() && !kernels->empty()) {
    return profile;
  }
  constexpr double kNsPerUs = 1000.0;
  Json kernels = Json::array();
  for (const Json& time : eval.kernel_times) {
    if (!time.is_object() || !time.value("us", Json()).is_number()) {
      continue;
    }
    kernels.push_back({{"name", time.value("name", "")},
                       {"triton", time.value("triton", false)},
                       {"launches", time.value("launches", 0)},
                       {"duration_ns", time.at("us").get<double>() * kNsPerUs},
                       {"share", time.value("share", Json())}});
  }
  parsed["kernels"] = std::move(kernels);
  parsed["kernels_from"] = "the evaluation's kernel trace (times only, no ncu metrics)";
  return parsed.dump();
}

}  // namespace egg::pipeline
