// The LLM room's door: chat completions from OpenAI-compatible servers (OpenAI, vLLM, SGLang, Ollama,
// llama.cpp's server, OpenRouter...) and Anthropic's Messages API, over libcurl, with retries, a request
// timeout, a concurrency limit, usage and cost accounting and a per-task budget.
//
// Complete() never throws for provider or network failures: they come back as a ChatResult with an error
// kind. API keys live only in LlmConfig::api_key and the Authorization / x-api-key header; they are never
// logged, stored, printed or put in a worker's environment. Clients are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace egg::llm {

enum class Provider { kOpenAi, kAnthropic };

struct Message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatRequest {
  std::vector<Message> messages;
  std::string purpose;  // e.g. "stage1.seeds/code": recorded with the call, sent nowhere
  int max_tokens = 8192;
  double temperature = 0.2;
};

struct Usage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0;
  double latency_ms = 0;
};

// One list of what can go wrong, and whether it is worth retrying (RetryPolicy::ShouldRetry).
enum class ErrorKind {
  kNone,
  kRateLimited,      // HTTP 429
  kServer,           // HTTP 5xx
  kTimeout,          // no complete answer within the request timeout
  kNetwork,          // connection refused, DNS, reset...
  kAuth,             // HTTP 401/403
  kBadRequest,       // other 4xx
  kMalformed,        // 2xx but the body is not the provider's schema
  kBudgetExhausted,  // refused locally: the task's budget is spent (no request was sent)
};
std::string ErrorKindName(ErrorKind kind);
bool IsRetryable(ErrorKind kind);

// "openai" or "anthropic": the names used in config files, EGG_LLM_PROVIDER and CallRecord::provider.
std::string ProviderName(Provider provider);
// `text` with every occurrence of `key` replaced by "[redacted]" (unchanged when the key is empty).
std::string RedactKey(const std::string& text, const std::string& key);

struct ChatResult {
  ErrorKind error = ErrorKind::kNone;
  std::string error_message;  // one line, never contains the key
  std::string text;           // the assistant's reply when error == kNone
  Usage usage;                // summed over all attempts
  int attempts = 0;
  bool ok() const { return error == ErrorKind::kNone; }
};

struct Budget {
  std::optional<int64_t> max_calls;
  std::optional<int64_t> max_tokens;  // input + output
  std::optional<double> max_cost_usd;
};

struct LlmConfig {
  Provider provider = Provider::kOpenAi;
  std::string base_url;  // e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1; Anthropic:
                         // https://api.anthropic.com
  std::string model;
  std::string api_key;  // may be empty for local servers
  double request_timeout_s = 300;
  int max_retries = 4;
  double backoff_initial_s = 1.0;
  double backoff_max_s = 60.0;
  int max_concurrency = 4;
  double price_input_per_mtok_usd = 0;  // for cost accounting
  double price_output_per_mtok_usd = 0;
  Budget budget;
};

// Every attempt-complete call is reported here (to the store): purpose, model, usage, error, attempts.
// Called exactly once per Complete(), also for a call refused by the budget (attempts == 0).
struct CallRecord {
  std::string purpose;
  std::string provider;
  std::string model;
  Usage usage;
  ErrorKind error = ErrorKind::kNone;
  std::string error_message;
  int attempts = 0;
  int64_t prompt_chars = 0;
  int64_t reply_chars = 0;
};
// Called from whichever thread ran Complete(): must be thread-safe when the client is shared.
using CallRecorder = std::function<void(const CallRecord&)>;

class LlmClient {
 public:
  virtual ~LlmClient() = default;
  virtual ChatResult Complete(const ChatRequest& request) = 0;
  // What has been spent so far against the budget.
  virtual Usage Spent() const = 0;
  virtual int64_t Calls() const = 0;
};

// Settings from (lowest to highest precedence) defaults, the TOML config file, the environment
// (EGG_LLM_PROVIDER, EGG_LLM_BASE_URL, EGG_LLM_MODEL, OPENAI_API_KEY / ANTHROPIC_API_KEY, EGG_LLM_TIMEOUT,
// EGG_LLM_MAX_CALLS, EGG_LLM_MAX_TOKENS, EGG_LLM_MAX_COST_USD) and `overrides` (from flags: same keys as
// the config file's [llm] table). Throws ConfigError with one line for a bad file or value.
LlmConfig LoadLlmConfig(const std::string& config_path, const std::map<std::string, std::string>& env,
                        const std::map<std::string, std::string>& overrides);

// The real client over libcurl.
std::unique_ptr<LlmClient> MakeLlmClient(const LlmConfig& config, CallRecorder recorder);

}  // namespace egg::llm
