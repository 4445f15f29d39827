#include "agents/llm_agents.h"

#include <chrono>
#include <functional>
#include <map>
#include <mutex>

#include "common/hash.h"
#include "prompts/prompts.h"

namespace egg::agents {
namespace {

constexpr size_t kMaxSourceChars = 16000;
constexpr size_t kMaxProfileChars = 12000;
constexpr int kRepairRequests = 1;

std::string Knowledge() {
  return std::string(prompts::File("knowledge/gpu_principles.md")) + "\n" +
         std::string(prompts::File("knowledge/triton_idioms.md")) + "\n" +
         std::string(prompts::File("knowledge/gpu_specs.md"));
}

// What the Code agent must know of the task's dtype (KernelBench's precision modes).
std::string DTypeNote(const std::string& precision) {
  if (precision == "fp32") {
    return "Inputs, parameters and outputs are float32.";
  }
  const std::string type = precision == "bf16" ? "bfloat16" : "float16";
  std::string note = "The task runs in " + type + " (KernelBench's " + precision +
                     " mode): its floating inputs, parameters and buffers are " + type +
                     ", and so must the outputs be. Load and store " + type +
                     ", compute and accumulate in float32, and give tl.dot " + type +
                     " operands loaded as they are";
  return note + (precision == "bf16"
                     ? " (in Triton's interpreter, whose bfloat16 tl.dot is wrong, cast them to "
                       "float32 instead: os.environ.get('TRITON_INTERPRET') == '1')."
                     : ".");
}

std::string HistoryJson(const StageContext& context) {
  Json history = Json::array();
  for (const AttemptSummary& attempt : context.history) {
    history.push_back(ToJson(attempt));
  }
  return history.empty() ? "none" : history.dump();
}

std::string RequestTag(const StageContext& context, const std::string& role, int index, int count) {
  return role + " stage=" + context.stage + " round=" + std::to_string(context.round) +
         " item=" + std::to_string(index + 1) + "/" + std::to_string(count);
}

StopReason StopFor(llm::ErrorKind error) {
  switch (error) {
    case llm::ErrorKind::kBudgetExhausted:
      return StopReason::kBudgetExhausted;
    case llm::ErrorKind::kRateLimited:
    case llm::ErrorKind::kServer:
    case llm::ErrorKind::kTimeout:
    case llm::ErrorKind::kNetwork:
      return StopReason::kLlmUnavailable;
    default:
      return llm::IsConfigurationError(error) ? StopReason::kLlmConfigError : StopReason::kNone;
  }
}

// One role's conversation core: replay, call, record, validate, one repair request. Thread-safe: the store
// is used under a lock, the client is thread-safe.
class Conversation {
 public:
  Conversation(llm::LlmClient& client, store::Store* store, LlmAgentConfig config)
      : client_(client), store_(store), config_(std::move(config)) {}

  template <typename T>
  AgentResult<T> Ask(const std::string& role, const std::string& stage, const std::string& system,
                     const std::string& user, const std::function<Parsed<T>(const std::string&)>& parse) {
    std::vector<llm::Message> messages = {{"system", system}, {"user", TruncateMiddle(user, Budget(system))}};
    std::string problem;
    for (int attempt = 0; attempt <= kRepairRequests; ++attempt) {
      AgentResult<std::string> reply = Send(messages, stage + "/" + role);
      if (!reply.value) {
        return {std::nullopt, reply.failure, reply.stop};
      }
      Parsed<T> parsed = parse(*reply.value);
      Record(role, stage, messages, parsed.value ? "" : parsed.problem);
      if (parsed.value) {
        return {std::move(parsed.value), "", StopReason::kNone};
      }
      problem = parsed.problem;
      messages.push_back({"assistant", *reply.value});
      messages.push_back({"user", prompts::Render(prompts::File("repair.md"), {{"problem", problem}})});
    }
    return {std::nullopt, "malformed reply: " + problem, StopReason::kNone};
  }

 private:
  size_t Budget(const std::string& system) const {
    const auto limit = static_cast<size_t>(config_.max_prompt_chars);
    return system.size() < limit ? limit - system.size() : 0;
  }

  static std::string PromptText(const std::vector<llm::Message>& messages) {
    std::string text;
    for (const auto& message : messages) {
      text += message.role + "\n" + message.content + "\n\x1e\n";
    }
    return text;
  }

  AgentResult<std::string> Send(const std::vector<llm::Message>& messages, const std::string& purpose) {
    const std::string prompt = PromptText(messages);
    const std::string prompt_hash = Sha256Hex(prompt);
    if (store_ != nullptr) {
      std::lock_guard lock(store_mutex_);
      if (auto replay = store_->FindReplay(config_.run_id, prompt_hash)) {
        return {*replay, "", StopReason::kNone};
      }
    }
    llm::ChatRequest request;
    request.messages = messages;
    request.purpose = purpose;
    const llm::ChatResult result = client_.Complete(request);
    if (store_ != nullptr) {
      std::lock_guard lock(store_mutex_);
      store_->PutLlmCall({config_.run_id, purpose, config_.provider, config_.model, prompt_hash,
                          static_cast<int64_t>(prompt.size()), static_cast<int64_t>(result.text.size()),
                          result.usage.input_tokens, result.usage.output_tokens, result.usage.cost_usd,
                          result.usage.latency_ms, llm::ErrorKindName(result.error), result.error_message,
                          result.attempts, result.text});
    }
    if (!result.ok()) {
      return {std::nullopt, llm::ErrorKindName(result.error) + ": " + result.error_message,
              StopFor(result.error)};
    }
    return {result.text, "", StopReason::kNone};
  }

