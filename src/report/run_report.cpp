#include "report/run_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace egg::report {
namespace {

std::string TimerNote(const std::string& timer) {
  if (timer == "cpu-interpreter-wall") {
    return "interpreter wall-clock times decide acceptance only; not performance figures";
  }
  if (timer == "cuda-synchronized-wall") {
    return "library kernels ran on side streams: the candidate was timed by the host clock between device-wide "
           "synchronizes (launch overhead included), its baselines by CUDA events";
  }
  return "";
}

Json CandidateJson(const pipeline::CandidateRecord& candidate) {
  return Json{{"id", candidate.id},
              {"status", harness::StatusName(candidate.eval.status)},
              {"origin", candidate.origin},
              {"parent_id", candidate.parent_id},
              {"move", candidate.move},
              {"description", candidate.description},
              {"median_ms", candidate.MedianMs()},
              {"reason", candidate.eval.reason}};
}

Json StageJson(const pipeline::StageRecord& stage) {
  Json decisions = Json::array();
  for (const auto& decision : stage.decisions) {
    decisions.push_back({{"round", decision.round},
                         {"candidate_id", decision.candidate_id},
                         {"move", decision.move},
                         {"accepted", decision.accepted},
                         {"reason", decision.reason},
                         {"incumbent_ms", decision.incumbent_ms},
                         {"candidate_ms", decision.candidate_ms}});
  }
  Json candidates = Json::array();
  for (const auto& candidate : stage.candidates) {
    candidates.push_back(CandidateJson(candidate));
  }
  return Json{{"stage", stage.spec.name},
              {"objective", stage.spec.objective},
              {"moves", stage.spec.moves},
              {"rounds", stage.rounds_run},
              {"stopped_because", stage.stopped_because},
              {"incumbent_candidate_id", stage.incumbent_id},
              {"incumbent_ms", stage.incumbent_ms},
              {"speedup_vs_eager", stage.incumbent_speedup_vs_eager},
              {"decisions", decisions},
              {"candidates", candidates}};
}

std::string Ms(const Json& value) {
  return value.is_number() ? fmt::format("{:.4f} ms", value.get<double>()) : "-";
}

}  // namespace

Json BuildRunReport(const pipeline::RunResult& result, const RunMeta& meta,
                    const harness::EvalResult* final_eval) {
  Json stages = Json::array();
  for (const auto& stage : result.stages) {
    stages.push_back(StageJson(stage));
  }
  const bool correct = final_eval != nullptr && final_eval->correct;
  std::string timer = "none";
  if (final_eval != nullptr && final_eval->time_ms.candidate) {
    timer = final_eval->time_ms.candidate->timer;
  }
  return Json{
      {"run_id", meta.run_id},
      {"task", meta.task},
      {"task_hash", meta.task_hash},
      {"backend", meta.backend},
      {"device", meta.device},
      {"model", meta.model},
      {"status", correct ? "ok" : "failed"},
      {"stopped_because", result.stopped_because},
      {"reason", correct ? "" : result.reason},
      {"timer", timer},
      {"timer_note", TimerNote(timer)},
      {"final_candidate_id", result.final ? result.final->id : ""},
      {"final", final_eval != nullptr ? Json(*final_eval) : Json()},
      {"stages", stages},
      {"screened", result.screened},
      {"llm", meta.llm},
      {"expert", meta.expert},
      {"notes", meta.notes},
      {"options", meta.options}};
}

