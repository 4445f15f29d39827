// How the pipeline measures a candidate: evaluate (correctness + timing) and profile. The harness-backed
// implementation writes nothing itself; fakes implement it in tests.
#pragma once

#include <string>
#include <vector>

#include "harness/evaluator.h"

namespace egg::pipeline {

class CandidateEvaluator {
 public:
  virtual ~CandidateEvaluator() = default;
  virtual harness::EvalResult Evaluate(const std::string& candidate_path) = 0;
  // A quick measurement of many candidates for ranking (one correctness trial, a short timing), in order.
  // The default evaluates each fully.
  virtual std::vector<harness::ScreenResult> Screen(const std::vector<std::string>& candidate_paths);
  // The `egg profile` JSON of the candidate (ncu metrics and roofline, or the roofline alone).
  virtual std::string Profile(const std::string& candidate_path) = 0;
  virtual int SmCount() = 0;
};

class HarnessCandidateEvaluator : public CandidateEvaluator {
 public:
  HarnessCandidateEvaluator(harness::Evaluator& evaluator, harness::WorkerChannel& worker,
                            std::string task_path, harness::EvalOptions options)
      : evaluator_(evaluator),
        worker_(worker),
        task_path_(std::move(task_path)),
        options_(std::move(options)) {}
  harness::EvalResult Evaluate(const std::string& candidate_path) override;
  std::vector<harness::ScreenResult> Screen(const std::vector<std::string>& candidate_paths) override;
  std::string Profile(const std::string& candidate_path) override;
  int SmCount() override;

 private:
  harness::Evaluator& evaluator_;
  harness::WorkerChannel& worker_;
  std::string task_path_;
  harness::EvalOptions options_;
};

// The profile JSON without bulky raw metric dictionaries, for prompts.
std::string CompactProfile(const Json& profile);

}  // namespace egg::pipeline
