#include "cli/optimize_task.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <memory>

#include "agents/llm_agents.h"
#include "cli/task_file.h"
#include "common/environment.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "expert/expert.h"
#include "llm/llm.h"
#include "pipeline/pipeline.h"
#include "report/run_report.h"

namespace egg::cli {
namespace {

constexpr size_t kRunIdChars = 16;

void Report(pipeline::ProgressSink* sink, const pipeline::ProgressEvent& event) {
  if (sink != nullptr) {
    sink->OnProgress(event);
  }
}

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
  if (args.max_output_tokens > 0) {
    overrides["max_output_tokens"] = std::to_string(args.max_output_tokens);
  }
  if (args.llm_concurrency > 0) {
    overrides["max_concurrency"] = std::to_string(args.llm_concurrency);
  }
  put("api", args.api);
  put("reasoning_effort", args.reasoning_effort);
  return overrides;
}

Json SearchOptionsJson(const OptimizeArgs& args, const std::optional<llm::LlmConfig>& llm) {
  Json search{{"backend", args.backend},
              {"device", args.eval.device},
              {"provider", llm ? (llm->provider == llm::Provider::kOpenAi ? "openai" : "anthropic") : ""},
              {"model", llm ? llm->model : "expert"},
              {"seeds", args.pipeline.seeds},
              {"rounds", args.pipeline.rounds},
              {"candidates_per_round", args.pipeline.candidates_per_round},
              {"debug_attempts", args.pipeline.debug_attempts},
              {"tol", args.eval.tol},
              {"trials", args.eval.trials}};
  if (args.eval.precision != "fp32") {  // only when half: fp32 runs keep their ids
    search["precision"] = args.eval.precision;
  }
  if (args.pipeline.time_budget_s > 0) {  // only when set: runs without one keep their ids
    search["time_budget_s"] = args.pipeline.time_budget_s;
  }
  if (args.cpu_wall_tuning) {
    search["cpu_wall_tuning"] = true;
  }
  if (llm && llm->max_output_tokens > 0) {
    search["max_output_tokens"] = llm->max_output_tokens;
  }
  if (llm && !llm->reasoning_effort.empty()) {
    search["reasoning_effort"] = llm->reasoning_effort;
  }
  return search;
}

// The client's failed attempts by kind, its request changes, and this process's cached and reasoning tokens.
void AddLlmDetails(const llm::LlmClient& client, Json* usage) {
  const llm::Usage spent = client.Spent();
  (*usage)["cached_input_tokens"] = spent.cached_input_tokens;
  (*usage)["cache_write_tokens"] = spent.cache_write_tokens;
  (*usage)["reasoning_tokens"] = spent.reasoning_tokens;
  Json errors = Json::object();
  for (const auto& [kind, tally] : client.Errors()) {
    errors[kind] = {{"count", tally.count}, {"last_message", tally.last_message}};
  }
  (*usage)["errors"] = errors;
  (*usage)["adaptations"] = client.Adaptations();
}

Json LlmUsageJson(store::Store* store, const std::string& run_id, const llm::LlmClient& client) {
  Json usage = {{"calls", client.Calls()},
                {"input_tokens", client.Spent().input_tokens},
                {"output_tokens", client.Spent().output_tokens},
                {"cost_usd", client.Spent().cost_usd},
                {"max_prompt_chars", 0}};
  AddLlmDetails(client, &usage);
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
    usage.update({{"calls", calls},
                  {"input_tokens", input},
                  {"output_tokens", output},
                  {"cost_usd", cost},
                  {"max_prompt_chars", max_prompt}});
  }
  return usage;
}

constexpr const char* kCpuTuningNote =
    "measured tuning skipped: no GPU (the interpreter's timings are not performance figures); the seeds were "
    "checked for correctness and the first correct one kept";

