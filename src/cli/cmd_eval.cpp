#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "common/error.h"
#include "harness/evaluator.h"

namespace egg::cli {
namespace {

constexpr double kPercent = 100.0;

struct EvalArgs {
  std::string task;
  std::string candidate;
  std::string device = "auto";
  bool json = false;
  harness::EvalOptions options;
};

std::string FormatOptional(const std::optional<double>& value, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value) : "n/a";
}

void PrintStats(const char* name, const std::optional<harness::Stats>& stats) {
  if (stats) {
    fmt::print("  {:<10} mean {:.4f}  median {:.4f}  p20 {:.4f}  p80 {:.4f}  (n={})\n", name, stats->mean,
               stats->median, stats->p20, stats->p80, stats->n);
  }
}

void PrintHuman(const harness::EvalResult& r) {
  fmt::print("status: {}{}\n", harness::StatusName(r.status), r.cached ? " (from the store)" : "");
  if (!r.reason.empty()) {
    fmt::print("reason: {}\n", r.reason);
  }
  fmt::print("correct: {} ({} of {} trials, tol {})\n", r.correct ? "yes" : "no", r.trials_passed, r.trials,
             r.tol);
  fmt::print("errors: max_abs {}  max_rel {}  rel_l2 {}\n", FormatOptional(r.max_abs_err, "{:.3g}"),
             FormatOptional(r.max_rel_err, "{:.3g}"), FormatOptional(r.rel_l2_err, "{:.3g}"));
  if (r.robust) {
    fmt::print("robustness trial (randn inputs): {}{}\n", r.robust->correct ? "pass" : "FAIL",
               r.robust->reason.empty() ? "" : " - " + r.robust->reason);
  }
  fmt::print("triton: {} launches per call", r.triton_launches);
  if (r.triton_time_share) {
    fmt::print(", {:.1f}% of GPU kernel time in Triton", *r.triton_time_share * kPercent);
  }
  fmt::print("\n");
  if (r.time_ms.candidate) {
    fmt::print("time (ms):\n");
    PrintStats("candidate", r.time_ms.candidate);
    PrintStats("eager", r.time_ms.eager);
    PrintStats("compile", r.time_ms.compile);
    fmt::print("speedup: {} vs eager, {} vs torch.compile (medians: {}, {})\n",
               FormatOptional(r.speedup_vs_eager, "{:.2f}x"), FormatOptional(r.speedup_vs_compile, "{:.2f}x"),
               FormatOptional(r.speedup_median_vs_eager, "{:.2f}x"),
               FormatOptional(r.speedup_median_vs_compile, "{:.2f}x"));
  }
  for (const auto& flag : r.flags) {
    fmt::print("flag: {}\n", flag);
  }
  if (!r.timing_note.empty()) {
    fmt::print("note: {}\n", r.timing_note);
  }
}

}  // namespace

CommandRunner RegisterEval(CLI::App& app, const GlobalOptions& globals) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* command = app.add_subcommand("eval", "Check a candidate ModelNew against a task and time both");
  command->add_option("task", args->task, "KernelBench-format task (Model, get_inputs, get_init_inputs)")
      ->required();
  command->add_option("candidate", args->candidate, "File defining ModelNew")->required();
  command->add_flag("--json", args->json, "Print one JSON object");
  AddEvalOptions(*command, &args->options, &args->device);
  return [command, args, &globals]() -> int {
    if (!command->parsed()) {
      return -1;
    }
    HarnessSession session =
        OpenHarnessSession(globals, args->device, &args->options, SandboxPolicy::kPreferred);
    harness::Evaluator evaluator(*session.worker, session.store.get());
    const harness::EvalResult result = evaluator.Evaluate(args->task, args->candidate, args->options);
    if (args->json) {
      std::cout << Json(result).dump(2) << std::endl;
    } else {
      PrintHuman(result);
    }
    return result.correct ? kExitOk : kExitCandidateFailed;
  };
}

}  // namespace egg::cli
