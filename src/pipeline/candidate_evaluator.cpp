#include "pipeline/candidate_evaluator.h"

namespace egg::pipeline {
namespace {

constexpr double kProfileTimeoutS = 600;

}  // namespace

harness::EvalResult HarnessCandidateEvaluator::Evaluate(const std::string& candidate_path) {
  return evaluator_.Evaluate(task_path_, candidate_path, options_);
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

}  // namespace egg::pipeline
