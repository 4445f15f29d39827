#include "cli/context.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
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

constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;
constexpr uint64_t kDefaultMemoryShare = 2;  // a worker may hold up to 1/2 of the machine's memory

uint64_t MemoryLimitBytes(double limit_gib) {
  if (limit_gib >= 0) {
    return static_cast<uint64_t>(limit_gib * kBytesPerGib);
  }
  const auto pages = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES));
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / kDefaultMemoryShare;
}

// What a sandboxed worker writes besides its scratch: the GPU lock file of egg bench and EGG_WORKER_PROFILE's
// folder (python/egg_worker/server.py), created here so that they can be mounted.
std::vector<std::string> WritableExtras(const GlobalOptions& options, const EnvMap& env) {
  std::vector<std::string> paths;
  if (!options.gpu_lock.empty()) {
    const std::string lock = AbsolutePath(options.gpu_lock);
    CreateDirectories(std::filesystem::path(lock).parent_path().string());
    if (!FileExists(lock)) {
      WriteFileAtomic(lock, "");
    }
    paths.push_back(lock);
  }
  if (auto trace = LookupEnv(env, "EGG_WORKER_PROFILE")) {
    CreateDirectories(*trace);
    paths.push_back(AbsolutePath(*trace));
  }
  return paths;
}

bool WantsSandbox(const std::string& mode, SandboxPolicy policy) {
  if (mode == "on" || mode == "off") {
    return mode == "on";
  }
  return policy != SandboxPolicy::kOptional;
}

// Prepares the sandbox the options and policy ask for into `config`; throws ConfigError when it is required
// and cannot start, warns once on stderr when it is only preferred.
SandboxState ChooseSandbox(const GlobalOptions& options, SandboxPolicy policy, const EnvMap& env, bool gpu,
                           harness::WorkerConfig* config) {
  if (!WantsSandbox(options.sandbox, policy)) {
    return {false, options.sandbox == "off"
                       ? "--no-sandbox: candidates ran without the sandbox"
                       : "expert backend: egg wrote the candidates; they ran without the "
                         "sandbox (--sandbox runs them in it)"};
  }
  if (!FindExecutable(config->python)) {  // the worker's own start error, not the sandbox's
    throw WorkerError("the worker (" + config->python + " -m egg_worker) did not start: no such interpreter");
  }
  harness::SandboxSetup setup;
  setup.bwrap = options.bwrap.empty() ? LookupEnv(env, "EGG_BWRAP").value_or("") : options.bwrap;
  setup.python = config->python;
  setup.root = config->root;
  setup.egg_home = EggHome(env);
  setup.home = LookupEnv(env, "HOME").value_or("/root");
  setup.gpu = gpu;
  setup.env = config->env;
  setup.writable = WritableExtras(options, env);
  harness::PreparedSandbox prepared = harness::PrepareSandbox(setup);
  if (prepared.spec) {
    config->sandbox = std::move(prepared.spec);
    return {true, "candidates ran in the bubblewrap sandbox (" + config->sandbox->bwrap + ")"};
  }
  if (options.sandbox == "on" || policy == SandboxPolicy::kRequired) {
    throw ConfigError("the sandbox cannot start: " + prepared.problem +
                      "; pass --no-sandbox to run candidates without it");
  }
  fmt::print(stderr, "egg: warning: running candidates without a sandbox: {} (--no-sandbox silences this)\n",
             prepared.problem);
  return {false, "the sandbox could not start: " + prepared.problem};
}

}  // namespace

void AddGlobalOptions(CLI::App& app, GlobalOptions* options) {
  app.add_option("--db", options->db_path, "SQLite store (default: $EGG_HOME/egg.db)");
  app.add_option("--python", options->python,
                 "Python interpreter with torch and triton for the worker (default: $EGG_PYTHON, then "
                 ".venv/bin/python)");
  app.add_flag("--no-store", options->no_store, "Do not read or write the store");
  app.add_flag("--sandbox{on},--no-sandbox{off}", options->sandbox,
               "Run candidates in the bubblewrap sandbox, or not (default: on for eval, profile and the LLM "
               "backend, off for the expert backend)");
  app.add_option("--bwrap", options->bwrap,
                 "bubblewrap binary for the sandbox (default: $EGG_BWRAP, then PATH)");
  app.add_option(
      "--memory-limit", options->memory_limit_gib,
      "Kill a worker whose processes hold more memory, GiB (default: half the machine's; 0: none)");
}

