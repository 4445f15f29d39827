// `egg bench DIR | --level N`: `egg optimize` over a suite of KernelBench-format tasks through one worker,
// writing DIR/results.json (a row per task and a summary) as each task finishes, and each task's outputs
// under DIR/tasks/. --resume keeps the rows of tasks already finished. Exit 0 when every task ended correct.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <regex>

#include "cli/commands.h"
#include "cli/optimize_task.h"
#include "common/error.h"
#include "common/fs.h"
#include "harness/evaluator.h"

namespace egg::cli {
namespace {

namespace fs = std::filesystem;

struct BenchCommand {
  std::string dir;
  int level = 0;
  std::string kernelbench;
  std::string tasks_glob = "*";
  std::string out = "egg-bench";
  std::vector<double> also_tol;
  bool resume = false;
  OptimizeArgs args;
};

int TaskNumber(const fs::path& path) {
  const std::string stem = path.stem().string();
  return std::isdigit(static_cast<unsigned char>(stem.empty() ? 'x' : stem[0])) != 0 ? std::stoi(stem) : 1 << 30;
}

std::regex GlobRegex(const std::string& glob) {
  std::string pattern;
  for (char c : glob) {
    if (c == '*') {
      pattern += ".*";
    } else if (c == '?') {
      pattern += '.';
    } else if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      pattern += c;
    } else {
      pattern += std::string("\\") + c;
    }
  }
  return std::regex(pattern);
}

std::vector<fs::path> SuiteTasks(const BenchCommand& command) {
  fs::path dir = command.dir;
  if (command.level > 0) {
    std::string root = command.kernelbench;
    if (root.empty()) {
      const char* env = std::getenv("EGG_KERNELBENCH");
      root = env != nullptr ? env : "";
    }
    if (root.empty()) {
      throw UsageError("--level needs --kernelbench PATH or EGG_KERNELBENCH");
    }
    dir = fs::path(root) / ("level" + std::to_string(command.level));
  }
  if (dir.empty()) {
    throw UsageError("give a folder of tasks or --level N");
  }
  if (!fs::is_directory(dir)) {
    throw UsageError("task folder not found: " + dir.string());
  }
  const std::regex glob = GlobRegex(command.tasks_glob);
  std::vector<fs::path> tasks;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path& path = entry.path();
    if (entry.is_regular_file() && path.extension() == ".py" && std::regex_match(path.filename().string(), glob)) {
      tasks.push_back(fs::absolute(path));
    }
  }
  std::sort(tasks.begin(), tasks.end(), [](const fs::path& a, const fs::path& b) {
    return std::make_pair(TaskNumber(a), a.filename().string()) < std::make_pair(TaskNumber(b), b.filename().string());
  });
  if (tasks.empty()) {
    throw UsageError("no task matches " + command.tasks_glob + " in " + dir.string());
  }
  return tasks;
}

Json Row(const fs::path& task, const TaskOutcome& outcome, double wall_s) {
  const Json& report = outcome.report;
  const Json final = report.value("final", Json());
  Json row = {{"task", task.filename().string()},
              {"path", task.string()},
              {"status", report.value("status", "failed")},
              {"correct", outcome.correct},
              {"wall_s", wall_s},
              {"out_dir", outcome.out_dir}};
  if (final.is_object()) {
    for (const char* key : {"speedup_vs_eager", "speedup_vs_compile", "time_ms", "max_abs_err", "max_rel_err",
                            "triton_time_share", "triton_launches", "reason", "robust"}) {
      row[key] = final.value(key, Json());
    }
  }
  const Json expert = report.value("expert", Json());
  if (expert.is_object()) {
    row["kernels"] = expert.value("kernels", Json::array()).size();
    row["pytorch_ops"] = expert.value("pytorch_ops", Json::array());
  }
  return row;
}

double GeoMean(const std::vector<double>& values) {
  if (values.empty()) {
    return 0;
  }
  double sum = 0;
  for (double v : values) {
    sum += std::log(v);
  }
  return std::exp(sum / static_cast<double>(values.size()));
}