  void Record(const std::string& role, const std::string& stage, const std::vector<llm::Message>& messages,
              const std::string& problem) {
    if (store_ == nullptr) {
      return;
    }
    const std::string prompt = PromptText(messages);
    const Json request = {
        {"role", role}, {"stage", stage}, {"prompt_chars", prompt.size()}, {"turns", messages.size()}};
    const Json reply =
        problem.empty() ? Json{{"usable", true}} : Json{{"usable", false}, {"problem", problem}};
    std::lock_guard lock(store_mutex_);
    store_->PutMessage({config_.run_id, Sha256Hex(prompt), stage, role, request.dump(), reply.dump()});
  }

  llm::LlmClient& client_;
  store::Store* store_;
  LlmAgentConfig config_;
  std::mutex store_mutex_;
};

class LlmProfileAgent : public ProfileAgent {
 public:
  explicit LlmProfileAgent(std::shared_ptr<Conversation> conversation)
      : conversation_(std::move(conversation)) {}
  AgentResult<ProfileReport> Analyze(const StageContext& context, const std::string& profile_json) override {
    const std::string system = prompts::Render(prompts::File("profile/common.md"),
                                               {{"stage", context.stage}, {"knowledge", Knowledge()}});
    const std::string user =
        prompts::Render(prompts::File("profile/user.md"),
                        {{"stage", context.stage},
                         {"objective", context.objective},
                         {"moves", context.moves},
                         {"incumbent_source", TruncateMiddle(context.incumbent_source, kMaxSourceChars)},
                         {"incumbent_summary", context.incumbent_summary},
                         {"profile_json", TruncateMiddle(profile_json, kMaxProfileChars)},
                         {"history", HistoryJson(context)},
                         {"request_tag", RequestTag(context, "profile", 0, 1)}});
    return conversation_->Ask<ProfileReport>("profile", context.stage, system, user, ParseProfileReport);
  }

 private:
  std::shared_ptr<Conversation> conversation_;
};

// What every Code prompt shows of the task and the incumbent (code/user.md and code/hybrid_user.md).
std::map<std::string, std::string> CodeUserValues(const StageContext& context, int index, int count) {
  return {{"task_source", TruncateMiddle(context.task_source, kMaxSourceChars)},
          {"incumbent_source", context.incumbent_source.empty()
                                   ? "# none yet"
                                   : TruncateMiddle(context.incumbent_source, kMaxSourceChars)},
          {"incumbent_summary", context.incumbent_summary.empty() ? "none" : context.incumbent_summary},
          {"accepted", context.accepted_decisions.empty() ? "none" : context.accepted_decisions},
          {"request_tag", RequestTag(context, "code", index, count)}};
}

class LlmCodeAgent : public CodeAgent {
 public:
  explicit LlmCodeAgent(std::shared_ptr<Conversation> conversation)
      : conversation_(std::move(conversation)) {}
  AgentResult<CodeProposal> Propose(const StageContext& context, const ProfileReport* proposal, int index,
                                    int count) override {
    const std::string system =
        prompts::Render(prompts::File("code/common.md"), {{"stage", context.stage},
                                                          {"tol", Json(context.tol).dump()},
                                                          {"dtype", DTypeNote(context.precision)},
                                                          {"knowledge", Knowledge()}});
    const std::string instructions = prompts::Render(
        prompts::File("code/" + context.stage + (context.refining_seed ? ".refine" : "") + ".md"),
        {{"index", std::to_string(index + 1)},
         {"count", std::to_string(count)},
         {"moves", context.moves},
         {"sm_count", std::to_string(context.sm_count)},
         {"proposal", proposal ? ToJson(*proposal).dump() : "none"},
         {"history", HistoryJson(context)}});
    std::map<std::string, std::string> values = CodeUserValues(context, index, count);
    values["stage_instructions"] = instructions;
    const std::string user = prompts::Render(prompts::File("code/user.md"), values);
    return conversation_->Ask<CodeProposal>("code", context.stage, system, user, ParseCodeProposal);
  }

