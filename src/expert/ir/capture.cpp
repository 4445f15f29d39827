#include "expert/ir/capture.h"

namespace egg::expert {

ParsedGraph CaptureGraph(harness::WorkerChannel& worker, const std::string& task_path, const CaptureOptions& options) {
  Json request = {{"op", "capture"},
                  {"task", task_path},
                  {"device", options.device},
                  {"seed", options.seed},
                  {"init_seed", options.init_seed}};
  if (options.precision != "fp32") {
    request["precision"] = options.precision;
  }
  if (!options.dynamic.empty()) {
    request["dynamic"] = harness::DynamicField(options.dynamic);
  }
  const harness::CallResult call = worker.Call(request, options.timeout_s);
  if (call.outcome != harness::CallOutcome::kOk) {
    return {std::nullopt, "capture did not finish: " + call.detail};
  }
  const Json& response = call.response;
  if (!response.value("ok", false)) {
    return {std::nullopt, "capture failed: " + response.value("error", std::string("unknown error"))};
  }
  const Json& result = response.value("result", Json::object());
  if (result.value("status", "") != "ok") {
    return {std::nullopt, result.value("reason", std::string("capture failed"))};
  }
  return ParseGraph(result.value("graph", Json()));
}

}  // namespace egg::expert
