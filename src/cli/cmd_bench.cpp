// `egg bench DIR | --level N... | --sample kb-sample`: `egg optimize` over a suite of KernelBench-format
// tasks. One worker per GPU (or --workers on the CPU), tasks handed out from a queue; DIR/results.json (a row
// per task, KernelBench's metrics per level and tolerance) is rewritten as each task finishes, with each
// task's outputs under DIR/tasks/ and a KernelBench-layout JSON under DIR/kernelbench/; DIR/report.html at
// the end.
// --resume keeps the rows of tasks already finished. With --ray every task is a Ray task (bench_ray.h).
// Exit 0 when every task ended correct.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "cli/bench_ray.h"
#include "cli/commands.h"
#include "cli/optimize_task.h"
#include "common/environment.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "common/version.h"
#include "harness/evaluator.h"
#include "report/bench_summary.h"

namespace egg::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kSampleStride = 5;  // kb-sample: every fifth task of each level
constexpr int kSampleLevels = 3;

struct BenchCommand {
  std::string dir;
  std::vector<int> levels;
  std::string sample;
  std::string kernelbench;
  std::string tasks_glob = "*";
  std::string out = "egg-bench";
  std::vector<double> also_tol;
  std::string gpus;
  int workers = 1;
  int per_gpu = 1;
  bool resume = false;
  bool quick = false;
  bool no_report = false;
  std::string ray;      // a Ray cluster's address, auto or local: every task a Ray task (bench_ray.h)
  int ray_retries = 2;  // attempts after the first when a node or worker dies under a task
  // Set by the Ray driver on a node: run this one task (a local copy) into --out and print its row as JSON.
  std::string ray_task;
  int ray_level = 0;
  std::string ray_store;  // the task's own store, which goes back to the driver
  OptimizeArgs args;
};

