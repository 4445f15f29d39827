#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "common/error.h"
#include "harness/evaluator.h"

namespace egg::cli {
namespace {

constexpr double kDefaultProfileTimeoutS = 600;

struct ProfileArgs {
  std::string task;
  std::string candidate;
  std::string device = "auto";
  std::string ncu;
  double profile_timeout_s = kDefaultProfileTimeoutS;
  bool json = false;
  harness::EvalOptions options;
};

constexpr double kGiga = 1e-9;
constexpr double kMicrosPerNano = 1e-3;

std::string Number(const Json& value, const char* format, double scale = 1.0) {
  return value.is_number() ? fmt::format(fmt::runtime(format), value.get<double>() * scale) : "-";
}

void PrintHuman(const Json& profile) {
  fmt::print("status: {}\n", profile.value("status", std::string("?")));
  if (auto reason = profile.value("reason", std::string()); !reason.empty()) {
    fmt::print("reason: {}\n", reason);
  }
  const Json ncu = profile.value("ncu", Json::object());
  if (!ncu.value("available", false)) {
    fmt::print("ncu: not available ({}); roofline from timings alone\n",
               ncu.value("reason", std::string("?")));
  }
  for (const Json& kernel : profile.value("kernels", Json::array())) {
    fmt::print("kernel {}{}: {} us, dram {}%, compute {}%, occupancy {}%, {} regs\n",
               kernel.value("name", std::string("?")), kernel.value("triton", false) ? "" : " (not Triton)",
               Number(kernel.value("duration_ns", Json()), "{:.1f}", kMicrosPerNano),
               Number(kernel.value("dram_throughput_pct", Json()), "{:.1f}"),
               Number(kernel.value("compute_throughput_pct", Json()), "{:.1f}"),
               Number(kernel.value("achieved_occupancy_pct", Json()), "{:.1f}"),
               Number(kernel.value("registers_per_thread", Json()), "{:.0f}"));
  }
  const Json roofline = profile.value("roofline", Json::object());
  fmt::print("roofline: {} FLOP, {} bytes, {} ms, {} GFLOP/s, {} GB/s, bound: {}\n",
             Number(roofline.value("flops", Json()), "{:.3g}"),
             Number(roofline.value("bytes", Json()), "{:.3g}"),
             Number(roofline.value("time_ms", Json()), "{:.4f}"),
             Number(roofline.value("achieved_flops_per_s", Json()), "{:.1f}", kGiga),
             Number(roofline.value("achieved_bytes_per_s", Json()), "{:.1f}", kGiga),
             roofline.value("bound", std::string("-")));
}

}  // namespace

CommandRunner RegisterProfile(CLI::App& app, const GlobalOptions& globals) {
  auto args = std::make_shared<ProfileArgs>();
  CLI::App* command = app.add_subcommand("profile", "Nsight Compute metrics and a roofline for a candidate");
  command->add_option("task", args->task, "KernelBench-format task")->required();
  command->add_option("candidate", args->candidate, "File defining ModelNew")->required();
  command->add_flag("--json", args->json, "Print one JSON object");
  command->add_option("--ncu", args->ncu, "Path to ncu (default: from PATH)");
  command->add_option("--profile-timeout", args->profile_timeout_s, "Wall-clock limit for ncu, seconds")
      ->check(CLI::PositiveNumber)
      ->default_val(kDefaultProfileTimeoutS);
  AddEvalOptions(*command, &args->options, &args->device);
  return [command, args, &globals]() -> int {
    if (!command->parsed()) {
      return -1;
    }
    HarnessSession session =
        OpenHarnessSession(globals, args->device, &args->options, SandboxPolicy::kPreferred);
    harness::Evaluator evaluator(*session.worker, session.store.get());
    const Json profile =
        evaluator.Profile(args->task, args->candidate, args->options, args->profile_timeout_s, args->ncu);
    if (args->json) {
      std::cout << profile.dump(2) << std::endl;
    } else {
      PrintHuman(profile);
    }
    return profile.value("status", std::string()) == "ok" ? kExitOk : kExitCandidateFailed;
  };
}

}  // namespace egg::cli
