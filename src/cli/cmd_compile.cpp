// `egg compile TASK.py`: the expert backend's compiler alone: capture, plan, generate one candidate file for a
// seed design (no search, no evaluation). Exit 0 when a candidate was written, 1 when none could be made.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/task_file.h"
#include "common/error.h"
#include "common/fs.h"
#include "expert/expert.h"

namespace egg::cli {
namespace {

struct CompileArgs {
  std::string task;
  std::string out;
  std::string device = "auto";
  std::string design_json;
  std::string graph_file;  // a captured IR (the worker's capture result) to compile instead of capturing
  int seed = 0;
  bool json = false;
  harness::EvalOptions options;
};

// A graph saved from an earlier capture (the worker's `graph` field): compiling it needs no worker, which
// makes the compiler's output reproducible from files alone (tests/golden compares it across compiler
// changes).
expert::ParsedGraph ReadGraphFile(const std::string& path) {
  if (!FileExists(path)) {
    throw UsageError("--graph file not found: " + path);
  }
  Json ir;
  try {
    ir = Json::parse(ReadFile(path));
  } catch (const Json::exception& error) {
    throw UsageError("--graph is not JSON: " + std::string(error.what()));
  }
  expert::ParsedGraph graph = expert::ParseGraph(ir.is_object() && ir.contains("graph") ? ir["graph"] : ir);
  if (!graph.graph) {
    throw UsageError("--graph is not a captured graph: " + graph.problem);
  }
  return graph;
}

struct CompileInput {
  expert::ParsedGraph graph;
  std::string task_source;
};

// The task's source and its graph, captured by a worker or read from --graph (a .pt2's source needs a
// worker).
CompileInput ReadTask(CompileArgs& args, const GlobalOptions& globals, const std::string& task_path) {
  if (!args.graph_file.empty() && !IsProgramFile(task_path)) {
    return {ReadGraphFile(args.graph_file), ReadFile(task_path)};
  }
  HarnessSession session = OpenHarnessSession(globals, args.device, &args.options, SandboxPolicy::kOptional);
  std::string task_source = TaskSource(*session.worker, task_path);
  if (!args.graph_file.empty()) {
    return {ReadGraphFile(args.graph_file), std::move(task_source)};
  }
  expert::CaptureOptions capture;
  capture.device = args.options.device;
  capture.init_seed = args.options.init_seed;
  capture.precision = args.options.precision;
  capture.dynamic = args.options.dynamic;
  return {expert::CaptureGraph(*session.worker, task_path, capture), std::move(task_source)};
}

int RunCompile(CompileArgs& args, const GlobalOptions& globals) {
  const std::string task_path = AbsolutePath(args.task);
  if (!FileExists(task_path)) {
    throw UsageError("task file not found: " + task_path);
  }
  expert::CandidateDesign design;
  design.seed = args.seed;
  design.plan = expert::SeedPlan(args.seed);
  if (!args.design_json.empty()) {
    try {
      design = expert::CandidateDesign::FromJson(Json::parse(args.design_json));
    } catch (const Json::exception& error) {
      throw UsageError(std::string("--design is not a design record: ") + error.what());
    } catch (const expert::UnknownName& error) {
      throw UsageError(std::string("--design is not a design record: ") + error.what());
    }
    if (design.seed < 0 || design.seed >= expert::kSeedFamilies) {
      throw UsageError("--design: seed must be 0.." + std::to_string(expert::kSeedFamilies - 1));
    }
  }
  const CompileInput input = ReadTask(args, globals, task_path);
  const expert::ParsedGraph& graph = input.graph;
  if (!graph.graph) {
    fmt::print(stderr, "egg: {}\n", graph.problem);
    return kExitCandidateFailed;
  }
  const std::string name = std::filesystem::path(task_path).filename().string();
  expert::Candidate candidate = expert::GenerateCandidate(*graph.graph, input.task_source, name, design);
  if (args.design_json.empty()) {  // seed 0 as egg optimize proposes it: many launches in one CUDA graph
    expert::DesignMove seed;
    seed.design = design;
    if (const auto graphed = expert::GraphedSeed(seed, candidate)) {
      candidate = expert::GenerateCandidate(*graph.graph, input.task_source, name, graphed->design);
    }
  }
  if (!candidate.source) {
    fmt::print(stderr, "egg: {}\n", candidate.problem);
    return kExitCandidateFailed;
  }
  // A design that names a kernel the plan does not have is not applied to anything: say so, with the names
  // the plan has (a stale name from an older plan would otherwise silently leave the seed's design in place).
  // A named kernel whose design does not fit it (DesignFits: block sizes, algorithm, precision) gets the
  // seed's.
  std::vector<std::string> planned;
  for (const expert::KernelPlan& kernel : candidate.plan.kernels) {
    planned.push_back(kernel.name);
    const auto requested = design.kernels.find(kernel.name);
    if (requested != design.kernels.end() && !expert::DesignFits(kernel, requested->second)) {
      fmt::print(stderr,
                 "egg compile: warning: --design's {} for kernel {} does not fit it; the seed's is used\n",
                 requested->second.ToJson().dump(), kernel.name);
    }
  }
  for (const auto& [kernel_name, kernel_design] : design.kernels) {
    if (std::find(planned.begin(), planned.end(), kernel_name) == planned.end()) {
      fmt::print(stderr,
                 "egg compile: warning: --design names kernel {}, which the plan does not have ({})\n",
                 kernel_name, fmt::join(planned, ", "));
    }
  }
  const std::string out =
      args.out.empty() ? "egg-out/" + std::filesystem::path(task_path).stem().string() + "_expert.py" : args.out;
  const auto parent = std::filesystem::path(out).parent_path();
  if (!parent.empty()) {
    CreateDirectories(parent.string());
  }
  WriteFileAtomic(out, *candidate.source);
  if (args.json) {
    Json report = candidate.ReportJson();
    report["candidate"] = out;
    fmt::print("{}\n", report.dump(2));
  } else {
    fmt::print("wrote {}: {} Triton kernel(s), {} op(s) in PyTorch\n", out, candidate.kernels.size(),
               candidate.pytorch_ops.size());
  }
  return kExitOk;
}

}  // namespace

CommandRunner RegisterCompile(CLI::App& app, const GlobalOptions& globals) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* command = app.add_subcommand("compile", "Generate one Triton candidate for a task with the expert compiler");
  command->add_option("task", args->task, "KernelBench-format task, or a torch.export program (.pt2)")
      ->required();
  command->add_option("--out", args->out, "Candidate file to write (default egg-out/<task>_expert.py)");
  command
      ->add_option("--seed", args->seed,
                   "Seed design family (0, 1, 2); seed 0 as egg optimize proposes it (a CUDA graph for 8 "
                   "launches or more)")
      ->check(CLI::Range(0, 2));
  command->add_option("--design", args->design_json, "A design record (JSON) to generate instead of a seed");
  command->add_option("--graph", args->graph_file,
                      "Compile this captured graph (JSON) instead of capturing the task");
  command->add_flag("--json", args->json, "Print the plan and design as JSON");
  command->add_option("--device", args->device, "cuda, cpu or auto")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}));
  command
      ->add_option("--precision", args->options.precision,
                   "fp32, bf16 or fp16: capture the task with its inputs, parameters and buffers cast to it "
                   "(a --graph keeps the dtypes it was captured in)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  AddDynamicOptions(*command, &args->options);
  return [command, args, &globals]() -> int { return command->parsed() ? RunCompile(*args, globals) : -1; };
}

}  // namespace egg::cli