struct SuiteTask {
  fs::path path;
  int level = 0;
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

std::vector<fs::path> TasksIn(const fs::path& dir, const std::regex& glob) {
  if (!fs::is_directory(dir)) {
    throw UsageError("task folder not found: " + dir.string());
  }
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
  return tasks;
}

std::string KernelBenchRoot(const BenchCommand& command, const EnvMap& env) {
  std::string root = command.kernelbench;
  if (root.empty()) {
    root = LookupEnv(env, "EGG_KERNELBENCH").value_or("");
  }
  if (root.empty()) {
    throw UsageError("--level and --sample need --kernelbench PATH or EGG_KERNELBENCH");
  }
  return root;
}

std::vector<SuiteTask> SuiteTasks(const BenchCommand& command, const EnvMap& env) {
  const std::regex glob = GlobRegex(command.tasks_glob);
  std::vector<SuiteTask> suite;
  if (!command.sample.empty()) {
    if (command.sample != "kb-sample") {
      throw UsageError("unknown sample " + command.sample + " (known: kb-sample)");
    }
    const fs::path root = KernelBenchRoot(command, env);
    for (int level = 1; level <= kSampleLevels; ++level) {
      const auto tasks = TasksIn(root / ("level" + std::to_string(level)), std::regex(".*"));
      for (size_t i = 0; i < tasks.size(); i += kSampleStride) {
        if (std::regex_match(tasks[i].filename().string(), glob)) {
          suite.push_back({tasks[i], level});
        }
      }
    }
  } else if (!command.levels.empty()) {
    const fs::path root = KernelBenchRoot(command, env);
    for (int level : command.levels) {
      for (const fs::path& path : TasksIn(root / ("level" + std::to_string(level)), glob)) {
        suite.push_back({path, level});
      }
    }
  } else if (!command.dir.empty()) {
    for (const fs::path& path : TasksIn(command.dir, glob)) {
      suite.push_back({path, report::TaskLevel(path.string())});
    }
  } else {
    throw UsageError("give a folder of tasks, --level N or --sample kb-sample");
  }
  if (suite.empty()) {
    throw UsageError("no task matches " + command.tasks_glob);
  }
  return suite;
}

Json StageSpeedups(const Json& report) {
  Json stages = Json::array();
  for (const Json& stage : report.value("stages", Json::array())) {
    stages.push_back({{"stage", stage.value("stage", "")},
                      {"incumbent_ms", stage.value("incumbent_ms", Json())},
                      {"speedup_vs_eager", stage.value("speedup_vs_eager", Json())},
                      {"stopped_because", stage.value("stopped_because", "")}});
  }
  return stages;
}

// Why a task ended without a correct kernel: the run's reason and, when the candidates say more, the last one's
// ("no candidate passed the harness: rejected: no Triton kernel launched in the forward call").
std::string FailureReason(const Json& report) {
  std::string reason = report.value("reason", "");
  std::string last;
  for (const Json& stage : report.value("stages", Json::array())) {
    for (const Json& candidate : stage.value("candidates", Json::array())) {
      const std::string why = candidate.value("reason", "");
      if (!why.empty()) {
        last = candidate.value("status", "") + ": " + why;
      }
    }
  }
  if (!last.empty()) {
    reason += (reason.empty() ? "" : ": ") + last;
  }
  return reason;
}

Json Row(const SuiteTask& task, const TaskOutcome& outcome, double wall_s) {
  const Json& report = outcome.report;
  const Json final = report.value("final", Json());
  Json row = {{"task", task.path.filename().string()},
              {"path", task.path.string()},
              {"level", task.level},
              {"status", report.value("status", "failed")},
              {"egg", EggVersion()},
              {"correct", outcome.correct},
              {"wall_s", wall_s},
              {"out_dir", outcome.out_dir},
              {"run_id", report.value("run_id", "")},
              {"stages", StageSpeedups(report)},
              {"llm", report.value("llm", Json::object())}};
  if (final.is_object()) {
    for (const char* key : {"speedup_vs_eager", "speedup_vs_compile",
                            "time_ms",          "max_abs_err",
                            "max_rel_err",      "triton_time_share",
                            "triton_launches",  "reason",
                            "robust",           "device",
                            "versions",         "tol",
                            "baseline",         "beside_baseline",
                            "speedups",         "baselines",
                            "vacuous",          "float32_answer",
                            "io_bytes",         "flags",
                            "timing_protocol",  "batch_sizes",
                            "by_batch",         "kernel_times"}) {
      row[key] = final.value(key, Json());
    }
    row["precision"] = final.value("precision", "fp32");
  }
  if (!outcome.correct && row.value("reason", Json()).is_null()) {
    row["reason"] = FailureReason(report);
  }
  const Json expert = report.value("expert", Json());
  if (expert.is_object()) {
    row["kernels"] = expert.value("kernels", Json::array()).size();
    row["pytorch_ops"] = expert.value("pytorch_ops", Json::array());
    row["design"] = expert.value("design", Json());  // `egg compile TASK --design` regenerates the kernel
  }
  return row;
}

// The task's result in KernelBench's eval layout (runtimes in ms).
Json KernelBenchJson(const Json& row, const std::string& tol_key) {
  const Json times = row.value("time_ms", Json::object());
  auto mean = [&](const char* key) {
    const Json stats = times.is_object() ? times.value(key, Json()) : Json();
    return stats.is_object() ? stats.value("mean", Json()) : Json();
  };
  const Json candidate = times.is_object() ? times.value("candidate", Json()) : Json();
  return Json{{"problem_id", TaskNumber(row.value("path", ""))},
              {"problem_name", row.value("task", "")},
              {"level", row.value("level", 0)},
              {"compiled", row.value("status", "") != "error"},
              {"correctness", row.value("correct", false)},
              {"runtime", mean("candidate")},
              {"runtime_stats", candidate.is_object() ? Json{{"mean", candidate.value("mean", Json())},
                                                            {"std", candidate.value("std", Json())},
                                                            {"num_trials", candidate.value("n", Json())}}
                                                      : Json()},
              {"ref_runtime", mean("eager")},
              {"ref_runtime_compiled", mean("compile")},
              {"speedup", row.value("speedup_vs_eager", Json())},
              {"speedup_compiled", row.value("speedup_vs_compile", Json())},
              {"metadata", {{"tol", tol_key}, {"reason", row.value("reason", Json())},
                            {"device", row.value("device", Json())}, {"at_tol", row.value("at_tol", Json())}}}};
}

std::string SpeedupText(const Json& row) {
  const Json eager = row.value("speedup_vs_eager", Json());
  const Json compile = row.value("speedup_vs_compile", Json());
  if (!eager.is_number()) {
    return "";  // not timed (CPU) or not correct
  }
  return fmt::format(", {:.2f}x vs eager, {} vs torch.compile (PyTorch {})", eager.get<double>(),
                     compile.is_number() ? fmt::format("{:.2f}x", compile.get<double>()) : "n/a",
                     row.value("baseline", "?"));
}

std::string Duration(double seconds) {
  const auto total = static_cast<int64_t>(seconds);
  constexpr int64_t kMinute = 60;
  return fmt::format("{}m{:02d}s", total / kMinute, total % kMinute);
}

// The suite's shared state: the queue, the rows, the files, the progress lines. Thread-safe.
class Suite {
 public:
  Suite(const BenchCommand& command, std::vector<SuiteTask> tasks, Json rows)
      : command_(command), rows_(std::move(rows)), start_(Clock::now()), total_(tasks.size()) {
    // A row with status "error" is a task that did not finish (a worker or harness failure such as running out
    // of GPU memory): resuming runs it again. Wrong or slow kernels are results and stay.
    rows_.erase(std::remove_if(rows_.begin(), rows_.end(),
                               [](const Json& row) { return row.value("status", "") == "error"; }),
                rows_.end());
    for (SuiteTask& task : tasks) {
      const bool done = std::any_of(rows_.begin(), rows_.end(), [&](const Json& row) {
        return row.value("path", "") == task.path.string();
      });
      if (done) {
        ++finished_;
      } else {
        queue_.push_back(std::move(task));
      }
    }
    already_done_ = finished_;
  }

