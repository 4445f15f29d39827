#include "cli/context.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "common/fs.h"
#include "harness/baselines.h"

namespace egg::cli {
namespace {

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    if (!part.empty()) {
      parts.push_back(part);
    }
  }
  return parts;
}

// The physical GPU a worker for `gpu_index` should see, honouring the parent's CUDA_VISIBLE_DEVICES.
std::string PhysicalGpu(int gpu_index, const EnvMap& env) {
  if (auto visible = LookupEnv(env, "CUDA_VISIBLE_DEVICES")) {
    const auto devices = SplitCommas(*visible);
    if (gpu_index < 0 || static_cast<size_t>(gpu_index) >= devices.size()) {
      throw UsageError("--gpu " + std::to_string(gpu_index) +
                       " is not among CUDA_VISIBLE_DEVICES=" + *visible);
    }
    return devices[static_cast<size_t>(gpu_index)];
  }
  return std::to_string(gpu_index);
}

}  // namespace

void AddGlobalOptions(CLI::App& app, GlobalOptions* options) {
  app.add_option("--db", options->db_path, "SQLite store (default: $EGG_HOME/egg.db)");
  app.add_option("--python", options->python,
                 "Python interpreter with torch and triton for the worker (default: $EGG_PYTHON, then "
                 ".venv/bin/python)");
  app.add_flag("--no-store", options->no_store, "Do not read or write the store");
}

void AddEvalOptions(CLI::App& command, harness::EvalOptions* options, std::string* device_flag) {
  command.add_option("--device", *device_flag, "cuda, cpu (Triton interpreter), or auto")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->default_val("auto");
  command.add_option("--gpu", options->gpu_index, "GPU index among the visible ones")
      ->check(CLI::NonNegativeNumber)
      ->default_val(0);
  command.add_option("--timeout", options->timeout_s, "Wall-clock limit per evaluation, seconds")
      ->check(CLI::PositiveNumber)
      ->default_val(options->timeout_s);
  command.add_option("--tol", options->tol,
                     "atol = rtol and relative-L2 tolerance (KernelBench's float32 rule; 1e-2 allows TF32-level "
                     "products)")
      ->check(CLI::Range(1e-12, 1.0))
      ->default_val(options->tol);
  command.add_option("--trials", options->trials, "Correctness trials, each with fresh inputs")
      ->check(CLI::Range(1, 1000))
      ->default_val(options->trials);
  command.add_option("--seed", options->seed, "Seed of the first trial's inputs")->default_val(options->seed);
  command.add_option("--timing-trials", options->min_timing_trials, "Timed runs (at least)")
      ->check(CLI::Range(1, 100000))
      ->default_val(options->min_timing_trials);
  command.add_option("--timing-budget", options->timing_budget_s, "Stop timing after this many seconds")
      ->check(CLI::PositiveNumber)
      ->default_val(options->timing_budget_s);
  command
      .add_option("--baseline-timeout", options->baseline_timeout_s,
                  "Wall-clock limit for timing eager and torch.compile, seconds")
      ->check(CLI::PositiveNumber)
      ->default_val(options->baseline_timeout_s);
  command
      .add_option_function<std::string>(
          "--baselines", [options](const std::string& text) { harness::ParseBaselineNames(SplitCommas(text), options); },
          "PyTorch baselines, timed eager and under torch.compile: default (PyTorch's defaults), strict (TF32 off), "
          "tf32 (TF32 on), and max-autotune to add that torch.compile mode")
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              harness::EvalOptions probe;
              harness::ParseBaselineNames(SplitCommas(text), &probe);
            } catch (const EggError& error) {
              return std::string(error.what());
            }
            return std::string();
          },
          "NAMES"))
      ->default_str("default,strict,tf32");
  command.add_flag("--no-timing{false}", options->timing, "Check correctness only");
  command.add_flag("--no-cache{false}", options->use_cache,
                   "Evaluate again even if the store has the result");
}

bool CudaVisible(const EnvMap& env) {
  if (auto visible = env.find("CUDA_VISIBLE_DEVICES"); visible != env.end()) {
    if (visible->second.empty() || visible->second == "-1") {
      return false;
    }
  }
  std::error_code error;
  return std::filesystem::exists("/dev/nvidiactl", error) || std::filesystem::exists("/dev/nvidia0", error);
}

std::string ResolveDevice(const std::string& flag, const EnvMap& env) {
  if (flag == "cuda" || flag == "cpu") {
    return flag;
  }
  return CudaVisible(env) ? "cuda" : "cpu";
}

std::unique_ptr<harness::PythonWorker> MakeWorker(const GlobalOptions& options, const std::string& device,
                                                  int gpu_index, const EnvMap& env) {
  harness::WorkerConfig config;
  config.root = EggRoot(env);
  if (!FileExists(config.root + "/python/egg_worker/__main__.py")) {
    throw ConfigError("cannot find the worker package under " + config.root +
                      "/python (set EGG_ROOT to the repository root)");
  }
  config.python = WorkerPython(env, options.python);
  config.log_dir = EggHome(env) + "/logs";
  EnvMap extra = {{"PYTHONPATH", config.root + "/python"}, {"PYTHONUNBUFFERED", "1"}};
  if (device == "cpu") {
    extra["TRITON_INTERPRET"] = "1";
    extra["CUDA_VISIBLE_DEVICES"] = "";
  } else {
    extra["TRITON_INTERPRET"] = "0";
    extra["CUDA_VISIBLE_DEVICES"] = PhysicalGpu(gpu_index, env);
    if (!options.gpu_lock.empty()) {
      extra["EGG_GPU_LOCK"] = options.gpu_lock;  // python/egg_worker/gpulock.py
    }
  }
  config.env = WorkerEnvironment(env, extra);
  return std::make_unique<harness::PythonWorker>(std::move(config));
}

std::unique_ptr<store::Store> OpenStore(const GlobalOptions& options, const EnvMap& env) {
  if (options.no_store) {
    return nullptr;
  }
  const std::string path = options.db_path.empty() ? EggHome(env) + "/egg.db" : options.db_path;
  return store::Store::Open(path);
}

HarnessSession OpenHarnessSession(const GlobalOptions& globals, const std::string& device_flag,
                                  harness::EvalOptions* options) {
  const EnvMap env = CurrentEnvironment();
  options->device = ResolveDevice(device_flag, env);
  HarnessSession session;
  session.store = OpenStore(globals, env);
  session.worker = MakeWorker(globals, options->device, options->gpu_index, env);
  return session;
}

}  // namespace egg::cli
