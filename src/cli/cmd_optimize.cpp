// `egg optimize TASK.py|PROGRAM.pt2`: the staged multi-agent search for one task (docs/pipeline.md).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/optimize_task.h"
#include "cli/progress_renderer.h"
#include "common/error.h"
#include "common/fs.h"

namespace egg::cli {
namespace {

struct OptimizeCommand {
  std::string task;
  bool quick = false;
  bool quiet = false;
  OptimizeArgs args;
};

TaskOutcome OptimizeWithProgress(OptimizeCommand& command, HarnessSession& session,
                                 const std::string& task_path, const std::string& out_dir) {
  const std::unique_ptr<ProgressRenderer> progress =
      MakeStderrProgress(command.quiet, command.args.eval.device == "cuda");
  command.args.pipeline.progress = progress.get();
  try {
    TaskOutcome outcome = OptimizeTask(command.args, session, task_path, out_dir);
    if (progress) {
      progress->Finish();
    }
    return outcome;
  } catch (...) {
    if (progress) {
      progress->Finish();
    }
    throw;
  }
}

int RunOptimize(OptimizeCommand& command, const GlobalOptions& globals) {
  const std::string task_path = AbsolutePath(command.task);
  if (!FileExists(task_path)) {
    throw UsageError("task file not found: " + task_path);
  }
  if (command.quick) {
    ApplyQuickSearch(&command.args);
  }
  HarnessSession session = OpenHarnessSession(globals, command.args.device, &command.args.eval,
                                              PolicyForBackend(command.args.backend));
  const std::string out_dir = command.args.out.empty()
                                  ? "egg-out/" + std::filesystem::path(task_path).stem().string()
                                  : command.args.out;
  const TaskOutcome outcome = OptimizeWithProgress(command, session, task_path, out_dir);
  PrintOutcome(outcome);
  return outcome.correct ? kExitOk : kExitCandidateFailed;
}

}  // namespace

CommandRunner RegisterOptimize(CLI::App& app, const GlobalOptions& globals) {
  auto command = std::make_shared<OptimizeCommand>();
  CLI::App* sub = app.add_subcommand("optimize", "Search for fast, verified Triton kernels for a task");
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->add_option("task", command->task, "KernelBench-format task, or a torch.export program (.pt2)")
      ->required();
  sub->add_option("--out", command->args.out, "Output directory (default egg-out/<task>)");
  sub->add_flag("--quick", command->quick,
                "A short search: at most 2 seeds, one round per stage, no seed refinement");
  sub->add_flag("--quiet", command->quiet,
                "No progress on stderr (capture, stages, screenings, best so far, time)");
  AddSearchOptions(*sub, &command->args);
  return [sub, command, &globals]() -> int { return sub->parsed() ? RunOptimize(*command, globals) : -1; };
}

}  // namespace egg::cli