  std::optional<std::pair<SuiteTask, size_t>> Next() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) {
      return std::nullopt;
    }
    SuiteTask task = queue_.front();
    queue_.pop_front();
    return std::make_pair(task, ++started_ + already_done_);
  }

  void Progress(size_t index, const std::string& task, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const size_t fresh = finished_ - already_done_;
    const std::string eta =
        fresh == 0 ? "?" : Duration(elapsed / static_cast<double>(fresh) * static_cast<double>(total_ - finished_));
    fmt::print(stderr, "egg bench: [{}/{}] {}: {} (elapsed {}, remaining ~{})\n", index, total_, task, what,
               Duration(elapsed), eta);
  }

  void Finish(const Json& row) {
    std::lock_guard<std::mutex> lock(mutex_);
    rows_.push_back(row);
    ++finished_;
    WriteLocked();
    const int level = row.value("level", 0);
    const std::string dir = command_.out + "/kernelbench/level" + std::to_string(level);
    CreateDirectories(dir);
    WriteFileAtomic(dir + "/" + fs::path(row.value("task", "task.py")).stem().string() + ".json",
                    KernelBenchJson(row, report::TolKey(command_.args.eval.tol)).dump(2) + "\n");
  }

  Json Summary() const { return report::BenchSummary(rows_, command_.args.eval.tol, command_.also_tol); }

  void WriteLocked() const {
    Json suite = {
        {"name", command_.sample.empty() ? fs::path(command_.dir).filename().string() : command_.sample},
        {"backend", command_.args.backend},
        {"device", command_.args.eval.device},
        {"tol", command_.args.eval.tol},
        {"precision", command_.args.eval.precision},
        {"also_tol", command_.also_tol},
        {"workers", command_.workers},
        {"per_gpu", command_.per_gpu},
        {"quick", command_.quick}};
    if (!command_.ray.empty()) {
      suite["ray"] = command_.ray;
    }
    Json sorted = rows_;
    std::sort(sorted.begin(), sorted.end(), [](const Json& a, const Json& b) {
      return std::make_tuple(a.value("level", 0), TaskNumber(a.value("path", "")), a.value("task", "")) <
             std::make_tuple(b.value("level", 0), TaskNumber(b.value("path", "")), b.value("task", ""));
    });
    const Json document = {{"format", "egg-bench"}, {"version", 1}, {"suite", suite}, {"tasks", sorted},
                           {"summary", report::BenchSummary(sorted, command_.args.eval.tol, command_.also_tol)}};
    WriteFileAtomic(command_.out + "/results.json", document.dump(2) + "\n");
  }

  const Json& Rows() const { return rows_; }

 private:
  const BenchCommand& command_;
  Json rows_;
  std::deque<SuiteTask> queue_;
  std::mutex mutex_;
  Clock::time_point start_;
  size_t total_ = 0;
  size_t finished_ = 0;
  size_t already_done_ = 0;
  size_t started_ = 0;
};

