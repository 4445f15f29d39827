// Capturing a task's forward: the request sent to the worker, and every way a capture fails coming back as a
// one-line problem rather than an exception.
#include "expert/ir/capture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using harness::CallOutcome;
using harness::CallResult;
using ::testing::HasSubstr;

// A worker that answers from a script and records what it was asked.
class ScriptedWorker : public harness::WorkerChannel {
 public:
  CallResult Call(Json request, double timeout_s) override {
    requests.push_back(request);
    timeouts.push_back(timeout_s);
    if (script.empty()) {
      ADD_FAILURE() << "unexpected call " << request.dump();
      return {};
    }
    CallResult next = script.front();
    script.pop_front();
    return next;
  }
  void Restart() override {}
  const Json& Hello() override { return hello; }

  std::deque<CallResult> script;
  std::vector<Json> requests;
  std::vector<double> timeouts;
  Json hello = Json::object();
};

CallResult Answer(const Json& response) { return {CallOutcome::kOk, response, ""}; }

CallResult Captured(const Json& graph) {
  return Answer({{"ok", true}, {"result", {{"status", "ok"}, {"graph", graph}}}});
}

TEST(CaptureTest, AsksTheWorkerForTheTaskWithItsSeedsAndDevice) {
  ScriptedWorker worker;
  worker.script.push_back(Captured(testing::FixtureJson("level1_23_Softmax")));
  CaptureOptions options;
  options.device = "cuda";
  options.seed = 7;
  options.init_seed = 9;
  options.timeout_s = 12.5;
  const ParsedGraph parsed = CaptureGraph(worker, "tasks/softmax.py", options);
  ASSERT_TRUE(parsed.graph.has_value()) << parsed.problem;
  EXPECT_FALSE(parsed.graph->nodes.empty());
  ASSERT_EQ(worker.requests.size(), 1U);
  const Json& request = worker.requests[0];
  EXPECT_EQ(request["op"], "capture");
  EXPECT_EQ(request["task"], "tasks/softmax.py");
  EXPECT_EQ(request["device"], "cuda");
  EXPECT_EQ(request["seed"], 7);
  EXPECT_EQ(request["init_seed"], 9);
  EXPECT_FALSE(request.contains("precision")) << "fp32 is the worker's default and is not sent";
  EXPECT_EQ(worker.timeouts[0], 12.5);
}

TEST(CaptureTest, AHalfPrecisionIsSentToTheWorker) {
  ScriptedWorker worker;
  worker.script.push_back(
      Captured(testing::Retyped(testing::FixtureJson("level1_23_Softmax"), "float32", "bfloat16")));
  CaptureOptions options;
  options.precision = "bf16";
  const ParsedGraph parsed = CaptureGraph(worker, "t.py", options);
  ASSERT_TRUE(parsed.graph.has_value()) << parsed.problem;
  EXPECT_EQ(GraphPrecision(*parsed.graph), "bf16");
  ASSERT_EQ(worker.requests.size(), 1U);
  EXPECT_EQ(worker.requests[0]["precision"], "bf16");
  EXPECT_EQ(worker.timeouts[0], kCaptureTimeoutSeconds) << "the default limit";
}

TEST(CaptureTest, AWorkerThatDidNotAnswerIsAProblem) {
  ScriptedWorker worker;
  worker.script.push_back({CallOutcome::kTimeout, Json(), "no answer in 600 s"});
  const ParsedGraph parsed = CaptureGraph(worker, "t.py", {});
  EXPECT_FALSE(parsed.graph.has_value());
  EXPECT_EQ(parsed.problem, "capture did not finish: no answer in 600 s");
}

TEST(CaptureTest, AFailedRequestCarriesTheWorkersError) {
  ScriptedWorker worker;
  worker.script.push_back(Answer({{"ok", false}, {"error", "ImportError: no module named foo"}}));
  worker.script.push_back(Answer({{"ok", false}}));
  ParsedGraph parsed = CaptureGraph(worker, "t.py", {});
  EXPECT_FALSE(parsed.graph.has_value());
  EXPECT_EQ(parsed.problem, "capture failed: ImportError: no module named foo");
  parsed = CaptureGraph(worker, "t.py", {});
  EXPECT_FALSE(parsed.graph.has_value());
  EXPECT_EQ(parsed.problem, "capture failed: unknown error");
}

TEST(CaptureTest, ATaskTheWorkerCannotCaptureGivesItsReason) {
  ScriptedWorker worker;
  worker.script.push_back(Answer(
      {{"ok", true}, {"result", {{"status", "unsupported"}, {"reason", "data-dependent control flow"}}}}));
  worker.script.push_back(Answer({{"ok", true}, {"result", {{"status", "unsupported"}}}}));
  worker.script.push_back(Answer({{"ok", true}}));
  ParsedGraph parsed = CaptureGraph(worker, "t.py", {});
  EXPECT_FALSE(parsed.graph.has_value());
  EXPECT_EQ(parsed.problem, "data-dependent control flow");
  parsed = CaptureGraph(worker, "t.py", {});
  EXPECT_EQ(parsed.problem, "capture failed") << "no reason given";
  parsed = CaptureGraph(worker, "t.py", {});
  EXPECT_FALSE(parsed.graph.has_value()) << "no result at all";
  EXPECT_EQ(parsed.problem, "capture failed");
}

TEST(CaptureTest, AMalformedGraphIsRefusedByTheParser) {
  ScriptedWorker worker;
  Json graph = testing::FixtureJson("level1_23_Softmax");
  graph["version"] = 99;
  worker.script.push_back(Captured(graph));
  worker.script.push_back(Answer({{"ok", true}, {"result", {{"status", "ok"}}}}));
  ParsedGraph parsed = CaptureGraph(worker, "t.py", {});
  EXPECT_FALSE(parsed.graph.has_value());
  EXPECT_THAT(parsed.problem, HasSubstr("unsupported egg-graph version"));
  parsed = CaptureGraph(worker, "t.py", {});
  EXPECT_FALSE(parsed.graph.has_value()) << "a status ok without a graph";
  EXPECT_THAT(parsed.problem, HasSubstr("bad graph IR"));
}

}  // namespace
}  // namespace egg::expert