std::string TrajectoryMarkdown(const Json& report) {
  std::string out = fmt::format("# egg optimize: {}\n\nrun {} · backend {} · device {} · status {} ({})\n",
                                report.value("task", ""), report.value("run_id", ""),
                                report.value("backend", ""), report.value("device", ""),
                                report.value("status", ""), report.value("stopped_because", ""));
  if (const std::string note = report.value("timer_note", ""); !note.empty()) {
    out += "\nTimer: " + report.value("timer", "") + " (" + note + ")\n";
  }
  for (const Json& stage : report.value("stages", Json::array())) {
    out += fmt::format("\n## {} — {}\nrounds {}, stopped: {}, incumbent {} at {}\n", stage.value("stage", ""),
                       stage.value("objective", ""), stage.value("rounds", 0),
                       stage.value("stopped_because", ""), stage.value("incumbent_candidate_id", ""),
                       Ms(stage.value("incumbent_ms", Json())));
    for (const Json& candidate : stage.value("candidates", Json::array())) {
      out += fmt::format(
          "- candidate {} ({}{}): {} {}\n", candidate.value("id", ""), candidate.value("origin", ""),
          candidate.value("parent_id", "").empty() ? "" : " of " + candidate.value("parent_id", ""),
          candidate.value("status", ""), Ms(candidate.value("median_ms", Json())));
    }
    // Designs screened together (built in parallel, timed briefly): what each measured, including those never
    // evaluated in full because another screened faster.
    for (const Json& screen : report.value("screened", Json::array())) {
      if (screen.value("stage", "") != stage.value("stage", "")) {
        continue;
      }
      // one line of the reason: newlines as spaces, cut at 160 bytes on a UTF-8 character boundary
      std::string reason = screen.value("reason", "");
      std::replace(reason.begin(), reason.end(), '\n', ' ');
      size_t cut = std::min<size_t>(reason.size(), 160);
      while (cut > 0 && cut < reason.size() && (static_cast<unsigned char>(reason[cut]) & 0xC0) == 0x80) {
        --cut;
      }
      reason.resize(cut);
      out += fmt::format("- screened {} [{}] round {}: {} {}{}\n", screen.value("id", ""),
                         screen.value("move", ""), screen.value("round", 0) + 1, screen.value("status", ""),
                         Ms(screen.value("median_ms", Json())), reason.empty() ? "" : " (" + reason + ")");
    }
    for (const Json& decision : stage.value("decisions", Json::array())) {
      out += fmt::format("- {} {} [{}]: {}\n", decision.value("accepted", false) ? "ACCEPTED" : "rejected",
                         decision.value("candidate_id", ""), decision.value("move", ""),
                         decision.value("reason", ""));
    }
  }
  if (const std::string notes = report.value("notes", ""); !notes.empty()) {
    out += "\nNote: " + notes + "\n";
  }
  const Json expert = report.value("expert", Json());
  if (expert.is_object()) {
    out += "\n## Final candidate (expert backend)\n";
    for (const Json& kernel : expert.value("kernels", Json::array())) {
      const Json design = kernel.value("design", Json::object());
      std::string algorithm = design.value("algorithm", "");
      if (const std::string precision = design.value("precision", ""); !precision.empty()) {
        algorithm += ", " + precision + " products";
      }
      out += fmt::format("- {} ({}, {}): {}\n", kernel.value("name", ""), kernel.value("kind", ""), algorithm,
                         kernel.value("fusion", Json::array()).dump());
    }
    out += fmt::format("- ops left to PyTorch: {}\n", expert.value("pytorch_ops", Json::array()).dump());
    const Json design = expert.value("design", Json::object());
    if (design.is_object() && design.value("plan", Json::object()).value("cuda_graph", false)) {
      out += "- launches: the forward captured once in a CUDA graph and replayed (stage2.memory)\n";
    }
    if (expert.contains("triton_time_share") && expert["triton_time_share"].is_number()) {
      out += fmt::format("- share of GPU kernel time in Triton: {:.1f}%\n",
                         100.0 * expert["triton_time_share"].get<double>());
    }
  }
  const Json llm = report.value("llm", Json::object());
  if (llm.is_object() && !llm.empty()) {
    out +=
        fmt::format("\nLLM: {} calls, {} input + {} output tokens, ${:.4f}\n", llm.value("calls", 0),
                    llm.value("input_tokens", 0), llm.value("output_tokens", 0), llm.value("cost_usd", 0.0));
  }
  return out;
}

}  // namespace egg::report