// One task's search and its row (with --also-tol's re-checks); a task that could not finish is an "error"
// row.
Json TaskRow(const BenchCommand& command, const OptimizeArgs& args, HarnessSession& session,
             harness::Evaluator& evaluator, const SuiteTask& task) {
  const auto start = Clock::now();
  const std::string out_dir = command.out + "/tasks/" + task.path.stem().string();
  try {
    const TaskOutcome outcome = OptimizeTask(args, session, task.path.string(), out_dir);
    Json row = Row(task, outcome, std::chrono::duration<double>(Clock::now() - start).count());
    for (double tol : command.also_tol) {
      harness::EvalOptions options = args.eval;
      options.tol = tol;
      options.timing = false;
      const std::string model = out_dir + "/model_new.py";
      if (FileExists(model)) {
        const harness::EvalResult result = evaluator.Evaluate(task.path.string(), model, options);
        row["at_tol"][report::TolKey(tol)] = {{"correct", result.correct},
                                              {"status", harness::StatusName(result.status)},
                                              {"max_rel_err", result.max_rel_err},
                                              {"reason", result.reason}};
      }
    }
    return row;
  } catch (const EggError& error) {
    return {{"task", task.path.filename().string()},
            {"path", task.path.string()},
            {"level", task.level},
            {"status", "error"},
            {"correct", false},
            {"reason", error.what()},
            {"wall_s", std::chrono::duration<double>(Clock::now() - start).count()}};
  }
}

// One worker's loop: its own session (worker process, store connection) on its own GPU.
void RunWorker(const BenchCommand& command, GlobalOptions globals, int worker, int gpu, Suite* suite) {
  OptimizeArgs args = command.args;
  args.eval.gpu_index = gpu;
  if (command.per_gpu > 1 && command.args.eval.device == "cuda") {
    // Workers sharing a GPU take turns on it: every GPU section of the worker holds this lock.
    globals.gpu_lock = fmt::format("{}/.gpu{}.lock", command.out, gpu);
  }
  HarnessSession session =
      OpenHarnessSession(globals, args.device, &args.eval, PolicyForBackend(args.backend));
  harness::Evaluator evaluator(*session.worker, session.store.get());
  while (auto next = suite->Next()) {
    const auto& [task, index] = *next;
    const std::string name = task.path.filename().string();
    const std::string on_gpu = command.args.eval.device == "cuda" ? fmt::format(" (GPU {})", gpu) : "";
    suite->Progress(index, name, command.workers > 1 ? fmt::format("started on worker {}{}", worker, on_gpu) : "started");
    OptimizeArgs task_args = args;
    task_args.pipeline.on_stage = [&, index = index](const std::string& stage, std::optional<double> speedup) {
      suite->Progress(index, name, stage + (speedup ? fmt::format(", best {:.2f}x vs eager", *speedup) : ""));
    };
    const Json row = TaskRow(command, task_args, session, evaluator, task);
    suite->Progress(index, name, "finished " + row.value("status", "") + SpeedupText(row));
    suite->Finish(row);
  }
}

// On a Ray node: the one task the driver gave, on the GPU Ray gave (CUDA_VISIBLE_DEVICES), into its own
// store; prints the row as one JSON line.
int RunRayTask(const BenchCommand& command, GlobalOptions globals) {
  const EnvMap env = CurrentEnvironment();
  OptimizeArgs args = command.args;
  args.eval.gpu_index = 0;
  if (!command.ray_store.empty()) {
    globals.db_path = command.ray_store;
  }
  if (command.per_gpu > 1 && args.eval.device == "cuda") {
    globals.gpu_lock = NodeGpuLock(env);
  }
  HarnessSession session = OpenHarnessSession(globals, args.device, &args.eval, PolicyForBackend(args.backend));
  harness::Evaluator evaluator(*session.worker, session.store.get());
  const SuiteTask task{fs::absolute(command.ray_task), command.ray_level};
  const std::string name = task.path.filename().string();
  args.pipeline.on_stage = [&](const std::string& stage, std::optional<double> speedup) {
    fmt::print(stderr, "egg bench: {}: {}\n", name,
               stage + (speedup ? fmt::format(", best {:.2f}x vs eager", *speedup) : ""));
  };
  fmt::print("{}\n", TaskRow(command, args, session, evaluator, task).dump());
  return kExitOk;
}