// The expert backend's report section for the final candidate: its kernels, the ops in PyTorch, the design.
Json ExpertSection(const expert::Graph& graph, const std::string& task_source, const std::string& task_name,
                   const std::optional<pipeline::CandidateRecord>& final,
                   const std::optional<harness::EvalResult>& final_eval) {
  // Without a correct candidate, the plan of seed 0 says what would run where (the ops left to PyTorch).
  const auto design = final ? expert::DesignOf(final->design) : expert::CandidateDesign{};
  if (!design) {
    return Json();
  }
  const expert::Candidate candidate = expert::GenerateCandidate(graph, task_source, task_name, *design);
  Json section = candidate.ReportJson();
  if (!final) {
    section["of"] = "seed 0: no candidate passed the harness";
  }
  section["triton_time_share"] = final_eval ? Json(final_eval->triton_time_share) : Json();
  section["triton_launches"] = final_eval ? Json(final_eval->triton_launches) : Json();
  return section;
}

expert::Graph Capture(HarnessSession& session, const std::string& task_path, const std::string& task_name,
                      const OptimizeArgs& args) {
  pipeline::ProgressSink* progress = args.pipeline.progress;
  Report(progress, {.kind = pipeline::ProgressKind::kCapture, .detail = task_name});
  expert::CaptureOptions capture;
  capture.device = args.eval.device;
  capture.init_seed = args.eval.init_seed;
  capture.precision = args.eval.precision;
  capture.dynamic = args.eval.dynamic;
  expert::ParsedGraph parsed = expert::CaptureGraph(*session.worker, task_path, capture);
  if (!parsed.graph) {
    throw ConfigError("the expert backend cannot capture this task: " + parsed.problem);
  }
  Report(progress,
         {.kind = pipeline::ProgressKind::kCaptured, .total = static_cast<int>(parsed.graph->nodes.size())});
  return std::move(*parsed.graph);
}

// The final kernel's verdict and the numbers reported. On a GPU it is measured again, in a fresh worker and
// past the cache: the full protocol, after the search, in a process that holds nothing of it (no other
// candidate's modules, graphs or compile pools), like a user's own script; the search's row of the same file
// may be older. Untimed (the CPU) it is the search's evaluation of the final candidate's file, from the
// store: model_new.py is that file's source under its tolerance header (a comment), which alone would change
// the file's hash and so evaluate the same code again (the interpreter's whole protocol, a second time).
// Where that file is gone or holds other text, model_new.py itself is evaluated.
harness::EvalResult FinalEvaluation(harness::Evaluator& evaluator, HarnessSession& session,
                                    const std::string& task_path, const std::string& final_path,
                                    const pipeline::CandidateRecord& final, const OptimizeArgs& args) {
  harness::EvalOptions options = args.eval;
  const bool timed = options.device == "cuda" && options.timing;
  Report(args.pipeline.progress,
         {.kind = pipeline::ProgressKind::kFinal,
          .candidate_id = final.id,
          .detail = timed ? "evaluated again in a fresh worker (full protocol, not from the cache)"
                          : "its evaluation, from the store",
          .best = pipeline::ProgressBest{final.id, final.MedianMs(), final.eval.speedup_median_vs_eager,
                                         final.eval.speedup_median_vs_compile}});
  if (!timed) {
    const bool searched_file =
        !final.path.empty() && FileExists(final.path) && ReadFile(final.path) == final.source;
    return evaluator.Evaluate(task_path, searched_file ? final.path : final_path, options);
  }
  session.worker->Restart();
  options.use_cache = false;
  return evaluator.Evaluate(task_path, final_path, options);
}

pipeline::ProgressEvent DoneEvent(const pipeline::RunResult& result,
                                  const std::optional<harness::EvalResult>& final) {
  pipeline::ProgressEvent done{.kind = pipeline::ProgressKind::kDone,
                               .accepted = final && final->correct,
                               .detail = result.stopped_because};
  if (final && final->correct && result.final) {
    const auto& time = final->time_ms.candidate;
    done.best =
        pipeline::ProgressBest{result.final->id, time ? std::optional<double>(time->median) : std::nullopt,
                               final->speedup_median_vs_eager, final->speedup_median_vs_compile};
  }
  return done;
}

