// Asks the worker to capture a task's forward (the `capture` op) and parses the IR. A task the worker cannot
// capture, a dead worker or a malformed IR come back as a one-line problem, never as an exception.
#pragma once

#include <string>

#include "expert/ir/graph.h"
#include "harness/eval_types.h"
#include "harness/worker.h"

namespace egg::expert {

inline constexpr double kCaptureTimeoutSeconds = 600;

struct CaptureOptions {
  std::string device = "cpu";
  int seed = 42;
  int init_seed = 42;
  std::string precision =
      "fp32";  // bf16, fp16: the module and inputs cast first, so the graph is in that dtype
  double timeout_s = kCaptureTimeoutSeconds;
  // Dynamic sizes (EvalOptions::dynamic): dim 0 (or another) of every tensor input one symbol up to its max
  // (0: the task's own size); the graph then carries Graph::dynamic.
  std::vector<harness::DynamicSize> dynamic;
};

ParsedGraph CaptureGraph(harness::WorkerChannel& worker, const std::string& task_path, const CaptureOptions& options);

}  // namespace egg::expert
