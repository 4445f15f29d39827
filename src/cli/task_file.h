// The tasks egg takes: a KernelBench task file (.py) or a torch.export program saved as .pt2 with its example
// inputs (docs/api.md), which the worker loads as the task file python/egg_worker/program.py writes for it.
#pragma once

#include <string>

#include "harness/worker.h"

namespace egg::cli {

// Whether `path` names a torch.export program (.pt2) rather than a task file.
bool IsProgramFile(const std::string& path);

// The Python source that candidates embed for the task: the task file itself, or for a .pt2 the task file the
// worker writes for it. Throws UsageError with the worker's one line when the .pt2 is not a usable program,
// WorkerError when the worker does not answer.
std::string TaskSource(harness::WorkerChannel& worker, const std::string& task_path);

}  // namespace egg::cli