TaskOutcome RunOptimizeTask(OptimizeArgs& args, HarnessSession& session, const std::string& task_path,
                            const std::string& out_dir) {
  const bool use_llm = args.backend == "llm" || args.backend == "hybrid";
  const bool use_expert = args.backend != "llm";
  const EnvMap env = CurrentEnvironment();
  std::optional<llm::LlmConfig> llm_config;
  if (use_llm) {
    llm_config = llm::LoadLlmConfig(args.config_path, env, LlmOverrides(args));
    if (args.max_retries >= 0) {
      llm_config->max_retries = args.max_retries;
    }
  }
  const bool on_cpu = args.eval.device == "cpu";
  args.eval.cpu_wall_timing = on_cpu && (use_llm || args.cpu_wall_tuning);
  const std::string task_hash = FileSha256Hex(task_path);
  const Json search = SearchOptionsJson(args, llm_config);
  const std::string run_id =
      Sha256Hex(Json{{"task", task_hash}, {"search", search}}.dump()).substr(0, kRunIdChars);
  if (args.backend == "llm" && IsProgramFile(task_path)) {
    throw UsageError("a .pt2 program needs the expert or hybrid backend (the LLM backend reads a task file)");
  }
  const std::string task_source = TaskSource(*session.worker, task_path);
  const std::string task_name = std::filesystem::path(task_path).filename().string();
  const std::string model_name = use_llm ? llm_config->model : "expert";
  fmt::print(stderr, "egg: run {} ({} on {}{})\n", run_id, args.backend, args.eval.device,
             use_llm ? ", model " + model_name : "");
  std::optional<expert::Graph> graph;
  if (use_expert) {
    graph = Capture(session, task_path, task_name, args);
  }
  CreateDirectories(out_dir);
  store::Store* store = session.store.get();
  if (store != nullptr) {
    store->PutRun({run_id, task_path, task_hash, args.backend, args.eval.device, search.dump(), "running", "", "",
                   ""});
  }

  harness::Evaluator evaluator(*session.worker, store);
  pipeline::HarnessCandidateEvaluator candidates(evaluator, *session.worker, task_path, args.eval);
  std::unique_ptr<llm::LlmClient> client;
  if (use_llm) {
    client = llm::MakeLlmClient(*llm_config, nullptr);
    args.pipeline.agent_concurrency = llm_config->max_concurrency;
  }
  const agents::LlmAgentConfig agent_config{run_id, use_llm ? search["provider"].get<std::string>() : "",
                                            model_name};
  agents::Backend backend;
  std::string notes;
  if (!use_expert) {
    backend = agents::MakeLlmBackend(*client, store, agent_config);
  } else {
    const expert::ExpertConfig expert_config{&*graph, task_source, task_name};
    backend = use_llm ? expert::MakeHybridBackend(expert_config, *client, store, agent_config)
                      : expert::MakeExpertBackend(expert_config);
    args.pipeline.screen_seeds = true;
    if (on_cpu && !args.eval.cpu_wall_timing) {
      args.pipeline.tune = false;
      args.pipeline.refine_seeds = false;
      args.pipeline.tuning_note = kCpuTuningNote;
      notes = kCpuTuningNote;
    }
  }
  args.pipeline.run_id = run_id;
  args.pipeline.run_dir = EggHome(env) + "/runs/" + run_id;
  args.pipeline.task_source = task_source;
  args.pipeline.tol = args.eval.tol;
  args.pipeline.precision = args.eval.precision;
  pipeline::Pipeline pipeline(backend, candidates, store, args.pipeline);
  const pipeline::RunResult result = pipeline.Run();
  const std::string stop_failure = result.reason;

  std::optional<harness::EvalResult> final_eval;
  if (result.final) {
    const std::string final_path = out_dir + "/model_new.py";
    WriteFileAtomic(final_path, ToleranceHeader(args.eval) + result.final->source);
    final_eval = FinalEvaluation(evaluator, session, task_path, final_path, *result.final, args);
  }
  Report(args.pipeline.progress, DoneEvent(result, final_eval));
  report::RunMeta meta{
      run_id,
      task_path,
      task_hash,
      args.backend,
      args.eval.device,
      model_name,
      use_llm ? LlmUsageJson(store, run_id, *client) : Json::object(),
      search,
      backend.details ? backend.details() : Json(),
      graph ? ExpertSection(*graph, task_source, task_name, result.final, final_eval) : Json(),
      notes};
  Json report = report::BuildRunReport(result, meta, final_eval ? &*final_eval : nullptr);
  report["sandbox"] = session.sandbox.ToJson();
  report["precision"] = args.eval.precision;
  WriteFileAtomic(out_dir + "/report.json", report.dump(2) + "\n");
  WriteFileAtomic(out_dir + "/trajectory.md", report::TrajectoryMarkdown(report));
  if (store != nullptr) {
    store->PutRun({run_id, task_path, task_hash, args.backend, args.eval.device, search.dump(), report["status"],
                   result.stopped_because, result.final ? result.final->id : "", report.dump()});
  }
  const bool correct = final_eval && final_eval->correct;
  if (result.stopped_because == agents::StopReasonName(agents::StopReason::kLlmConfigError)) {
    const std::string refused = "the LLM API refused the request: " + stop_failure;
    if (!correct) {
      throw ConfigError(refused + " (" + out_dir + "/report.json)");
    }
    fmt::print(stderr, "egg: warning: {}; the run ended with its incumbent\n", refused);
  }
  return {correct, report, out_dir};
}

