// What a model accepts, read from its name by the providers' documented families: OpenAI's reasoning models
// (o1/o3/o4, gpt-5*) take max_completion_tokens and reasoning_effort and refuse sampling parameters;
// Anthropic's Opus 4.7 and later refuse temperature. Names with a router prefix ("vendor/model") keep the
// classic shape: the router translates. What the table misses, the server's refusal corrects (refusal.h).
#pragma once

#include <string>

#include "llm/llm.h"

namespace egg::llm {

inline constexpr int kReasoningMaxOutputTokens = 32768;  // room to think, then answer with a whole file
inline constexpr int kAnthropicMaxOutputTokens = 32000;  // Opus 4.x's ceiling; later models allow more
inline constexpr int kClassicMaxOutputTokens = 16384;

struct ModelTraits {
  bool reasoning = false;  // OpenAI reasoning: max_completion_tokens, reasoning_effort, no temperature/top_p
  bool accepts_temperature = true;
  int default_max_output_tokens = kClassicMaxOutputTokens;
};

ModelTraits TraitsFor(Provider provider, const std::string& model);

}  // namespace egg::llm
