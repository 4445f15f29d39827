// The wire format of one provider: the HTTP request for a ChatRequest and the reading of a 2xx reply.
// OpenAI-compatible Chat Completions (openai_provider.cpp) and Anthropic Messages (anthropic_provider.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/json.h"
#include "llm/http_transport.h"
#include "llm/llm.h"

namespace egg::llm {

struct ParsedReply {
  bool ok = false;
  std::string text;
  int64_t input_tokens = 0;  // 0 when the reply has no usage
  int64_t output_tokens = 0;
  std::string error_message;  // why the body is not the provider's schema, when !ok
};

class ProviderAdapter {
 public:
  virtual ~ProviderAdapter() = default;
  virtual HttpRequest BuildRequest(const ChatRequest& request) const = 0;
  virtual ParsedReply ParseReply(const std::string& body) const = 0;
};

std::unique_ptr<ProviderAdapter> MakeOpenAiAdapter(const LlmConfig& config);
std::unique_ptr<ProviderAdapter> MakeAnthropicAdapter(const LlmConfig& config);
std::unique_ptr<ProviderAdapter> MakeProviderAdapter(const LlmConfig& config);

// One line (at most ~300 characters) describing an error reply: its error.message (or message, detail,
// or error when that is a string), else the start of the body itself.
std::string ErrorBodySummary(const std::string& body);
// Whitespace runs collapsed to one space, trimmed, cut to `max_chars` (on a UTF-8 boundary) with "...".
std::string OneLine(const std::string& text, size_t max_chars);
// object[name] when it is a non-negative integer, else 0 (a missing usage block is not an error).
int64_t TokenCount(const Json& object, const char* name);
// base_url without its trailing slashes, then `path` (which starts with '/').
std::string JoinUrl(const std::string& base_url, const std::string& path);

}  // namespace egg::llm