// ", 0.84x vs torch.compile with TF32 (precision-matched)": the figure reported beside the headline.
std::string BesideText(const Json& final) {
  const std::string beside = final.value("beside_baseline", "");
  const Json speedups = final.value("speedups", Json::object());
  if (beside.empty() || !speedups.is_object() || !speedups.contains(beside) ||
      !speedups[beside].value("compile", Json()).is_number()) {
    return "";
  }
  return fmt::format("; {:.2f}x vs torch.compile under PyTorch {}", speedups[beside]["compile"].get<double>(),
                     beside);
}

}  // namespace

std::string ToleranceHeader(const harness::EvalOptions& options) {
  const std::string model =
      harness::IsHalfPrecision(options.precision)
          ? "the task's Model cast to " + options.precision + " (inputs, parameters and buffers)"
          : std::string("the task's Model in float32 with TF32 off");
  return fmt::format(
      "# egg: made and verified for tol {:g}: every output within atol = rtol = {:g} and relative L2 error "
      "{:g} "
      "of {}, on {} trials of fresh inputs; another tolerance needs another run.\n",
      options.tol, options.tol, options.tol, model, options.trials);
}

void AddSearchOptions(CLI::App& command_ref, OptimizeArgs* args) {
  CLI::App* command = &command_ref;
  command->add_option("--backend", args->backend, "expert, llm or hybrid (expert seeds refined by an LLM)")
      ->check(CLI::IsMember({"expert", "llm", "hybrid"}))
      ->default_val("expert");
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
  command->add_option("--time-budget", args->pipeline.time_budget_s,
                      "Budget: wall-clock seconds per task; once spent with a correct kernel in hand, no new "
                      "candidate starts")
      ->check(CLI::PositiveNumber);
  command
      ->add_flag("--cpu-wall-tuning", args->cpu_wall_tuning,
                 "Device cpu, expert and hybrid: run the measured stages on the interpreter's wall clock "
                 "(for tests; "
                 "not performance figures)")
      ->group("");
  command->add_flag("--no-profile", [args](std::int64_t) { args->pipeline.profile = false; },
                    "Skip Nsight Compute before refinement rounds (the Profile agent sees no metrics)");
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
  command
      ->add_option("--max-output-tokens", args->max_output_tokens,
                   "LLM output cap per call (default: per model family, kept within the server's context)")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("--reasoning-effort", args->reasoning_effort, "Reasoning effort for reasoning models")
      ->check(CLI::IsMember({"none", "minimal", "low", "medium", "high", "xhigh"}));
  command->add_option("--llm-api", args->api, "OpenAI wire format: chat_completions or responses")
      ->check(CLI::IsMember({"chat_completions", "responses"}));
  command
      ->add_option("--llm-concurrency", args->llm_concurrency,
                   "LLM requests in flight: the candidates of a round are asked for at once")
      ->check(CLI::Range(1, 64));
  AddEvalOptions(*command, &args->eval, &args->device);
}

