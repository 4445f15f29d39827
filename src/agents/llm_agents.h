// The LLM backend: Profile, Code and Debug agents that talk to an llm::LlmClient through prompt templates
// (prompts/, embedded). Replies already received by this run are replayed from the store (resume); a reply
// that cannot be used gets one repair request, then counts as a failed attempt.
#pragma once

#include <cstdint>
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

// Keeps the head and tail of `text` within `max_chars`, with a marker where the middle was cut.
std::string TruncateMiddle(const std::string& text, size_t max_chars);

}  // namespace egg::agents