 private:
  std::shared_ptr<Conversation> conversation_;
};

class LlmDebugAgent : public DebugAgent {
 public:
  explicit LlmDebugAgent(std::shared_ptr<Conversation> conversation)
      : conversation_(std::move(conversation)) {}
  AgentResult<DebugReport> Repair(const StageContext& context, const FailedCandidate& failed,
                                  int attempt) override {
    const std::string& source = failed.source;
    const std::string system = prompts::Render(prompts::File("debug/common.md"), {{"stage", context.stage}});
    const std::string user = prompts::Render(
        prompts::File("debug/user.md"),
        {{"task_source", TruncateMiddle(context.task_source, kMaxSourceChars)},
         {"candidate_source", TruncateMiddle(source, kMaxSourceChars)},
         {"status", failed.status},
         {"reason", TruncateMiddle(failed.reason, kMaxProfileChars)},
         {"history", attempt == 0 ? "none" : std::to_string(attempt) + " earlier repair(s) failed"},
         {"request_tag", RequestTag(context, "debug", attempt, attempt + 1) +
                             " source=" + Sha256Hex(source).substr(0, 12)}});
    return conversation_->Ask<DebugReport>("debug", context.stage, system, user, ParseDebugReport);
  }

 private:
  std::shared_ptr<Conversation> conversation_;
};

class LlmDesignCodeAgent : public CodeAgent {
 public:
  LlmDesignCodeAgent(std::shared_ptr<Conversation> conversation, DesignRealizer& realizer)
      : conversation_(std::move(conversation)), realizer_(realizer) {}
  AgentResult<CodeProposal> Propose(const StageContext& context, const ProfileReport* proposal, int index,
                                    int count) override {
    const std::string system =
        prompts::Render(prompts::File("code/hybrid.md"), {{"stage", context.stage},
                                                          {"tol", Json(context.tol).dump()},
                                                          {"dtype", DTypeNote(context.precision)},
                                                          {"knowledge", Knowledge()}});
    std::map<std::string, std::string> values = CodeUserValues(context, index, count);
    values.insert({{"stage", context.stage},
                   {"objective", context.objective},
                   {"moves", context.moves},
                   {"proposal", proposal ? ToJson(*proposal).dump() : "none"},
                   {"history", HistoryJson(context)},
                   {"design_record", realizer_.DesignRecord(context)}});
    const std::string user = prompts::Render(prompts::File("code/hybrid_user.md"), values);
    const std::function<Parsed<CodeProposal>(const std::string&)> parse =
        [this, &context](const std::string& reply) {
          Parsed<HybridReply> parsed = ParseHybridReply(reply);
          if (!parsed.value) {
            return Parsed<CodeProposal>{std::nullopt, parsed.problem};
          }
          if (parsed.value->edit) {
            return Parsed<CodeProposal>{parsed.value->edit, ""};
          }
          return realizer_.Realize(context, parsed.value->move);
        };
    return conversation_->Ask<CodeProposal>("code", context.stage, system, user, parse);
  }

 private:
  std::shared_ptr<Conversation> conversation_;
  DesignRealizer& realizer_;
};

}  // namespace

Parsed<HybridReply> ParseHybridReply(const std::string& reply) {
  if (reply.find("```python") != std::string::npos) {
    Parsed<CodeProposal> edit = ParseCodeProposal(reply);
    if (!edit.value) {
      return {std::nullopt, edit.problem};
    }
    return {HybridReply{edit.value, Json()}, ""};
  }
  const auto move = JsonObjectIn(reply);
  if (!move || !move->contains("kernel") || !move->contains("field") || !move->contains("value")) {
    return {
        std::nullopt,
        "neither a design move (a JSON object with \"kernel\", \"field\" and \"value\") nor a source edit (a "
        "```python block with the whole file)"};
  }
  return {HybridReply{std::nullopt, *move}, ""};
}

std::unique_ptr<CodeAgent> MakeLlmDesignCodeAgent(llm::LlmClient& client, store::Store* store,
                                                  const LlmAgentConfig& config, DesignRealizer& realizer) {
  return std::make_unique<LlmDesignCodeAgent>(std::make_shared<Conversation>(client, store, config),
                                              realizer);
}

std::string StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "completed";
    case StopReason::kBudgetExhausted:
      return "budget_exhausted";
    case StopReason::kLlmUnavailable:
      return "llm_unavailable";
    case StopReason::kLlmConfigError:
      return "llm_config_error";
    case StopReason::kTimeBudgetUsed:
      return "time_budget_used";
  }
  return "completed";
}

std::string TruncateMiddle(const std::string& text, size_t max_chars) {
  static constexpr const char* kMarker = "\n# ... [egg: middle cut to bound the prompt] ...\n";
  const size_t marker_chars = std::char_traits<char>::length(kMarker);
  if (text.size() <= max_chars || max_chars <= marker_chars) {
    return text.size() <= max_chars ? text : text.substr(0, max_chars);
  }
  const size_t keep = max_chars - marker_chars;
  return text.substr(0, keep / 2) + kMarker + text.substr(text.size() - (keep - keep / 2));
}

Backend MakeLlmBackend(llm::LlmClient& client, store::Store* store, const LlmAgentConfig& config) {
  auto conversation = std::make_shared<Conversation>(client, store, config);
  Backend backend;
  backend.name = "llm";
  backend.profile = std::make_unique<LlmProfileAgent>(conversation);
  backend.code = std::make_unique<LlmCodeAgent>(conversation);
  backend.debug = std::make_unique<LlmDebugAgent>(conversation);
  return backend;
}

}  // namespace egg::agents
