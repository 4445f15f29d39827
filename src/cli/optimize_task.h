// `egg optimize` for one task, shared by `egg optimize` and `egg bench`: the search settings, their flags,
// and OptimizeTask, which runs the staged search through an open harness session and writes the task's
// model_new.py, report.json and trajectory.md. Throws EggError for bad settings or a task it cannot start.
#pragma once

#include <string>

namespace CLI {
class App;
}

#include "cli/context.h"
#include "common/json.h"
#include "pipeline/pipeline.h"

namespace egg::cli {

struct OptimizeArgs {
  // Search and evaluation settings of one task (the task path is the caller's).
  std::string backend = "expert";
  std::string device = "auto";
  std::string out;
  std::string config_path;
  std::string provider;
  std::string base_url;
  std::string model;
  double llm_timeout_s = 0;
  int max_retries = -1;
  int64_t max_calls = 0;
  int64_t max_tokens = 0;
  double max_cost_usd = 0;
  int max_output_tokens = 0;
  int llm_concurrency = 0;
  std::string api;
  std::string reasoning_effort;
  bool cpu_wall_tuning =
      false;  // device cpu: tune on the interpreter's wall clock (tests), as the LLM backend does
  pipeline::PipelineOptions pipeline;
  harness::EvalOptions eval;
};

// The first line of every model_new.py egg writes: the tolerance it was made and verified for.
std::string ToleranceHeader(const harness::EvalOptions& options);

// --backend, --seeds, --rounds, the LLM settings and budgets, and the evaluation options.
void AddSearchOptions(CLI::App& command, OptimizeArgs* args);

struct TaskOutcome {
  bool correct = false;
  Json report;  // the report.json written
  std::string out_dir;
};

// `args.eval.device` must already be resolved (OpenHarnessSession does it).
TaskOutcome OptimizeTask(OptimizeArgs args, HarnessSession& session, const std::string& task_path,
                         const std::string& out_dir);

// The lines `egg optimize` prints for a finished task (on a GPU: the medians, the speedups and the
// `python -m egg_worker.timeit` command that checks them by hand).
void PrintOutcome(const TaskOutcome& outcome);

// --quick: at most 2 seeds, one round per stage, no seed refinement (a smoke run or a short search).
void ApplyQuickSearch(OptimizeArgs* args);

}  // namespace egg::cli