void AddDynamicOptions(CLI::App& command, harness::EvalOptions* options) {
  // --dynamic and --max-size in either order: each one's callback parses both as far as they are given
  struct Given {
    std::string dims;
    std::vector<int64_t> maxima;
  };
  auto given = std::make_shared<Given>();
  const auto resolve = [options, given]() {
    if (given->dims.empty()) {
      return;
    }
    auto parsed = harness::ParseDynamicSizes(given->dims, given->maxima);
    if (auto* problem = std::get_if<std::string>(&parsed)) {
      throw CLI::ValidationError("--dynamic", *problem);
    }
    options->dynamic = std::get<std::vector<harness::DynamicSize>>(parsed);
  };
  CLI::Option* dynamic = command.add_option_function<std::string>(
      "--dynamic",
      [given, resolve](const std::string& value) {
        given->dims = value;
        resolve();
      },
      "batch: one compiled module for every batch size up to --max-size (dim 0 of every tensor input a "
      "runtime "
      "size), checked at several sizes; dimN: the same for dim N of every tensor input that has one (dim1: a "
      "sequence length); several, comma-separated (batch,dim1): each its own runtime size");
  command
      .add_option_function<std::vector<int64_t>>(
          "--max-size,--max-batch",
          [given, resolve](const std::vector<int64_t>& value) {
            given->maxima = value;
            resolve();
          },
          "With --dynamic: the largest size of each dynamic dimension the kernels hold for, in --dynamic's "
          "order (default: the task's own)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->needs(dynamic);
}

void AddEvalOptions(CLI::App& command, harness::EvalOptions* options, std::string* device_flag) {
  AddDynamicOptions(command, options);
  command.add_option("--device", *device_flag, "cuda, cpu (Triton interpreter), or auto")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->default_val("auto");
  command.add_option("--gpu", options->gpu_index, "GPU index among the visible ones")
      ->check(CLI::NonNegativeNumber)
      ->default_val(0);
  command.add_option("--timeout", options->timeout_s, "Wall-clock limit per evaluation, seconds")
      ->check(CLI::PositiveNumber)
      ->default_val(options->timeout_s);
  CLI::Option* tol =
      command
          .add_option(
              "--tol", options->tol,
              "atol = rtol and relative-L2 tolerance (default 1e-4, KernelBench's float32 rule, and 1e-2 "
              "with --precision bf16 or fp16; 1e-2 in fp32 allows TF32-level products)")
          ->check(CLI::Range(1e-12, 1.0))
          ->default_val(options->tol);
  command
      .add_option("--precision", options->precision,
                  "fp32, bf16 or fp16: KernelBench's precision, the task's floating inputs and the model's "
                  "parameters and buffers cast to it (baselines too)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->default_val(options->precision);
  // KernelBench's tolerance follows the precision unless --tol was given.
  command.parse_complete_callback([options, tol]() {
    if (tol->count() == 0) {
      options->tol = harness::DefaultTolerance(options->precision);
    }
  });
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
  command.add_flag("--variants", options->variants,
                   "Also compare ModelNew and Model built from other init arguments and with their float "
                   "attributes changed after construction (a value baked into a kernel fails)");
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
                                                  int gpu_index, const EnvMap& env, SandboxPolicy policy,
                                                  SandboxState* sandbox) {
  harness::WorkerConfig config;
  config.root = EggRoot(env);
  if (!FileExists(config.root + "/python/egg_worker/__main__.py")) {
    throw ConfigError("cannot find the worker package under " + config.root +
                      "/python (set EGG_ROOT to the repository root)");
  }
  config.python = WorkerPython(env, options.python);
  config.log_dir = EggHome(env) + "/logs";
  config.memory_limit_bytes = MemoryLimitBytes(options.memory_limit_gib);
  EnvMap extra = {{"PYTHONPATH", config.root + "/python"}, {"PYTHONUNBUFFERED", "1"}};
  if (device == "cpu") {
    extra["TRITON_INTERPRET"] = "1";
    extra["CUDA_VISIBLE_DEVICES"] = "";
  } else {
    extra["TRITON_INTERPRET"] = "0";
    extra["CUDA_VISIBLE_DEVICES"] = PhysicalGpu(gpu_index, env);
    if (!options.gpu_lock.empty()) {
      extra["EGG_GPU_LOCK"] = AbsolutePath(options.gpu_lock);  // python/egg_worker/gpulock.py
    }
  }
  config.env = WorkerEnvironment(env, extra);
  *sandbox = ChooseSandbox(options, policy, env, device != "cpu", &config);
  if (config.sandbox) {
    extra.merge(harness::SandboxEnvironment(*config.sandbox));
    config.env = WorkerEnvironment(env, extra);
  }
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
                                  harness::EvalOptions* options, SandboxPolicy policy) {
  const EnvMap env = CurrentEnvironment();
  options->device = ResolveDevice(device_flag, env);
  HarnessSession session;
  session.store = OpenStore(globals, env);
  session.worker = MakeWorker(globals, options->device, options->gpu_index, env, policy, &session.sandbox);
  return session;
}

}  // namespace egg::cli
