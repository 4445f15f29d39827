#include "report/run_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "harness/eval_types.h"

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
              {"author", candidate.author},
              {"untrusted", candidate.untrusted},
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
                         {"author", decision.author},
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

std::string Speedup(const Json& value) {
  return value.is_number() ? fmt::format("{:.2f}x", value.get<double>()) : "-";
}

// A dynamic batch's speedups at each batch it was timed at, against the headline setting's eager and one
// torch.compile(dynamic=True) module: "" when there are none.
std::string BatchLines(const Json& by_batch, const std::string& headline, const harness::DimsText& dims) {
  const std::string& label = dims.label;
  const std::string& size = dims.unit;
  std::string out;
  if (!by_batch.is_array()) {
    return out;
  }
  for (const Json& entry : by_batch) {
    const Json runs = entry.value("speedups", Json::object()).value(headline, Json::object());
    const Json candidate = entry.value("time_ms", Json::object()).value("candidate", Json::object());
    if (runs.empty()) {
      continue;
    }
    if (out.empty()) {
      out = fmt::format("dynamic {}, speedups at each {} (vs PyTorch {}; torch.compile(dynamic=True)):\n",
                        label, size, headline);
    }
    out += fmt::format("- {} {}: candidate {} (mean), {} eager, {} torch.compile\n", size,
                       harness::PointText(harness::RowPoint(entry)), Ms(candidate.value("mean", Json())),
                       Speedup(runs.value("eager", Json())), Speedup(runs.value("compile", Json())));
  }
  return out;
}

// The final candidate's tolerance and its speedup against every PyTorch baseline setting, headline first.
std::string ResultSection(const Json& final) {
  if (!final.is_object()) {
    return "";
  }
  std::string out = fmt::format(
      "\n## Result\nverified at tol {:g}{}{}\n", final.value("tol", 0.0),
      final.value("vacuous", false) ? " (vacuous task: the reference never changes)" : "",
      final.value("float32_answer", false)
          ? " against the float32 answer (at least as accurate as PyTorch's half-precision output, "
            "not allclose to it)"
          : "");
  const Json batches = final.value("batch_sizes", Json::array());
  const harness::DimsText dims =
      harness::DescribeDims(final.value("batch_dims", std::vector<int>{final.value("batch_dim", 0)}));
  if (batches.is_array() && !batches.empty()) {
    out += fmt::format(
        "dynamic {}: also correct at {} {}, with the kernels (no fallback); the times just below are at the "
        "task's own {}\n",
        dims.label, dims.unit, harness::PointsText(batches), dims.unit);
  }
  const Json speedups = final.value("speedups", Json());
  if (!speedups.is_object()) {
    return out;
  }
  const std::string headline = final.value("baseline", "");
  const std::string beside = final.value("beside_baseline", "");
  for (const auto& [setting, runs] : speedups.items()) {
    const std::string role = setting == headline ? " (headline)" : setting == beside ? " (beside)" : "";
    out += fmt::format("- vs PyTorch {}{}: {} eager, {} torch.compile\n", setting, role,
                       Speedup(runs.value("eager", Json())), Speedup(runs.value("compile", Json())));
  }
  return out + BatchLines(final.value("by_batch", Json()), headline, dims);
}

// The LLM's usage, then its failed attempts by kind and the request changes the servers asked for.
std::string LlmMarkdown(const Json& llm) {
  std::string out =
      fmt::format("\nLLM: {} calls, {} input + {} output tokens, ${:.4f}\n", llm.value("calls", 0),
                  llm.value("input_tokens", 0), llm.value("output_tokens", 0), llm.value("cost_usd", 0.0));
  if (llm.value("cached_input_tokens", 0) > 0 || llm.value("reasoning_tokens", 0) > 0) {
    out += fmt::format("- of these: {} cached input, {} cache writes, {} reasoning tokens\n",
                       llm.value("cached_input_tokens", 0), llm.value("cache_write_tokens", 0),
                       llm.value("reasoning_tokens", 0));
  }
  const Json errors = llm.value("errors", Json::object());
  for (const auto& [kind, tally] : errors.items()) {
    out += fmt::format("- failed attempts, {}: {} (last: {})\n", kind, tally.value("count", 0),
                       tally.value("last_message", ""));
  }
  for (const Json& change : llm.value("adaptations", Json::array())) {
    out += "- request changed: " + change.get<std::string>() + "\n";
  }
  return out;
}

struct SourceTally {
  std::set<std::string> proposed;
  std::set<std::string> correct;
  int accepted = 0;
};

// Candidates by source: each fully evaluated proposal, its repairs counted for it, then the screened designs.
void TallyCandidates(const pipeline::RunResult& result, std::map<std::string, SourceTally>* tallies) {
  for (const auto& stage : result.stages) {
    std::map<std::string, std::string> proposal_of;  // candidate id -> the proposal it descends from
    for (const auto& candidate : stage.candidates) {
      const auto parent = proposal_of.find(candidate.parent_id);
      const std::string root =
          candidate.origin == "debug" && parent != proposal_of.end() ? parent->second : candidate.id;
      proposal_of[candidate.id] = root;
      SourceTally& tally = (*tallies)[candidate.author];
      tally.proposed.insert(root);
      if (candidate.eval.correct) {
        tally.correct.insert(root);
      }
    }
  }
  for (const Json& screen : result.screened) {
    SourceTally& tally = (*tallies)[screen.value("author", std::string(agents::kAuthorExpert))];
    tally.proposed.insert(screen.value("id", ""));
    if (screen.value("status", "") == "ok") {
      tally.correct.insert(screen.value("id", ""));
    }
  }
}

