#include "harness/worker.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "harness/frame.h"

namespace egg::harness {
namespace {

constexpr size_t kStderrTailBytes = 1500;
constexpr int kChildExecFailed = 127;
constexpr auto kReapPollInterval = std::chrono::milliseconds(10);
constexpr auto kReapPatience = std::chrono::seconds(5);
constexpr auto kMemoryCheckInterval = std::chrono::milliseconds(200);
constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;

std::string SignalName(int signal_number) {
  const char* description = strsignal(signal_number);
  return "signal " + std::to_string(signal_number) + " (" + (description ? description : "?") + ")";
}

[[noreturn]] void ExecWorker(const WorkerConfig& config, std::vector<std::string> args, int stdin_fd,
                             int stdout_fd, int log_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  setpgid(0, 0);
  dup2(stdin_fd, STDIN_FILENO);
  dup2(stdout_fd, STDOUT_FILENO);
  dup2(log_fd, STDERR_FILENO);
  close_range(STDERR_FILENO + 1, ~0U,
              0);  // nothing else of egg's (store, LLM connections) reaches a candidate
  if (chdir(config.root.c_str()) != 0) {
    _exit(kChildExecFailed);
  }
  std::vector<char*> argv;
  for (auto& arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  std::vector<std::string> env = config.env;
  std::vector<char*> envp;
  for (auto& entry : env) {
    envp.push_back(entry.data());
  }
  envp.push_back(nullptr);
  execvpe(argv[0], argv.data(), envp.data());
  _exit(kChildExecFailed);
}

std::string Gib(uint64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / kBytesPerGib);
}

}  // namespace

std::string DescribeOutcome(CallOutcome outcome) {
  switch (outcome) {
    case CallOutcome::kOk:
      return "ok";
    case CallOutcome::kTimeout:
      return "timeout";
    case CallOutcome::kCrashed:
      return "crashed";
    case CallOutcome::kProtocolError:
      return "protocol error";
  }
  return "unknown";
}

PythonWorker::PythonWorker(WorkerConfig config) : config_(std::move(config)) {}

PythonWorker::~PythonWorker() {
  if (pid_ > 0) {
    std::string ignored;
    WriteFrame(to_worker_, R"({"id":0,"op":"shutdown"})", &ignored);
    Kill();
  }
  if (config_.sandbox) {
    RemoveSandboxFolders(*config_.sandbox);
  }
}

std::vector<std::string> PythonWorker::CommandLine() const {
  std::vector<std::string> args;
  if (config_.sandbox) {
    args = BwrapArguments(*config_.sandbox, RealHost());
  }
  args.insert(args.end(), {config_.python, "-u", "-m", "egg_worker"});
  return args;
}

void PythonWorker::Start() {
  CreateDirectories(config_.log_dir);
  if (config_.sandbox) {
    ResetScratch(*config_.sandbox);
  }
  const std::vector<std::string> command = CommandLine();
  std::array<int, 2> request_pipe{};
  std::array<int, 2> response_pipe{};
  if (pipe2(request_pipe.data(), O_CLOEXEC) != 0 || pipe2(response_pipe.data(), O_CLOEXEC) != 0) {
    throw WorkerError(std::string("cannot create pipes: ") + std::strerror(errno));
  }
  log_path_ = config_.log_dir + "/worker-" + std::to_string(getpid()) + "-" +
              std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ".log";
  const int log_fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    throw WorkerError("cannot open worker log " + log_path_);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    throw WorkerError(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ExecWorker(config_, command, request_pipe[0], response_pipe[1], log_fd);
  }
  setpgid(pid, pid);
  close(request_pipe[0]);
  close(response_pipe[1]);
  close(log_fd);
  pid_ = pid;
  to_worker_ = request_pipe[1];
  from_worker_ = response_pipe[0];
  signal(SIGPIPE, SIG_IGN);
  CallResult hello = Exchange(Json{{"op", "hello"}}, config_.startup_timeout_s);
  if (hello.outcome != CallOutcome::kOk || !hello.response.value("ok", false)) {
    const std::string why =
        hello.outcome == CallOutcome::kOk ? hello.response.value("error", "") : hello.detail;
    Kill();
    throw WorkerError("the worker (" + config_.python + " -m egg_worker) did not start: " + why);
  }
  hello_ = hello.response;
}

void PythonWorker::Kill() {
  if (pid_ <= 0) {
    return;
  }
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  close(to_worker_);
  close(from_worker_);
  pid_ = -1;
  to_worker_ = -1;
  from_worker_ = -1;
}

void PythonWorker::Restart() { Kill(); }

const Json& PythonWorker::Hello() {
  if (pid_ <= 0) {
    Start();
  }
  return hello_;
}

std::string PythonWorker::StderrTail() const {
  std::ifstream log(log_path_, std::ios::binary);
  std::ostringstream contents;
  contents << log.rdbuf();
  std::string text = contents.str();
  if (text.size() > kStderrTailBytes) {
    text = text.substr(text.size() - kStderrTailBytes);
  }
  for (char& c : text) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  return text;
}

std::string PythonWorker::DescribeDeath() {
  int status = 0;
  pid_t reaped = 0;
  const auto give_up = std::chrono::steady_clock::now() + kReapPatience;
  while ((reaped = waitpid(pid_, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < give_up) {
    usleep(static_cast<useconds_t>(std::chrono::microseconds(kReapPollInterval).count()));
  }
  std::string how = "worker closed its pipe";
  if (reaped == pid_) {
    const auto sandboxed_signal =
        config_.sandbox && WIFEXITED(status) ? SignalFromBwrapExit(WEXITSTATUS(status)) : std::nullopt;
    if (WIFSIGNALED(status) || sandboxed_signal) {
      how = "worker died: " + SignalName(sandboxed_signal ? *sandboxed_signal : WTERMSIG(status));
    } else if (WIFEXITED(status)) {
      how = "worker exited with code " + std::to_string(WEXITSTATUS(status));
    }
    kill(-pid_, SIGKILL);
    close(to_worker_);
    close(from_worker_);
    pid_ = -1;
    to_worker_ = from_worker_ = -1;
  } else {
    Kill();
  }
  const std::string tail = StderrTail();
  return tail.empty() ? how : how + "; stderr: " + tail;
}

CallResult PythonWorker::Exchange(const Json& request, double timeout_s) {
  CallResult result;
  Json framed = request;
  const int id = next_id_++;
  framed["id"] = id;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
  std::string error;
  if (!WriteFrame(to_worker_, framed.dump(), &error)) {
    result.outcome = CallOutcome::kCrashed;
    result.detail = DescribeDeath();
    return result;
  }
  std::string over_limit;
  if (!AwaitAnswer(deadline, &over_limit)) {
    result.outcome = CallOutcome::kCrashed;
    result.detail = over_limit;
    return result;
  }
  FrameRead read = ReadFrame(from_worker_, deadline);
  switch (read.status) {
    case ReadStatus::kOk:
      break;
    case ReadStatus::kTimeout:
      Kill();
      result.outcome = CallOutcome::kTimeout;
      result.detail = "no answer within " + std::to_string(static_cast<int>(timeout_s)) +
                      " s; the worker was killed (SIGKILL)";
      return result;
    case ReadStatus::kEof:
      result.outcome = CallOutcome::kCrashed;
      result.detail = DescribeDeath();
      return result;
    case ReadStatus::kError:
      Kill();
      result.outcome = CallOutcome::kProtocolError;
      result.detail = read.error;
      return result;
  }
  result.response = Json::parse(read.payload, nullptr, /*allow_exceptions=*/false);
  if (result.response.is_discarded() || !result.response.is_object() ||
      result.response.value("id", -1) != id) {
    Kill();
    result.outcome = CallOutcome::kProtocolError;
    result.detail = "malformed or out-of-order response from the worker";
    return result;
  }
  result.outcome = CallOutcome::kOk;
  return result;
}

bool PythonWorker::AwaitAnswer(std::chrono::steady_clock::time_point deadline, std::string* why) {
  if (config_.memory_limit_bytes == 0) {
    return true;
  }
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd descriptor{from_worker_, POLLIN, 0};
    if (poll(&descriptor, 1, static_cast<int>(kMemoryCheckInterval.count())) != 0) {
      return true;  // an answer, end of file or an error: ReadFrame tells which
    }
    const uint64_t used = ProcessTreeAnonBytes(pid_);
    if (used > config_.memory_limit_bytes) {
      Kill();
      *why = "the worker's processes held " + Gib(used) + " of memory, over the limit of " +
             Gib(config_.memory_limit_bytes) + " (--memory-limit); the worker was killed (SIGKILL)";
      return false;
    }
  }
  return true;
}

CallResult PythonWorker::Call(Json request, double timeout_s) {
  if (pid_ <= 0) {
    Start();
  }
  if (config_.sandbox) {
    StageRequestFiles(&request, config_.sandbox->inbox);
  }
  return Exchange(request, timeout_s);
}

}  // namespace egg::harness
