// What every subcommand shares: global flags, device resolution, and construction of the worker and the
// store from them. Throws UsageError/ConfigError for bad settings.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/environment.h"
#include "common/json.h"
#include "harness/eval_types.h"
#include "harness/worker.h"
#include "store/store.h"

namespace CLI {
class App;
}

namespace egg::cli {

struct GlobalOptions {
  std::string db_path;  // empty: $EGG_HOME/egg.db
  std::string python;   // empty: WorkerPython()
  bool no_store = false;
  std::string sandbox = "auto";  // --sandbox: "on", --no-sandbox: "off", else the command's SandboxPolicy
  std::string bwrap;             // --bwrap, else $EGG_BWRAP, else bwrap from PATH
  double memory_limit_gib = -1;  // --memory-limit; negative: half the machine's memory, 0: none
  std::string gpu_lock;  // not a flag: egg bench names the lock file of a GPU that several workers share
  std::vector<std::string>
      command_line;  // not a flag: the arguments egg was given (egg bench --ray forwards them)
};

// Whether a command's candidates run in the sandbox (docs/harness.md, "Sandbox") when neither --sandbox nor
// --no-sandbox is given.
enum class SandboxPolicy {
  kPreferred,  // egg eval and egg profile: sandboxed; where it cannot start, one warning and no sandbox
  kRequired,   // the LLM and hybrid backends: sandboxed; where it cannot start, a run-ending ConfigError
  kOptional,   // the expert backend (egg wrote its candidates): no sandbox
};

// The LLM and hybrid backends write untrusted code; the expert backend's candidates are egg's own.
inline SandboxPolicy PolicyForBackend(const std::string& backend) {
  return backend == "expert" ? SandboxPolicy::kOptional : SandboxPolicy::kRequired;
}

// Whether the session's worker is sandboxed, and why (report.json states it).
struct SandboxState {
  bool enabled = false;
  std::string note;
  Json ToJson() const { return Json{{"enabled", enabled}, {"note", note}}; }
};

void AddGlobalOptions(CLI::App& app, GlobalOptions* options);
// Adds --device, --gpu, --timeout, --tol, --trials, --seed, --no-cache ... to a subcommand.
void AddEvalOptions(CLI::App& command, harness::EvalOptions* options, std::string* device_flag);
// --dynamic and --max-size (EvalOptions::dynamic).
void AddDynamicOptions(CLI::App& command, harness::EvalOptions* options);

// "auto" picks cuda when an NVIDIA GPU is visible, else cpu.
std::string ResolveDevice(const std::string& flag, const EnvMap& env);
bool CudaVisible(const EnvMap& env);

// Throws ConfigError when the policy (or --sandbox) needs a sandbox that cannot start.
std::unique_ptr<harness::PythonWorker> MakeWorker(const GlobalOptions& options, const std::string& device,
                                                  int gpu_index, const EnvMap& env, SandboxPolicy policy,
                                                  SandboxState* sandbox);
std::unique_ptr<store::Store> OpenStore(const GlobalOptions& options, const EnvMap& env);

// What a subcommand that evaluates needs: the store and one worker for the resolved device. Resolves
// `device_flag` into options->device.
struct HarnessSession {
  std::unique_ptr<store::Store> store;
  std::unique_ptr<harness::PythonWorker> worker;
  SandboxState sandbox;
};
HarnessSession OpenHarnessSession(const GlobalOptions& globals, const std::string& device_flag,
                                  harness::EvalOptions* options, SandboxPolicy policy);

}  // namespace egg::cli