std::string ProvenanceMarkdown(const Json& provenance) {
  std::string out = "\n## Provenance\n";
  for (const char* source : {agents::kAuthorExpert, agents::kAuthorLlm}) {
    const Json tally = provenance.value(source, Json::object());
    out += fmt::format("- {}: {} proposed, {} correct, {} accepted", source, tally.value("proposed", 0),
                       tally.value("correct", 0), tally.value("accepted", 0));
    if (tally.contains("calls")) {
      out += fmt::format(" ({} LLM calls, {} input + {} output tokens, ${:.4f})", tally.value("calls", 0),
                         tally.value("input_tokens", 0), tally.value("output_tokens", 0),
                         tally.value("cost_usd", 0.0));
    }
    out += "\n";
  }
  for (const Json& decision : provenance.value("accepted", Json::array())) {
    out += fmt::format("- accepted from {}: {} {} [{}]\n", decision.value("author", ""),
                       decision.value("stage", ""), decision.value("candidate_id", ""),
                       decision.value("move", ""));
  }
  return out;
}

// The hybrid backend's LLM design moves refused by the compiler's rules, and why the LLM stopped, if it did.
std::string HybridMarkdown(const Json& hybrid) {
  std::string out;
  for (const Json& refused : hybrid.value("refused_moves", Json::array())) {
    out += fmt::format("- refused LLM design move in {}: {} ({})\n", refused.value("stage", ""),
                       refused.value("move", Json()).dump(), refused.value("rule", ""));
  }
  if (const Json stopped = hybrid.value("llm_stopped", Json()); stopped.is_string()) {
    out += "- the LLM stopped: " + stopped.get<std::string>() + "; the expert's search went on\n";
  }
  return out;
}

}  // namespace

Json ProvenanceJson(const pipeline::RunResult& result, const Json& llm) {
  std::map<std::string, SourceTally> tallies = {{agents::kAuthorExpert, {}}, {agents::kAuthorLlm, {}}};
  TallyCandidates(result, &tallies);
  Json accepted = Json::array();
  for (const auto& stage : result.stages) {
    for (const auto& decision : stage.decisions) {
      if (decision.accepted) {
        ++tallies[decision.author].accepted;
        accepted.push_back(Json{{"stage", decision.stage},
                                {"round", decision.round},
                                {"candidate_id", decision.candidate_id},
                                {"move", decision.move},
                                {"author", decision.author}});
      }
    }
  }
  Json provenance = {{"accepted", accepted}};
  for (const auto& [source, tally] : tallies) {
    provenance[source] = Json{
        {"proposed", tally.proposed.size()}, {"correct", tally.correct.size()}, {"accepted", tally.accepted}};
  }
  if (llm.is_object() && llm.contains("calls")) {
    for (const char* key : {"calls", "input_tokens", "output_tokens", "cost_usd"}) {
      provenance[agents::kAuthorLlm][key] = llm.value(key, Json(0));
    }
  }
  return provenance;
}

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
  return Json{{"run_id", meta.run_id},
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
              {"timing_protocol", final_eval != nullptr ? final_eval->timing_protocol : Json()},
              {"stages", stages},
              {"screened", result.screened},
              {"llm", meta.llm},
              {"provenance", ProvenanceJson(result, meta.llm)},
              {"hybrid", meta.backend_details},
              {"expert", meta.expert},
              {"notes", meta.notes},
              {"options", meta.options}};
}

std::string TrajectoryMarkdown(const Json& report) {
  std::string out = fmt::format("# egg optimize: {}\n\nrun {} · backend {} · device {} · status {} ({})\n",
                                report.value("task", ""), report.value("run_id", ""),
                                report.value("backend", ""), report.value("device", ""),
                                report.value("status", ""), report.value("stopped_because", ""));
  if (const std::string reason = report.value("reason", ""); !reason.empty()) {
    out += "\nReason: " + reason + "\n";
  }
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
          "- candidate {} ({}{}{}): {} {}\n", candidate.value("id", ""), candidate.value("origin", ""),
          candidate.value("author", "").empty() ? "" : ", " + candidate.value("author", ""),
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
      const std::string author = decision.value("author", "");
      out += fmt::format("- {} {} [{}]{}: {}\n", decision.value("accepted", false) ? "ACCEPTED" : "rejected",
                         decision.value("candidate_id", ""), decision.value("move", ""),
                         author.empty() ? "" : " from " + author, decision.value("reason", ""));
    }
  }
  out += ResultSection(report.value("final", Json()));
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
    out += LlmMarkdown(llm);
  }
  if (report.value("provenance", Json()).is_object()) {
    out += ProvenanceMarkdown(report["provenance"]);
  }
  if (const Json hybrid = report.value("hybrid", Json()); hybrid.is_object()) {
    out += HybridMarkdown(hybrid);
  }
  return out;
}

}  // namespace egg::report
