// report.json and trajectory.md of an `egg optimize` run (docs/pipeline.md), built from the pipeline's
// RunResult; `egg show` renders the stored report.json with the same TrajectoryMarkdown.
#pragma once

#include <string>

#include "common/json.h"
#include "pipeline/pipeline.h"

namespace egg::report {

struct RunMeta {
  std::string run_id;
  std::string task;
  std::string task_hash;
  std::string backend;
  std::string device;
  std::string model;
  Json llm;  // {calls, input_tokens, output_tokens, cost_usd, max_prompt_chars}
  Json options;
  Json backend_details;  // the backend's own section (hybrid: the LLM's refused design moves, why it stopped)
  Json expert;        // expert backend: the final candidate's kernels, ops in Triton and in PyTorch, design
  std::string notes;  // e.g. why measured tuning was skipped
};

Json BuildRunReport(const pipeline::RunResult& result, const RunMeta& meta,
                    const harness::EvalResult* final_eval);
std::string TrajectoryMarkdown(const Json& report);

// Per source (expert, llm): distinct candidates proposed (fully evaluated or screened), those correct (a
// Debug repair counting for the proposal it repaired) and decisions accepted; with `llm` (the usage section)
// the LLM's calls, tokens and cost; and every accepted decision with its source.
Json ProvenanceJson(const pipeline::RunResult& result, const Json& llm);

}  // namespace egg::report
