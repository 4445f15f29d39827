// The LLM room's door: chat completions from OpenAI-compatible servers (OpenAI's Chat Completions and
// Responses APIs, vLLM, SGLang, Ollama, llama.cpp's server, OpenRouter...) and Anthropic's Messages API, over
// libcurl, with request shapes per model family, retries, a request timeout, a concurrency limit, usage and
// cost accounting (cached input and reasoning tokens apart) and a per-task budget.
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
// OpenAI's two wire formats: POST /chat/completions or POST /responses (Anthropic has one).
enum class Api { kChatCompletions, kResponses };

inline constexpr double kDefaultTemperature = 0.2;

struct Message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatRequest {
  std::vector<Message> messages;
  std::string purpose;  // e.g. "stage1.seeds/code": recorded with the call, sent nowhere
  std::optional<int> max_output_tokens;  // the configured cap when unset
};

struct Usage {
  int64_t input_tokens = 0;         // all input, cached and cache writes included
  int64_t cached_input_tokens = 0;  // read from the provider's prompt cache (the cached price)
  int64_t cache_write_tokens = 0;   // written to Anthropic's prompt cache (the cache-write price)
  int64_t output_tokens = 0;        // reasoning included
  int64_t reasoning_tokens = 0;
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
  kQuota,            // quota or billing (insufficient_quota, credit balance too low): never retried
  kNotFound,         // HTTP 404: no such model or endpoint
  kBadRequest,       // other 4xx
  kMalformed,        // 2xx but the body is not the provider's schema
  kTruncated,        // the reply was cut at the output cap (or empty), also after one retry with a larger cap
  kBudgetExhausted,  // refused locally: the task's budget is spent (no request was sent)
};
std::string ErrorKindName(ErrorKind kind);
bool IsRetryable(ErrorKind kind);
// Errors no later call can escape (credentials, quota, a model or request the API refuses): the run stops.
bool IsConfigurationError(ErrorKind kind);

// "openai" or "anthropic": the names used in config files, EGG_LLM_PROVIDER and CallRecord::provider.
std::string ProviderName(Provider provider);
// "chat_completions" or "responses": the names of [llm].api.
std::string ApiName(Api api);
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
  Api api = Api::kChatCompletions;  // switched to kResponses when the server says the model is only there
  std::string base_url;  // e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1; Anthropic:
                         // https://api.anthropic.com
  std::string model;
  std::string api_key;  // may be empty for local servers
  double request_timeout_s = 300;
  int max_retries = 4;
  double backoff_initial_s = 1.0;
  double backoff_max_s = 60.0;
  int max_concurrency = 4;       // requests in flight, and the candidates of a round asked for at once
  int max_output_tokens = 0;     // per call; 0: the model family's default (ModelTraits)
  std::string reasoning_effort;  // sent to reasoning models only; empty: the server's default
  double temperature = kDefaultTemperature;  // sent only to models that accept one
  double price_input_per_mtok_usd = 0;       // for cost accounting; reasoning tokens are output tokens
  double price_output_per_mtok_usd = 0;
  std::optional<double> price_cached_input_per_mtok_usd;  // unset: the input price
  std::optional<double> price_cache_write_per_mtok_usd;   // unset: the input price
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

// Failed attempts of one kind (retried or not), with the last one's message.
struct ErrorTally {
  int64_t count = 0;
  std::string last_message;
};

class LlmClient {
 public:
  virtual ~LlmClient() = default;
  virtual ChatResult Complete(const ChatRequest& request) = 0;
  // What has been spent so far against the budget.
  virtual Usage Spent() const = 0;
  virtual int64_t Calls() const = 0;
  // Failed attempts so far by ErrorKindName, and the request changes the servers' refusals asked for
  // (e.g. "switched to the Responses API: <the server's message>"), in order.
  virtual std::map<std::string, ErrorTally> Errors() const { return {}; }
  virtual std::vector<std::string> Adaptations() const { return {}; }
};

// Settings from (lowest to highest precedence) defaults, the TOML config file, the environment
// (EGG_LLM_PROVIDER, EGG_LLM_BASE_URL, EGG_LLM_MODEL, EGG_LLM_API, OPENAI_API_KEY / ANTHROPIC_API_KEY,
// EGG_LLM_TIMEOUT, EGG_LLM_MAX_OUTPUT_TOKENS, EGG_LLM_REASONING_EFFORT, EGG_LLM_MAX_CALLS,
// EGG_LLM_MAX_TOKENS, EGG_LLM_MAX_COST_USD) and `overrides` (from flags: same keys as the config file's [llm]
// table). Throws ConfigError with one line for a bad file or value.
LlmConfig LoadLlmConfig(const std::string& config_path, const std::map<std::string, std::string>& env,
                        const std::map<std::string, std::string>& overrides);

// The real client over libcurl.
std::unique_ptr<LlmClient> MakeLlmClient(const LlmConfig& config, CallRecorder recorder);

}  // namespace egg::llm
