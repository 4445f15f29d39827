// The LLM backend: Profile, Code and Debug agents that talk to an llm::LlmClient through prompt templates
// (prompts/, embedded). Replies already received by this run are replayed from the store (resume); a reply
// that cannot be used gets one repair request, then counts as a failed attempt.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "agents/agents.h"
#include "llm/llm.h"
#include "store/store.h"

namespace egg::agents {

inline constexpr int64_t kMaxPromptChars = 48000;

struct LlmAgentConfig {
  std::string run_id;
  std::string provider;
  std::string model;
  int64_t max_prompt_chars = kMaxPromptChars;
};

// `client` and `store` (which may be null) must outlive the backend.
Backend MakeLlmBackend(llm::LlmClient& client, store::Store* store, const LlmAgentConfig& config);

// What the hybrid backend's LLM Code agent needs from a compiler. Thread-safe.
class DesignRealizer {
 public:
  virtual ~DesignRealizer() = default;
  // The design record the LLM may move from, as prompt text (its kernels, their designs and legal values);
  // "none" when the incumbent has none.
  virtual std::string DesignRecord(const StageContext& context) = 0;
  // A design move ({"kernel", "field", "value", "description"}) realized as a candidate, or the rule it
  // breaks.
  virtual Parsed<CodeProposal> Realize(const StageContext& context, const Json& move) = 0;
};

// The hybrid Code agent's LLM side (prompts/code/hybrid*.md): it answers with a design move, realized by
// `realizer`, or a source edit (a whole file). An illegal move or an unusable reply goes back once with its
// problem. `realizer` must outlive the agent.
std::unique_ptr<CodeAgent> MakeLlmDesignCodeAgent(llm::LlmClient& client, store::Store* store,
                                                  const LlmAgentConfig& config, DesignRealizer& realizer);

// A hybrid reply: a ```python block is a source edit; otherwise a JSON object with "kernel", "field" and
// "value" is a design move (returned in `move`). Neither: the problem.
struct HybridReply {
  std::optional<CodeProposal> edit;
  Json move;
};
Parsed<HybridReply> ParseHybridReply(const std::string& reply);

// Keeps the head and tail of `text` within `max_chars`, with a marker where the middle was cut.
std::string TruncateMiddle(const std::string& text, size_t max_chars);

}  // namespace egg::agents
