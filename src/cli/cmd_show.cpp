#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "report/run_report.h"

namespace egg::cli {
namespace {

// An interrupted run has no report yet: list what the store holds for it.
void PrintPartial(store::Store& store, const store::RunRow& run) {
  fmt::print("# egg optimize: {}\n\nrun {} · status {} (interrupted or still running)\n", run.task_path,
             run.id, run.status);
  std::string stage;
  for (const auto& candidate : store.CandidatesForRun(run.id)) {
    if (candidate.stage != stage) {
      stage = candidate.stage;
      fmt::print("\n## {}\n", stage);
    }
    fmt::print("- candidate {} ({}): {}\n", candidate.id, candidate.origin, candidate.status);
    if (candidate.design_json) {
      fmt::print("  design: {}\n", *candidate.design_json);
    }
  }
  for (const auto& decision : store.DecisionsForRun(run.id)) {
    fmt::print("- {} {} {} [{}]: {}\n", decision.stage, decision.accepted ? "ACCEPTED" : "rejected",
               decision.candidate_id, decision.move, decision.reason);
  }
}

int RunShow(const std::string& run, const GlobalOptions& globals) {
  if (FileExists(run + "/report.json")) {
    fmt::print("{}", report::TrajectoryMarkdown(Json::parse(ReadFile(run + "/report.json"))));
    return kExitOk;
  }
  auto store = OpenStore(globals, CurrentEnvironment());
  if (!store) {
    throw UsageError("egg show needs the store (drop --no-store) or an out directory");
  }
  const auto row = store->FindRun(run);
  if (!row) {
    throw UsageError("no run '" + run + "' in the store and no " + run + "/report.json");
  }
  if (row->report_json.empty()) {
    PrintPartial(*store, *row);
  } else {
    fmt::print("{}", report::TrajectoryMarkdown(Json::parse(row->report_json)));
  }
  return kExitOk;
}

}  // namespace

CommandRunner RegisterShow(CLI::App& app, const GlobalOptions& globals) {
  auto run = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("show", "Print a run's trajectory stage by stage");
  command->add_option("run", *run, "Run id (or a unique prefix) or an `egg optimize --out` directory")
      ->required();
  return [command, run, &globals]() -> int { return command->parsed() ? RunShow(*run, globals) : -1; };
}

}  // namespace egg::cli
