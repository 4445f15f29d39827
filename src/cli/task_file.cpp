#include "cli/task_file.h"

#include <filesystem>

#include "common/error.h"
#include "common/fs.h"

namespace egg::cli {
namespace {

constexpr const char* kProgramExtension = ".pt2";
constexpr double kProgramLoadTimeoutSeconds = 300.0;  // torch.export.load of a large program's weights

}  // namespace

bool IsProgramFile(const std::string& path) {
  return std::filesystem::path(path).extension() == kProgramExtension;
}

std::string TaskSource(harness::WorkerChannel& worker, const std::string& task_path) {
  if (!IsProgramFile(task_path)) {
    return ReadFile(task_path);
  }
  const harness::CallResult call =
      worker.Call(Json{{"op", "task_source"}, {"task", task_path}}, kProgramLoadTimeoutSeconds);
  if (call.outcome != harness::CallOutcome::kOk) {
    throw WorkerError("the worker did not load " + task_path + ": " + call.detail);
  }
  if (!call.response.value("ok", false)) {
    throw UsageError(call.response.value("error", std::string("not a usable .pt2 program")));
  }
  const Json& source = call.response.value("source", Json());
  if (!source.is_string()) {
    throw WorkerError("the worker's task_source response holds no source");
  }
  return source.get<std::string>();
}

}  // namespace egg::cli
