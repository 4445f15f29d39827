// egg: turns slow PyTorch modules into verified Triton kernels. One subcommand per file under cli/.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <vector>

#include "cli/commands.h"
#include "common/error.h"
#include "common/version.h"

int main(int argc, char** argv) {
  CLI::App app{"egg: expert-guided Triton kernel generation"};
  app.set_version_flag("--version", fmt::format("egg {}", egg::EggVersion()));
  app.require_subcommand(1);
  app.fallthrough();
  egg::cli::GlobalOptions globals;
  globals.command_line.assign(argv + 1, argv + argc);
  egg::cli::AddGlobalOptions(app, &globals);
  std::vector<egg::cli::CommandRunner> commands = {
      egg::cli::RegisterEval(app, globals), egg::cli::RegisterProfile(app, globals),
      egg::cli::RegisterOptimize(app, globals), egg::cli::RegisterShow(app, globals),
      egg::cli::RegisterCompile(app, globals), egg::cli::RegisterBench(app, globals)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    fmt::print(stderr, "egg: error: {}\n", error.what());
    return egg::kExitError;
  }
  try {
    for (auto& command : commands) {
      if (const int code = command(); code >= 0) {
        return code;
      }
    }
  } catch (const egg::EggError& error) {
    fmt::print(stderr, "egg: error: {}\n", error.what());
    return error.Kind() == egg::ErrorKind::kInterrupted ? egg::kExitInterrupted : egg::kExitError;
  } catch (const std::exception& error) {
    fmt::print(stderr, "egg: internal error: {}\n", error.what());
    return egg::kExitError;
  }
  return egg::kExitError;
}