namespace {

std::string MedianMs(const Json& stats) {
  return stats.is_object() && stats.value("median", Json()).is_number()
             ? fmt::format("{:.4g} ms", stats["median"].get<double>())
             : "n/a";
}

std::string Times(const Json& value) {
  return value.is_number() ? fmt::format("{:.2f}x", value.get<double>()) : "n/a";
}

// The final kernel's medians beside the headline baselines', and the command that checks them by hand.
void PrintTimes(const Json& final, const std::string& task, const std::string& model) {
  const std::string dtype = final.value("precision", "fp32");
  const Json times = final.value("time_ms", Json::object());
  fmt::print("time (medians): {} vs eager {}, torch.compile {} (speedups of medians {}, {})\n",
             MedianMs(times.value("candidate", Json())), MedianMs(times.value("eager", Json())),
             MedianMs(times.value("compile", Json())), Times(final.value("speedup_median_vs_eager", Json())),
             Times(final.value("speedup_median_vs_compile", Json())));
  fmt::print("check by hand: PYTHONPATH={}/python python -m egg_worker.timeit {} {} --precision {}{}\n",
             EggRoot(CurrentEnvironment()), task, model, final.value("baseline", "default"),
             dtype == "fp32" ? "" : " --dtype " + dtype);
}

}  // namespace

void PrintOutcome(const TaskOutcome& outcome) {
  const Json& report = outcome.report;
  const bool correct = outcome.correct;
  fmt::print("status: {} ({}){}\n", correct ? "ok" : "failed", report.value("stopped_because", ""),
             correct ? "" : " - " + report.value("reason", ""));
  const Json final = report.value("final", Json());
  const std::string model = outcome.out_dir + "/model_new.py";
  if (correct && final.is_object() && final.value("speedup_vs_eager", Json()).is_number()) {
    const Json compile = final.value("speedup_vs_compile", Json());
    fmt::print("speedup at tol {:g}: {:.2f}x vs eager, {} vs torch.compile (PyTorch {}){}\n",
               final.value("tol", 0.0), final["speedup_vs_eager"].get<double>(),
               compile.is_number() ? fmt::format("{:.2f}x", compile.get<double>()) : "n/a",
               final.value("baseline", ""), BesideText(final));
    PrintTimes(final, report.value("task", ""), model);
  }
  fmt::print("wrote {0}/report.json, {0}/trajectory.md{1}\n", outcome.out_dir,
             report.value("final_candidate_id", "").empty() ? "" : ", " + model);
}

void ApplyQuickSearch(OptimizeArgs* args) {
  args->pipeline.rounds = 1;
  args->pipeline.seeds = std::min(args->pipeline.seeds, 2);
  args->pipeline.refine_seeds = false;
}

TaskOutcome OptimizeTask(OptimizeArgs args, HarnessSession& session, const std::string& task_path,
                         const std::string& out_dir) {
  return RunOptimizeTask(args, session, task_path, out_dir);
}

}  // namespace egg::cli
