// The wire format of one provider: the HTTP request for a ChatRequest in a RequestShape, and the reading of a
// 2xx reply. OpenAI-compatible Chat Completions (openai_provider.cpp), OpenAI Responses
// (responses_provider.cpp) and Anthropic Messages (anthropic_provider.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "llm/http_transport.h"
#include "llm/llm.h"

namespace egg::llm {

// The parameters of one request beyond its messages: chosen per model family (InitialShape) and changed
// by the server's refusals (refusal.h).
struct RequestShape {
  Api api = Api::kChatCompletions;
  bool max_completion_tokens = false;  // Chat Completions: the cap as max_completion_tokens, not max_tokens
  std::optional<double> temperature;   // absent: none sent
  std::string reasoning_effort;        // empty: none sent
  int max_output_tokens = 0;
};
RequestShape InitialShape(const LlmConfig& config);

struct ParsedReply {
  bool ok = false;
  std::string text;
  Usage usage;             // tokens only; zero when the reply has no usage
  bool truncated = false;  // finish_reason "length", stop_reason "max_tokens", status "incomplete"
  // When !ok: why. body_error: the 2xx body is an error object (OpenRouter), retried like a 5xx.
  bool body_error = false;
  std::string error_message;
};

class ProviderAdapter {
 public:
  virtual ~ProviderAdapter() = default;
  virtual HttpRequest BuildRequest(const ChatRequest& request, const RequestShape& shape) const = 0;
  virtual ParsedReply ParseReply(const std::string& body) const = 0;
};

std::unique_ptr<ProviderAdapter> MakeOpenAiAdapter(const LlmConfig& config);
std::unique_ptr<ProviderAdapter> MakeResponsesAdapter(const LlmConfig& config);
std::unique_ptr<ProviderAdapter> MakeAnthropicAdapter(const LlmConfig& config);
// The adapter for config.provider and `api` (Anthropic ignores `api`).
std::unique_ptr<ProviderAdapter> MakeProviderAdapter(const LlmConfig& config, Api api);

// One line (at most ~300 characters) describing an error reply: its error.message (or message, detail,
// or error when that is a string), else the start of the body itself.
std::string ErrorBodySummary(const std::string& body);
// A !ok ParsedReply saying why the body is not the provider's schema.
ParsedReply MalformedReply(std::string message);
// A ParsedReply for a body that is an error object ({"error": {...}} or {"type": "error"}), else nullopt.
std::optional<ParsedReply> BodyError(const Json& reply, const std::string& body);
// Whitespace runs collapsed to one space, trimmed, cut to `max_chars` (on a UTF-8 boundary) with "...".
std::string OneLine(const std::string& text, size_t max_chars);
// object[name] when it is a non-negative integer, else 0 (a missing usage block is not an error).
int64_t TokenCount(const Json& object, const char* name);
// object[outer][inner] as TokenCount reads it.
int64_t NestedTokenCount(const Json& object, const char* outer, const char* inner);
// base_url without its trailing slashes, then `path` (which starts with '/').
std::string JoinUrl(const std::string& base_url, const std::string& path);
// The reply without its reasoning: <think>...</think> blocks, a leading part closed by a lone </think>
// (the opening tag was in the prompt) and an unclosed <think> to the end.
std::string StripThinking(const std::string& text);
// The system messages joined by blank lines, and the other messages as [{role, content}] in order (the
// Anthropic and Responses APIs take the system prompt apart).
struct SplitMessages {
  std::string system;
  Json rest = Json::array();
};
SplitMessages SplitSystem(const std::vector<Message>& messages);
// Content-Type and, when the key is set, `auth_name: auth_prefix + key`.
HttpRequest JsonPost(std::string url, const Json& body, const std::string& auth_name,
                     const std::string& auth_prefix, const std::string& key);

}  // namespace egg::llm
