#include "cli/bench_ray.h"

#include <filesystem>

#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"

namespace egg::cli {
namespace {

// The driver's environment: egg's own (Ray reads RAY_ADDRESS and its settings from it), its Python package on
// the path.
std::vector<std::string> DriverEnvironment(const EnvMap& env) {
  std::vector<std::string> entries;
  const std::string python_path = EggRoot(env) + "/python";
  for (const auto& [name, value] : env) {
    if (name != "PYTHONPATH") {
      entries.push_back(name + "=" + value);
    }
  }
  const auto inherited = LookupEnv(env, "PYTHONPATH");
  entries.push_back("PYTHONPATH=" + python_path + (inherited ? ":" + *inherited : ""));
  return entries;
}

Json JobJson(const RayJob& job, const EnvMap& env) {
  return {{"address", job.address},   {"egg", EggRoot(env) + "/egg"},
          {"egg_args", job.egg_args}, {"device", job.device},
          {"per_gpu", job.per_gpu},   {"retries", job.retries},
          {"out", job.out},           {"tasks", job.tasks}};
}

}  // namespace

void RunRayJob(const RayJob& job, const GlobalOptions& globals,
               const std::function<void(const Json&)>& on_event) {
  const EnvMap env = CurrentEnvironment();
  const std::string scratch = job.out + "/.ray";
  CreateDirectories(scratch);
  const std::string job_path = scratch + "/job.json";
  WriteFileAtomic(job_path, JobJson(job, env).dump(2) + "\n");
  std::string error;
  const int status = RunProcessLines({WorkerPython(env, globals.python), "-m", "egg_ray", job_path},
                                     DriverEnvironment(env), [&](const std::string& line) {
                                       const Json event = Json::parse(line, nullptr, false);
                                       if (event.is_discarded() || !event.is_object()) {
                                         return;
                                       }
                                       if (event.value("event", "") == "error") {
                                         error = event.value("message", "");
                                       } else {
                                         on_event(event);
                                       }
                                     });
  std::filesystem::remove_all(scratch);
  if (!error.empty()) {
    throw UsageError(error);
  }
  if (status != kExitOk) {
    throw WorkerError("the Ray driver (python -m egg_ray) failed with status " + std::to_string(status));
  }
}

std::string NodeGpuLock(const EnvMap& env) {
  const std::string gpu = LookupEnv(env, "CUDA_VISIBLE_DEVICES").value_or("0");
  return LookupEnv(env, "TMPDIR").value_or("/tmp") + "/egg-gpu-" + gpu + ".lock";
}

}  // namespace egg::cli
