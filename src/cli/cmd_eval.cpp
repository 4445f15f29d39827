#include <fmt/format.h>
#include <fmt/ranges.h>

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

// One line of the timing protocol the worker stated (docs/harness.md), when something was timed.
void PrintProtocol(const Json& protocol) {
  if (!protocol.is_object() || protocol.value("timer", "none") == "none") {
    return;
  }
  const Json flush = protocol.value("l2_flush_bytes", Json());
  constexpr double kMiB = 1024.0 * 1024.0;
  fmt::print(
      "protocol: {}, {} warm-up then {} timed calls ({:g} s budget), L2 flush {}, {} reported; precision "
      "{}\n",
      protocol.value("timer", ""), protocol.value("warmup_calls", 0), protocol.value("timed_calls", 0),
      protocol.value("budget_s", 0.0),
      flush.is_number() ? fmt::format("{:.0f} MiB", flush.get<double>() / kMiB) : "none",
      protocol.value("statistic", "median"), protocol.value("precision", Json::object()).dump());
}

std::string SpeedupText(const Json& speedup) {
  return speedup.is_number() ? fmt::format("{:.2f}x", speedup.get<double>()) : "-";
}

std::string RunCell(const Json& run, const Json& speedup) {
  const Json time = run.value("time_ms", Json());
  if (!time.is_object()) {
    const std::string error = run.value("error", "");
    return error.empty() ? "-" : "failed";
  }
  return fmt::format("{:.4f} ms{}", time.value("mean", 0.0),
                     speedup.is_number() ? fmt::format(" ({:.2f}x)", speedup.get<double>()) : "");
}

std::string ErrorCell(const Json& run, double tol) {
  const Json accuracy = run.value("accuracy", Json());
  if (!accuracy.is_object() || !accuracy.value("rel_l2_err", Json()).is_number()) {
    return "-";
  }
  return fmt::format("{:.1e} ({} tol {:g})", accuracy["rel_l2_err"].get<double>(),
                     accuracy.value("within_tol", false) ? "within" : "OVER", tol);
}

// Every baseline setting: its eager and torch.compile times with the candidate's speedup, and the error of
// its eager output against the exact reference (what PyTorch itself would score at this tolerance).
void PrintBaselines(const harness::EvalResult& r) {
  if (!r.baselines.is_object() || r.baselines.empty()) {
    return;
  }
  fmt::print("baselines (PyTorch; speedup of the candidate):\n");
  for (const auto& [name, entry] : r.baselines.items()) {
    const Json runs = entry.value("runs", Json::object());
    const Json speedups = r.speedups.is_object() ? r.speedups.value(name, Json::object()) : Json::object();
    const std::string role = name == r.baseline          ? " [headline]"
                             : name == r.beside_baseline ? " [beside]"
                                                         : "";
    fmt::print("  {:<8} eager {:<22} torch.compile {:<22} eager's rel_l2 vs reference {}{}\n", name,
               RunCell(runs.value("eager", Json::object()), speedups.value("eager", Json())),
               RunCell(runs.value("compile", Json::object()), speedups.value("compile", Json())),
               ErrorCell(runs.value("eager", Json::object()), r.tol), role);
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
  constexpr size_t kHottestShown = 3;
  std::vector<std::string> hottest;
  for (const Json& time : r.kernel_times) {
    if (hottest.size() == kHottestShown) {
      break;
    }
    if (time.is_object() && time.value("us", Json()).is_number() && time.value("share", Json()).is_number()) {
      hottest.push_back(fmt::format("{} {:.0f}% ({:.1f} us)", time.value("name", "?"),
                                    time.at("share").get<double>() * kPercent, time.at("us").get<double>()));
    }
  }
  if (!hottest.empty()) {
    fmt::print("hottest kernels (one traced call): {}\n", fmt::join(hottest, ", "));
  }
  if (r.vacuous) {
    fmt::print(
        "vacuous: the reference output is the same for every input; the trials cannot judge this task\n");
  }
  const harness::DimsText dims = harness::DescribeDims(r.batch_dims);
  if (!r.batch_sizes.empty()) {
    fmt::print("dynamic {}: also correct at {} {}, with the kernels (no fallback)\n", dims.label, dims.unit,
               harness::PointsText(r.batch_sizes));
  }
  if (r.by_batch.is_array()) {
    for (const Json& entry : r.by_batch) {
      const Json runs = entry.value("speedups", Json::object()).value(r.baseline, Json::object());
      if (!runs.empty()) {
        fmt::print("  at {} {}: {} vs eager, {} vs torch.compile(dynamic=True) ({})\n", dims.unit,
                   harness::PointText(harness::RowPoint(entry)), SpeedupText(runs.value("eager", Json())),
                   SpeedupText(runs.value("compile", Json())), r.baseline);
      }
    }
  }
  if (r.float32_answer) {
    fmt::print(
        "judged against the float32 answer: not allclose to PyTorch's half-precision output, but at least as "
        "accurate as it (see flags)\n");
  }
  if (r.time_ms.candidate) {
    fmt::print("time (ms):\n");
    PrintStats("candidate", r.time_ms.candidate);
    fmt::print("speedup: {} vs eager, {} vs torch.compile, PyTorch {} (medians: {}, {})\n",
               FormatOptional(r.speedup_vs_eager, "{:.2f}x"), FormatOptional(r.speedup_vs_compile, "{:.2f}x"),
               r.baseline, FormatOptional(r.speedup_median_vs_eager, "{:.2f}x"),
               FormatOptional(r.speedup_median_vs_compile, "{:.2f}x"));
    PrintProtocol(r.timing_protocol);
  }
  PrintBaselines(r);
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
  command->add_option("task", args->task, "KernelBench-format task or torch.export program (.pt2)")
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
