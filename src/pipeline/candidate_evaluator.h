// How the pipeline measures a candidate: evaluate (correctness + timing) and profile. The harness-backed
// implementation writes nothing itself; fakes implement it in tests.
#pragma once

#include <string>
#include <vector>

#include "harness/evaluator.h"

namespace egg::pipeline {

// A candidate file and who wrote it. `untrusted`: an LLM wrote the source (a source edit or a repair), so it
// is to be run in the candidate sandbox; false only for the expert compiler's own files (its designs, and the
// LLM's design moves it realized). This is where the pipeline hands a candidate's origin to the harness.
struct CandidateFile {
  std::string path;
  std::string author = "llm";  // expert | llm
  bool untrusted = true;
};

class CandidateEvaluator {
 public:
  virtual ~CandidateEvaluator() = default;
  virtual harness::EvalResult Evaluate(const CandidateFile& candidate) = 0;
  // A quick measurement of many candidates for ranking (one correctness trial, a short timing), in order.
  // The default evaluates each fully.
  virtual std::vector<harness::ScreenResult> Screen(const std::vector<CandidateFile>& candidates);
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
  harness::EvalResult Evaluate(const CandidateFile& candidate) override;
  std::vector<harness::ScreenResult> Screen(const std::vector<CandidateFile>& candidates) override;
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

// `profile` (a profile JSON, "{}" when none was taken) with the evaluation's traced kernel times as its
// "kernels" where it names none (--no-profile, or no ncu on the machine): each kernel's name, launches,
// duration_ns and share of the GPU time, and whether it is a Triton kernel, without ncu's metrics;
// "kernels_from" says so. The profile as it was when it has kernels or the evaluation traced none (CPU).
std::string WithTracedKernels(const std::string& profile, const harness::EvalResult& eval);

}  // namespace egg::pipeline