// Every task of the suite not yet done as a Ray task; the rows and files come back as each finishes, the
// task's store rows are merged into this one.
void RunOnRay(const BenchCommand& command, const GlobalOptions& globals, Suite* suite) {
  std::map<std::string, std::pair<SuiteTask, size_t>> pending;
  RayJob job{.address = command.ray,
             .egg_args = globals.command_line,
             .device = command.args.eval.device,
             .per_gpu = command.per_gpu,
             .retries = command.ray_retries,
             .out = command.out,
             .tasks = Json::array()};
  while (auto next = suite->Next()) {
    job.tasks.push_back({{"path", next->first.path.string()}, {"level", next->first.level}});
    pending.emplace(next->first.path.string(), *next);
  }
  if (pending.empty()) {
    return;
  }
  const std::unique_ptr<store::Store> store =
      globals.no_store ? nullptr : OpenStore(globals, CurrentEnvironment());
  RunRayJob(job, globals, [&](const Json& event) {
    const auto found = pending.find(event.value("task", ""));
    if (found == pending.end()) {
      return;  // not a task of this suite, or one already finished
    }
    const auto& [task, index] = found->second;
    const std::string name = task.path.filename().string();
    if (event.value("event", "") == "retry") {
      suite->Progress(index, name,
                      fmt::format("attempt {} failed ({}); running it again", event.value("attempt", 0),
                                  event.value("reason", "")));
      return;
    }
    Json row = event.value("row", Json::object());
    row["task"] = name;
    row["path"] = task.path.string();
    row["level"] = task.level;
    row["out_dir"] = command.out + "/tasks/" + task.path.stem().string();
    const Json store_path = event.value("store", Json());
    if (store && store_path.is_string()) {
      store->MergeFrom(store_path.get<std::string>());
    }
    const std::string node = row.value("ray", Json::object()).value("node", "?");
    suite->Progress(index, name,
                    "finished " + row.value("status", "") + " on node " + node + SpeedupText(row));
    suite->Finish(row);
    pending.erase(found);
  });
}

std::vector<int> WorkerGpus(const BenchCommand& command) {
  std::vector<int> gpus;
  if (!command.gpus.empty()) {
    std::stringstream stream(command.gpus);
    std::string part;
    while (std::getline(stream, part, ',')) {
      try {
        gpus.push_back(std::stoi(part));
      } catch (const std::exception&) {
        throw UsageError("--gpus takes indices like 0,1,2: " + command.gpus);
      }
    }
  } else {
    for (int i = 0; i < command.workers; ++i) {
      gpus.push_back(command.args.device == "cpu" ? 0 : i);
    }
  }
  std::vector<int> workers;
  for (int gpu : gpus) {
    workers.insert(workers.end(), static_cast<size_t>(command.per_gpu), gpu);
  }
  return workers;
}

void WriteHtml(const BenchCommand& command, const GlobalOptions& globals) {
  const EnvMap env = CurrentEnvironment();
  const std::string root = EggRoot(env);
  const std::string python = WorkerPython(env, globals.python);
  const std::vector<std::string> worker_env = WorkerEnvironment(env, {{"PYTHONPATH", root + "/python"}});
  const std::string html = command.out + "/report.html";
  const int status = RunProcess({python, "-m", "egg_report", command.out + "/results.json", "--out", html},
                                worker_env, command.out + "/report.log");
  if (status == 0) {
    fmt::print("wrote {}\n", html);
  } else {
    fmt::print(stderr, "egg bench: the HTML report failed (see {}/report.log)\n", command.out);
  }
}