double Median(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

Json Summary(const Json& rows) {
  Json summary = Json::object();
  int correct = 0;
  std::map<std::string, std::vector<double>> speedups;
  for (const Json& row : rows) {
    correct += row.value("correct", false) ? 1 : 0;
    for (const char* key : {"speedup_vs_eager", "speedup_vs_compile"}) {
      if (row.value("correct", false) && row.value(key, Json()).is_number()) {
        speedups[key].push_back(row[key].get<double>());
      }
    }
  }
  summary["tasks"] = rows.size();
  summary["correct"] = correct;
  for (const auto& [key, values] : speedups) {
    const std::string name = key.substr(std::string("speedup_").size());
    summary["geomean_" + name] = GeoMean(values);
    summary["median_" + name] = Median(values);
    summary["fast_1_" + name] =
        static_cast<double>(std::count_if(values.begin(), values.end(), [](double v) { return v > 1.0; })) /
        static_cast<double>(std::max<size_t>(rows.size(), 1));
  }
  return summary;
}

std::string SpeedupText(const Json& row) {
  const Json eager = row.value("speedup_vs_eager", Json());
  const Json compile = row.value("speedup_vs_compile", Json());
  if (!eager.is_number()) {
    return "";  // not timed (CPU) or not correct
  }
  return fmt::format(", {:.2f}x vs eager, {} vs torch.compile", eager.get<double>(),
                     compile.is_number() ? fmt::format("{:.2f}x", compile.get<double>()) : "n/a");
}

int RunBench(BenchCommand& command, const GlobalOptions& globals) {
  const std::vector<fs::path> tasks = SuiteTasks(command);
  HarnessSession session = OpenHarnessSession(globals, command.args.device, &command.args.eval);
  CreateDirectories(command.out);
  const std::string results_path = command.out + "/results.json";
  Json rows = Json::array();
  if (command.resume && FileExists(results_path)) {
    rows = Json::parse(ReadFile(results_path)).value("tasks", Json::array());
  }
  harness::Evaluator evaluator(*session.worker, session.store.get());
  for (size_t i = 0; i < tasks.size(); ++i) {
    const fs::path& task = tasks[i];
    const bool done = std::any_of(rows.begin(), rows.end(),
                                  [&](const Json& row) { return row.value("path", "") == task.string(); });
    if (done) {
      continue;
    }
    fmt::print(stderr, "egg bench: [{}/{}] {}\n", i + 1, tasks.size(), task.filename().string());
    const auto start = std::chrono::steady_clock::now();
    const std::string out_dir = command.out + "/tasks/" + task.stem().string();
    Json row;
    try {
      const TaskOutcome outcome = OptimizeTask(command.args, session, task.string(), out_dir);
      const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      row = Row(task, outcome, wall_s);
      for (double tol : command.also_tol) {
        harness::EvalOptions options = command.args.eval;
        options.tol = tol;
        options.timing = false;
        const std::string model = out_dir + "/model_new.py";
        if (FileExists(model)) {
          const harness::EvalResult result = evaluator.Evaluate(task.string(), model, options);
          row["at_tol"][fmt::format("{:g}", tol)] = {{"correct", result.correct},
                                                     {"status", harness::StatusName(result.status)},
                                                     {"max_rel_err", result.max_rel_err},
                                                     {"reason", result.reason}};
        }
      }
    } catch (const EggError& error) {
      row = {{"task", task.filename().string()}, {"path", task.string()}, {"status", "error"},
             {"correct", false}, {"reason", error.what()}};
    }
    fmt::print(stderr, "egg bench:   {}{}\n", row.value("status", ""), SpeedupText(row));
    rows.push_back(row);
    WriteFileAtomic(results_path, Json{{"tasks", rows}, {"summary", Summary(rows)}}.dump(2) + "\n");
  }
  const Json summary = Summary(rows);
  WriteFileAtomic(results_path, Json{{"tasks", rows}, {"summary", summary}}.dump(2) + "\n");
  fmt::print("{}\nwrote {}\n", summary.dump(2), results_path);
  return summary.value("correct", 0) == static_cast<int>(rows.size()) ? kExitOk : kExitCandidateFailed;
}

}  // namespace

CommandRunner RegisterBench(CLI::App& app, const GlobalOptions& globals) {
  auto command = std::make_shared<BenchCommand>();
  CLI::App* sub = app.add_subcommand("bench", "Run egg optimize over a folder of tasks or a KernelBench level");
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->add_option("dir", command->dir, "Folder of KernelBench-format tasks");
  sub->add_option("--level", command->level, "KernelBench level (1-4) under --kernelbench")->check(CLI::Range(1, 4));
  sub->add_option("--kernelbench", command->kernelbench, "KernelBench root (default $EGG_KERNELBENCH)");
  sub->add_option("--tasks", command->tasks_glob, "Only tasks whose file name matches this glob");
  sub->add_option("--out", command->out, "Output folder (default egg-bench)");
  sub->add_option("--also-tol", command->also_tol, "Also check each final kernel at these tolerances")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_flag("--resume", command->resume, "Keep the rows of tasks already in OUT/results.json");
  AddSearchOptions(*sub, &command->args);
  return [sub, command, &globals]() -> int { return sub->parsed() ? RunBench(*command, globals) : -1; };
}

}  // namespace egg::cli
