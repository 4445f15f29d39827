// What every subcommand shares: global flags, device resolution, and construction of the worker and the
// store from them. Throws UsageError/ConfigError for bad settings.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/environment.h"
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
  std::string gpu_lock;  // not a flag: egg bench names the lock file of a GPU that several workers share
  std::vector<std::string>
      command_line;  // not a flag: the arguments egg was given (egg bench --ray forwards them)
};

void AddGlobalOptions(CLI::App& app, GlobalOptions* options);
// Adds --device, --gpu, --timeout, --tol, --trials, --seed, --no-cache ... to a subcommand.
void AddEvalOptions(CLI::App& command, harness::EvalOptions* options, std::string* device_flag);

// "auto" picks cuda when an NVIDIA GPU is visible, else cpu.
std::string ResolveDevice(const std::string& flag, const EnvMap& env);
bool CudaVisible(const EnvMap& env);

std::unique_ptr<harness::PythonWorker> MakeWorker(const GlobalOptions& options, const std::string& device,
                                                  int gpu_index, const EnvMap& env);
std::unique_ptr<store::Store> OpenStore(const GlobalOptions& options, const EnvMap& env);

// What a subcommand that evaluates needs: the store and one worker for the resolved device. Resolves
// `device_flag` into options->device.
struct HarnessSession {
  std::unique_ptr<store::Store> store;
  std::unique_ptr<harness::PythonWorker> worker;
};
HarnessSession OpenHarnessSession(const GlobalOptions& globals, const std::string& device_flag,
                                  harness::EvalOptions* options);

}  // namespace egg::cli
