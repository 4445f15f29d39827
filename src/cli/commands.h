// One registration function per subcommand. Each adds its CLI11 subcommand and returns a callable that runs
// it once parsed and returns the process exit code.
#pragma once

#include <functional>

#include "cli/context.h"

namespace egg::cli {

using CommandRunner = std::function<int()>;

CommandRunner RegisterEval(CLI::App& app, const GlobalOptions& globals);
CommandRunner RegisterProfile(CLI::App& app, const GlobalOptions& globals);
CommandRunner RegisterOptimize(CLI::App& app, const GlobalOptions& globals);
CommandRunner RegisterShow(CLI::App& app, const GlobalOptions& globals);
CommandRunner RegisterCompile(CLI::App& app, const GlobalOptions& globals);
CommandRunner RegisterBench(CLI::App& app, const GlobalOptions& globals);

}  // namespace egg::cli
