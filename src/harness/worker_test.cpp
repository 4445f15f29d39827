#include "harness/worker.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/environment.h"

namespace egg::harness {
namespace {

// A stand-in worker speaking the real framing, so these tests exercise only the C++ side: spawning, the
// deadline, SIGKILL, death detection and restart.
constexpr const char* kFakeWorker = R"PY(
import json, os, signal, struct, sys, time
out = os.fdopen(os.dup(1), "wb"); os.dup2(2, 1)
def send(obj):
    data = json.dumps(obj).encode(); out.write(struct.pack(">I", len(data)) + data); out.flush()
while True:
    header = sys.stdin.buffer.read(4)
    if len(header) < 4: break
    req = json.loads(sys.stdin.buffer.read(struct.unpack(">I", header)[0]))
    op = req["op"]
    if op == "hello": send({"id": req["id"], "ok": True, "pid": os.getpid(), "device": {"name": "fake"}})
    elif op == "echo": print("noise on stdout"); send({"id": req["id"], "ok": True, "value": req["value"]})
    elif op == "hang": time.sleep(3600)
    elif op == "crash": sys.stderr.write("about to crash\n"); sys.stderr.flush(); os.kill(os.getpid(), signal.SIGSEGV)
    elif op == "exit": os._exit(3)
    elif op == "garbage": out.write(b"\x00\x00\x00\x03abc"); out.flush()
    elif op == "shutdown": send({"id": req["id"], "ok": True}); break
)PY";

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("egg-worker-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(root_ / "python" / "egg_worker");
    std::ofstream(root_ / "python" / "egg_worker" / "__init__.py") << "";
    std::ofstream(root_ / "python" / "egg_worker" / "__main__.py") << kFakeWorker;
    WorkerConfig config;
    config.python = "python3";
    config.root = root_.string();
    config.log_dir = (root_ / "logs").string();
    config.startup_timeout_s = 30;
    config.env = WorkerEnvironment(CurrentEnvironment(), {{"PYTHONPATH", (root_ / "python").string()}});
    worker_ = std::make_unique<PythonWorker>(config);
  }
  void TearDown() override {
    worker_.reset();
    std::filesystem::remove_all(root_);
  }

  std::filesystem::path root_;
  std::unique_ptr<PythonWorker> worker_;
};

TEST_F(WorkerTest, AnswersRequestsDespiteStdoutNoise) {
  EXPECT_EQ(worker_->Hello()["device"]["name"], "fake");
  CallResult result = worker_->Call(Json{{"op", "echo"}, {"value", 7}}, 10);
  ASSERT_EQ(result.outcome, CallOutcome::kOk) << result.detail;
  EXPECT_EQ(result.response["value"], 7);
}

TEST_F(WorkerTest, HangIsKilledAtTheDeadlineAndWorkerIsReplaced) {
  const pid_t first_pid = (worker_->Hello(), worker_->Pid());
  const auto start = std::chrono::steady_clock::now();
  CallResult hang = worker_->Call(Json{{"op", "hang"}}, 1.0);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(hang.outcome, CallOutcome::kTimeout);
  EXPECT_LT(elapsed, std::chrono::seconds(5));
  EXPECT_NE(kill(first_pid, 0), 0) << "the hung worker must be dead";
  CallResult after = worker_->Call(Json{{"op", "echo"}, {"value", 1}}, 10);
  ASSERT_EQ(after.outcome, CallOutcome::kOk);
  EXPECT_NE(worker_->Pid(), first_pid);
}

TEST_F(WorkerTest, CrashReportsSignalAndStderr) {
  CallResult crash = worker_->Call(Json{{"op", "crash"}}, 10);
  EXPECT_EQ(crash.outcome, CallOutcome::kCrashed);
  EXPECT_NE(crash.detail.find("signal 11"), std::string::npos) << crash.detail;
  EXPECT_NE(crash.detail.find("about to crash"), std::string::npos) << crash.detail;
  EXPECT_EQ(worker_->Call(Json{{"op", "echo"}, {"value", 2}}, 10).outcome, CallOutcome::kOk);
}

TEST_F(WorkerTest, ExitReportsCode) {
  CallResult exited = worker_->Call(Json{{"op", "exit"}}, 10);
  EXPECT_EQ(exited.outcome, CallOutcome::kCrashed);
  EXPECT_NE(exited.detail.find("code 3"), std::string::npos) << exited.detail;
}

TEST_F(WorkerTest, GarbageResponseIsProtocolError) {
  CallResult garbage = worker_->Call(Json{{"op", "garbage"}}, 10);
  EXPECT_EQ(garbage.outcome, CallOutcome::kProtocolError);
  EXPECT_EQ(worker_->Call(Json{{"op", "echo"}, {"value", 3}}, 10).outcome, CallOutcome::kOk);
}

}  // namespace
}  // namespace egg::harness
