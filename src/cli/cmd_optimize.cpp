#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>

#include "agents/llm_agents.h"
#include "cli/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "llm/llm.h"
#include "pipeline/pipeline.h"
#include "report/run_report.h"

namespace egg::cli {
namespace {

constexpr size_t kRunIdChars = 16;

struct OptimizeArgs {
  std::string task;
  std::string backend = "expert";
  std::string device = "auto";
  std::string out;
  std::string config_path;
  std::string provider;
  std::string base_url;
  std::string model;
  double llm_timeout_s = 0;
  int max_retries = -1;
  int64_t max_calls = 0;
  int64_t max_tokens = 0;
  double max_cost_usd = 0;
  pipeline::PipelineOptions pipeline;
  harness::EvalOptions eval;
};

std::map<std::string, std::string> LlmOverrides(const OptimizeArgs& args) {
  std::map<std::string, std::string> overrides;
  auto put = [&](const char* key, const std::string& value) {
    if (!value.empty()) {
      overrides[key] = value;
    }
  };
  put("provider", args.provider);
  put("base_url", args.base_url);
  put("model", args.model);
  if (args.llm_timeout_s > 0) {
    overrides["request_timeout_s"] = std::to_string(args.llm_timeout_s);
  }
  if (args.max_calls > 0) {
    overrides["max_calls"] = std::to_string(args.max_calls);
  }
  if (args.max_tokens > 0) {
    overrides["max_tokens"] = std::to_string(args.max_tokens);
  }
  if (args.max_cost_usd > 0) {
    overrides["max_cost_usd"] = std::to_string(args.max_cost_usd);
  }
  return overrides;
}

Json SearchOptionsJson(const OptimizeArgs& args, const llm::LlmConfig& llm) {
  return Json{{"backend", args.backend},
              {"device", args.eval.device},
              {"provider", llm.provider == llm::Provider::kOpenAi ? "openai" : "anthropic"},
              {"model", llm.model},
              {"seeds", args.pipeline.seeds},
              {"rounds", args.pipeline.rounds},
              {"candidates_per_round", args.pipeline.candidates_per_round},
              {"debug_attempts", args.pipeline.debug_attempts},
              {"tol", args.eval.tol},
              {"trials", args.eval.trials}};
}

Json LlmUsageJson(store::Store* store, const std::string& run_id, const llm::LlmClient& client) {
  Json usage = {{"calls", client.Calls()},
                {"input_tokens", client.Spent().input_tokens},
                {"output_tokens", client.Spent().output_tokens},
                {"cost_usd", client.Spent().cost_usd},
                {"max_prompt_chars", 0}};
  if (store != nullptr) {
    int64_t calls = 0, input = 0, output = 0, max_prompt = 0;
    double cost = 0;
    for (const auto& call : store->LlmCallsForRun(run_id)) {
      ++calls;
      input += call.input_tokens;
      output += call.output_tokens;
      cost += call.cost_usd;
      max_prompt = std::max(max_prompt, call.prompt_chars);
    }
    usage = {{"calls", calls},
             {"input_tokens", input},
             {"output_tokens", output},
             {"cost_usd", cost},
             {"max_prompt_chars", max_prompt}};
  }
  return usage;
}

int RunOptimize(OptimizeArgs& args, const GlobalOptions& globals) {
  if (args.backend != "llm") {
    throw UsageError("--backend " + args.backend + " is not available yet; use --backend llm");
  }
  const EnvMap env = CurrentEnvironment();
  const llm::LlmConfig llm_config = [&] {
    llm::LlmConfig config = llm::LoadLlmConfig(args.config_path, env, LlmOverrides(args));
    if (args.max_retries >= 0) {
      config.max_retries = args.max_retries;
    }
    return config;
  }();
  const std::string task_path = AbsolutePath(args.task);
  if (!FileExists(task_path)) {
    throw UsageError("task file not found: " + task_path);
  }
  HarnessSession session = OpenHarnessSession(globals, args.device, &args.eval);
  args.eval.cpu_wall_timing = args.eval.device == "cpu";
  const std::string task_hash = FileSha256Hex(task_path);
  const Json search = SearchOptionsJson(args, llm_config);
  const std::string run_id =
      Sha256Hex(Json{{"task", task_hash}, {"search", search}}.dump()).substr(0, kRunIdChars);
  const std::string out_dir =
      args.out.empty() ? "egg-out/" + std::filesystem::path(task_path).stem().string() : args.out;
  CreateDirectories(out_dir);
  store::Store* store = session.store.get();
  if (store != nullptr) {
    store->PutRun(
        {run_id, task_path, task_hash, "llm", args.eval.device, search.dump(), "running", "", "", ""});
  }
  fmt::print(stderr, "egg: run {} ({} on {}, model {})\n", run_id, args.backend, args.eval.device,
             llm_config.model);

  harness::Evaluator evaluator(*session.worker, store);
  pipeline::HarnessCandidateEvaluator candidates(evaluator, *session.worker, task_path, args.eval);
  auto client = llm::MakeLlmClient(llm_config, nullptr);
  agents::Backend backend =
      agents::MakeLlmBackend(*client, store, {run_id, search["provider"], llm_config.model});
  args.pipeline.run_id = run_id;
  args.pipeline.run_dir = EggHome(env) + "/runs/" + run_id;
  args.pipeline.task_source = ReadFile(task_path);
  args.pipeline.tol = args.eval.tol;
  pipeline::Pipeline pipeline(backend, candidates, store, args.pipeline);
  const pipeline::RunResult result = pipeline.Run();

  std::optional<harness::EvalResult> final_eval;
  if (result.final) {
    const std::string final_path = out_dir + "/model_new.py";
    WriteFileAtomic(final_path, result.final->source);
    final_eval = evaluator.Evaluate(task_path, final_path, args.eval);
  }
  report::RunMeta meta{run_id,
                       task_path,
                       task_hash,
                       "llm",
                       args.eval.device,
                       llm_config.model,
                       LlmUsageJson(store, run_id, *client),
                       search};
  const Json report = report::BuildRunReport(result, meta, final_eval ? &*final_eval : nullptr);
  WriteFileAtomic(out_dir + "/report.json", report.dump(2) + "\n");
  WriteFileAtomic(out_dir + "/trajectory.md", report::TrajectoryMarkdown(report));
  if (store != nullptr) {
    store->PutRun({run_id, task_path, task_hash, "llm", args.eval.device, search.dump(), report["status"],
                   result.stopped_because, result.final ? result.final->id : "", report.dump()});
  }
  const bool correct = final_eval && final_eval->correct;
  fmt::print("status: {} ({}){}\n", correct ? "ok" : "failed", result.stopped_because,
             correct ? "" : " - " + result.reason);
  fmt::print("wrote {}/report.json, {}/trajectory.md{}\n", out_dir, out_dir,
             result.final ? ", " + out_dir + "/model_new.py" : "");
  return correct ? kExitOk : kExitCandidateFailed;
}

}  // namespace

CommandRunner RegisterOptimize(CLI::App& app, const GlobalOptions& globals) {
  auto args = std::make_shared<OptimizeArgs>();
  CLI::App* command = app.add_subcommand("optimize", "Search for fast, verified Triton kernels for a task");
  command->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  command->add_option("task", args->task, "KernelBench-format task")->required();
  command->add_option("--backend", args->backend, "expert, llm or hybrid")
      ->check(CLI::IsMember({"expert", "llm", "hybrid"}))
      ->default_val("expert");
  command->add_option("--out", args->out, "Output directory (default egg-out/<task>)");
  command->add_option("--seeds", args->pipeline.seeds, "Structurally different seeds")
      ->check(CLI::Range(1, 16))
      ->default_val(3);
  command->add_option("--rounds", args->pipeline.rounds, "Rounds per refinement stage")
      ->check(CLI::Range(0, 32))
      ->default_val(2);
  command->add_option("--candidates-per-round", args->pipeline.candidates_per_round, "Candidates per round")
      ->check(CLI::Range(1, 16))
      ->default_val(2);
  command->add_option("--debug-attempts", args->pipeline.debug_attempts, "Repairs per failed candidate")
      ->check(CLI::Range(0, 8))
      ->default_val(2);
  command->add_option("--config", args->config_path, "TOML config file with [llm] and [budget]");
  command->add_option("--provider", args->provider, "openai or anthropic")
      ->check(CLI::IsMember({"openai", "anthropic"}));
  command->add_option("--base-url", args->base_url, "LLM API base URL");
  command->add_option("--model", args->model, "LLM model name");
  command->add_option("--llm-timeout", args->llm_timeout_s, "LLM request timeout, seconds")
      ->check(CLI::PositiveNumber);
  command->add_option("--max-retries", args->max_retries, "LLM retries per call")->check(CLI::Range(0, 10));
  command->add_option("--max-calls", args->max_calls, "Budget: LLM calls")->check(CLI::PositiveNumber);
  command->add_option("--max-tokens", args->max_tokens, "Budget: LLM tokens")->check(CLI::PositiveNumber);
  command->add_option("--max-cost", args->max_cost_usd, "Budget: dollars")->check(CLI::PositiveNumber);
  AddEvalOptions(*command, &args->eval, &args->device);
  return [command, args, &globals]() -> int { return command->parsed() ? RunOptimize(*args, globals) : -1; };
}

}  // namespace egg::cli
