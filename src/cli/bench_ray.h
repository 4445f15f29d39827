// `egg bench --ray ADDRESS`: the suite's tasks as Ray tasks. egg starts the driver (python -m egg_ray), which
// submits one Ray task per suite task; each runs this egg's `bench` on one task on the node it lands on and
// sends back its row, its files and its store. The driver writes the files under OUT/tasks/ and reports each
// finished task as one JSON line; the caller keeps the rows, results.json, the report and the store as
// without Ray.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/context.h"
#include "common/json.h"

namespace egg::cli {

struct RayJob {
  std::string address;                // auto, local, or a cluster's address (host:port, ray://host:port)
  std::vector<std::string> egg_args;  // this egg's command line, which each node's egg runs for one task
  std::string device;                 // cuda: one GPU per task (a 1/per_gpu share); cpu: one CPU core
  int per_gpu = 1;
  int retries = 2;  // attempts after the first when a node or worker dies under a task
  std::string out;
  Json tasks;  // [{"path", "level"}]
};

// Runs the driver to its end, calling `on_event` with each event: {"event": "finished", "task": path, "row":
// row, "store": path of the task's store or null} or {"event": "retry", "task", "attempt", "reason"}. Throws
// UsageError when Ray is missing or its cluster cannot be reached, WorkerError when the driver fails.
void RunRayJob(const RayJob& job, const GlobalOptions& globals,
               const std::function<void(const Json&)>& on_event);

// The lock file that every egg on this node takes around its work on the GPU it was given (Ray's
// CUDA_VISIBLE_DEVICES), so that tasks sharing a GPU time their kernels one at a time.
std::string NodeGpuLock(const EnvMap& env);

}  // namespace egg::cli
