// The judge: evaluates a candidate file against a task file through a worker, adds the baselines, the
// speedups and the review flags, and stores every result (failures included) keyed by everything that can
// change it. Candidate failures are results, never exceptions; a broken task or worker throws EggError.
// A stored timeout answers again only in the evaluator that met it (a search does not wait twice on a
// candidate that hangs): it is the limit's and the machine's load's answer, so a later run (a longer
// --timeout, an idle machine) evaluates the candidate again and the new row replaces it.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/baselines.h"
#include "harness/eval_types.h"
#include "harness/worker.h"
#include "store/store.h"

namespace egg::harness {

class Evaluator {
 public:
  // `store` may be null: nothing is cached or kept.
  Evaluator(WorkerChannel& worker, store::Store* store) : worker_(worker), store_(store) {}

  EvalResult Evaluate(const std::string& task_path, const std::string& candidate_path,
                      const EvalOptions& options);
  // Screens candidates of one task (docs/harness.md, "Screening"): one `screen` request for those not in the
  // store (options.use_cache=false skips the lookup), results in the order given. Candidate failures, a worker
  // timeout or crash (every unfinished candidate gets timeout/crash and the worker is restarted) are results;
  // a missing file, a broken task or a refused request throws EggError.
  std::vector<ScreenResult> Screen(const std::string& task_path, const std::vector<std::string>& candidate_paths,
                                   const EvalOptions& options, const ScreenOptions& screen);
  // Runs `egg profile` for the candidate: the worker's ProfileResult, as JSON, with the store key added.
  Json Profile(const std::string& task_path, const std::string& candidate_path, const EvalOptions& options,
               double timeout_s, const std::string& ncu_path);

 private:
  std::string CacheKey(const std::string& kind, const std::string& task_hash,
                       const std::string& candidate_hash, const Json& options);
  BaselineResult Baseline(const std::string& task_path, const std::string& task_hash,
                          const EvalOptions& options, std::vector<std::string>* flags);
  EvalResult RunCandidate(const std::string& task_path, const std::string& candidate_path,
                          const EvalOptions& options);
  void Store(const EvalResult& result, const Json& options_json);
  void ScreenPending(const std::string& task_path, const std::string& task_hash,
                     const std::vector<std::string>& keys, const EvalOptions& options,
                     const ScreenOptions& screen, std::vector<size_t> pending, std::vector<ScreenResult>* results);
  bool LoadScreening(const std::string& key, ScreenResult* result);
  void StoreScreening(const std::string& key, const std::string& task_hash, const ScreenResult& result);

  WorkerChannel& worker_;
  store::Store* store_;
  std::map<std::string, BaselineResult> baselines_;
  std::set<std::string> timed_out_;  // keys that timed out in this evaluator
};

}  // namespace egg::harness