void RunWorkers(const BenchCommand& command, const GlobalOptions& globals, const std::vector<int>& gpus,
                Suite* suite) {
  std::vector<std::thread> threads;
  std::mutex error_mutex;
  std::string first_error;
  for (size_t worker = 0; worker < gpus.size(); ++worker) {
    threads.emplace_back([&, worker, gpu = gpus[worker]] {
      try {
        RunWorker(command, globals, static_cast<int>(worker), gpu, suite);
      } catch (const std::exception& error) {
        std::lock_guard<std::mutex> lock(error_mutex);
        first_error = first_error.empty() ? error.what() : first_error;
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  if (!first_error.empty()) {
    throw WorkerError(first_error);
  }
}

int RunBench(BenchCommand& command, const GlobalOptions& globals) {
  const EnvMap env = CurrentEnvironment();
  command.args.eval.device = ResolveDevice(command.args.device, env);
  if (command.quick) {
    ApplyQuickSearch(&command.args);
  }
  if (!command.ray_task.empty()) {
    return RunRayTask(command, globals);
  }
  std::vector<SuiteTask> tasks = SuiteTasks(command, env);
  const std::vector<int> gpus = WorkerGpus(command);
  command.workers = static_cast<int>(gpus.size());
  CreateDirectories(command.out);
  Json rows = Json::array();
  const std::string results_path = command.out + "/results.json";
  if (command.resume && FileExists(results_path)) {
    rows = Json::parse(ReadFile(results_path)).value("tasks", Json::array());
  }
  Suite suite(command, std::move(tasks), rows);
  if (command.ray.empty()) {
    RunWorkers(command, globals, gpus, &suite);
  } else {
    RunOnRay(command, globals, &suite);
  }
  const Json summary = suite.Summary();
  {
    suite.WriteLocked();
  }
  if (!command.no_report) {
    WriteHtml(command, globals);
  }
  const Json& overall = summary["overall"];
  const Json& metrics = overall["tol"][report::TolKey(command.args.eval.tol)];
  fmt::print("{} of {} tasks correct; wrote {}\n", metrics.value("correct", 0), overall.value("tasks", 0),
             results_path);
  return metrics.value("correct", 0) == overall.value("tasks", 0) ? kExitOk : kExitCandidateFailed;
}

}  // namespace

CommandRunner RegisterBench(CLI::App& app, const GlobalOptions& globals) {
  auto command = std::make_shared<BenchCommand>();
  CLI::App* sub = app.add_subcommand("bench", "Run egg optimize over a folder of tasks or KernelBench levels");
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->add_option("dir", command->dir, "Folder of KernelBench-format tasks");
  sub->add_option("--level", command->levels, "KernelBench level(s) under --kernelbench")
      ->check(CLI::Range(1, 4))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--sample", command->sample, "A fixed sample: kb-sample (every fifth task of levels 1-3)");
  sub->add_option("--kernelbench", command->kernelbench, "KernelBench root (default $EGG_KERNELBENCH)");
  sub->add_option("--tasks", command->tasks_glob, "Only tasks whose file name matches this glob");
  sub->add_option("--out", command->out, "Output folder (default egg-bench)");
  sub->add_option("--also-tol", command->also_tol, "Also check each final kernel at these tolerances")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--gpus", command->gpus, "GPU indices, one worker each (e.g. 0,1,2,3)");
  sub->add_option("--workers", command->workers, "Workers (GPUs 0..N-1, or CPU workers with --device cpu)")
      ->check(CLI::Range(1, 64));
  sub->add_option("--per-gpu", command->per_gpu,
                  "Workers per GPU: their CPU work overlaps, their GPU work takes turns (default 1)")
      ->check(CLI::Range(1, 8));
  sub->add_flag("--resume", command->resume, "Keep the rows of tasks already in OUT/results.json");
  sub->add_flag("--quick", command->quick, "Smoke mode: at most 2 seeds, one round per stage, no seed refinement");
  sub->add_flag("--no-report", command->no_report, "Skip OUT/report.html");
  sub->add_option(
      "--ray", command->ray,
      "Run every task as a Ray task on this Ray cluster: host:port, ray://host:port, auto, or local "
      "(a cluster on this host); needs the ray package");
  sub->add_option("--ray-retries", command->ray_retries,
                  "With --ray: attempts after the first when a node or worker dies under a task (default 2)")
      ->check(CLI::Range(0, 10));
  sub->add_option("--ray-task", command->ray_task)->group("");
  sub->add_option("--ray-level", command->ray_level)->group("");
  sub->add_option("--ray-store", command->ray_store)->group("");
  AddSearchOptions(*sub, &command->args);
  return [sub, command, &globals]() -> int { return sub->parsed() ? RunBench(*command, globals) : -1; };
}

}  // namespace egg::cli
