// Reading a refused request: whether the server's error asks for another request shape (the Responses API,
// no temperature, max_completion_tokens, a smaller output cap) and whether it is a quota or billing error.
// Matches the messages OpenAI, Anthropic, vLLM, SGLang, llama.cpp's server and DeepSeek document.
#pragma once

#include <cstdint>
#include <string>

namespace egg::llm {

enum class Reshape { kNone, kUseResponsesApi, kDropTemperature, kUseMaxCompletionTokens, kFitOutputCap };

struct Refusal {
  Reshape reshape = Reshape::kNone;
  int output_cap = 0;      // kFitOutputCap: the largest cap the server accepts for this prompt
  int context_tokens = 0;  // kFitOutputCap: the server's context length when it named one, else 0
  int max_output = 0;      // kFitOutputCap: the model's own output ceiling when it named one, else 0
};

// `sent_cap`: the cap of the refused request; `prompt_chars` estimates its input tokens when the server
// names none. kNone when the body asks for nothing egg can change, or a cap that would not help.
Refusal ReadRefusal(const std::string& body, int sent_cap, int64_t prompt_chars);

// The largest useful cap for a prompt of `prompt_chars` in a context of `context_tokens`, estimating the
// input tokens generously; 0 when none fits.
int CapWithinContext(int context_tokens, int64_t prompt_chars);

// insufficient_quota, billing errors, HTTP 402, "credit balance is too low": no retry can help.
bool IsQuotaError(long status, const std::string& body);

}  // namespace egg::llm
