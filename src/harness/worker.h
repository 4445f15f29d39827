// One long-lived Python worker process (python -m egg_worker) and the channel to it.
//
// Call() sends one request frame and waits for its response under a hard wall-clock limit and, if set, a
// limit on the memory of the worker's processes; past either the worker's whole process group gets SIGKILL. A
// dead or killed worker is started afresh by the next Call(). With a sandbox the worker runs inside
// bubblewrap and the files a request names are staged into the sandbox's inbox. A Worker is used from one
// thread at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "harness/sandbox.h"

namespace egg::harness {

enum class CallOutcome { kOk, kTimeout, kCrashed, kProtocolError };

struct CallResult {
  CallOutcome outcome = CallOutcome::kProtocolError;
  Json response;       // the response frame when outcome is kOk
  std::string detail;  // why it was not kOk: signal or exit code, and the tail of the worker's stderr
};

// The channel the rest of egg talks to; fakes implement it in tests.
class WorkerChannel {
 public:
  virtual ~WorkerChannel() = default;
  // `request` gets an "id" added. Never throws for worker failures: they are outcomes.
  virtual CallResult Call(Json request, double timeout_s) = 0;
  // Kills the worker (if running); the next Call starts a fresh one.
  virtual void Restart() = 0;
  // The hello response (versions, device) of the running worker, starting one if needed. Throws
  // WorkerError when no worker can be started.
  virtual const Json& Hello() = 0;
};

struct WorkerConfig {
  std::string python;                // interpreter that has torch and triton
  std::string root;                  // repository root (holds python/egg_worker)
  std::vector<std::string> env;      // complete, secret-free environment ("NAME=value")
  std::string log_dir;               // the worker's stderr goes to a file here
  double startup_timeout_s = 300.0;  // for spawn + hello (torch import, CUDA init)
  std::optional<SandboxSpec> sandbox;  // run inside this sandbox (its folders are removed with the worker)
  uint64_t memory_limit_bytes = 0;  // kill past this much anonymous memory in the worker's processes; 0: none
};

class PythonWorker : public WorkerChannel {
 public:
  explicit PythonWorker(WorkerConfig config);
  ~PythonWorker() override;
  PythonWorker(const PythonWorker&) = delete;
  PythonWorker& operator=(const PythonWorker&) = delete;

  CallResult Call(Json request, double timeout_s) override;
  void Restart() override;

  const Json& Hello() override;
  pid_t Pid() const { return pid_; }
  const std::string& LogPath() const { return log_path_; }

 private:
  void Start();
  void Kill();
  CallResult Exchange(const Json& request, double timeout_s);
  // Waits until the worker answers or the deadline passes; false (the worker killed, *why set) when its
  // processes went over the memory limit first.
  bool AwaitAnswer(std::chrono::steady_clock::time_point deadline, std::string* why);
  std::vector<std::string> CommandLine() const;
  std::string DescribeDeath();
  std::string StderrTail() const;

  WorkerConfig config_;
  pid_t pid_ = -1;
  int to_worker_ = -1;
  int from_worker_ = -1;
  int next_id_ = 1;
  Json hello_;
  std::string log_path_;
};

std::string DescribeOutcome(CallOutcome outcome);

}  // namespace egg::harness
