#include "llm/client.h"

#include <algorithm>
#include <mutex>
#include <random>
#include <semaphore>

#include "llm/budget.h"
#include "llm/provider.h"

namespace egg::llm {
namespace {

constexpr long kHttpTooManyRequests = 429;
constexpr long kHttpRequestTimeout = 408;
constexpr long kHttpUnauthorized = 401;
constexpr long kHttpForbidden = 403;
constexpr long kHttpOkFirst = 200;
constexpr long kHttpClientErrorFirst = 400;
constexpr long kHttpServerErrorFirst = 500;
constexpr long kHttpStatusEnd = 600;

struct AttemptOutcome {
  ErrorKind error = ErrorKind::kNone;
  std::string message;
  ParsedReply reply;
};

ErrorKind KindForStatus(long status) {
  if (status == kHttpTooManyRequests) {
    return ErrorKind::kRateLimited;
  }
  if (status == kHttpUnauthorized || status == kHttpForbidden) {
    return ErrorKind::kAuth;
  }
  if (status == kHttpRequestTimeout) {
    return ErrorKind::kTimeout;
  }
  if (status >= kHttpClientErrorFirst && status < kHttpServerErrorFirst) {
    return ErrorKind::kBadRequest;
  }
  if (status >= kHttpServerErrorFirst && status < kHttpStatusEnd) {
    return ErrorKind::kServer;
  }
  return ErrorKind::kMalformed;
}

AttemptOutcome Classify(const HttpResponse& response, const std::string& url,
                        const ProviderAdapter& adapter) {
  if (response.error != TransportError::kNone) {
    const ErrorKind kind =
        response.error == TransportError::kTimeout ? ErrorKind::kTimeout : ErrorKind::kNetwork;
    return {kind, response.error_message, {}};
  }
  const std::string prefix = "HTTP " + std::to_string(response.status) + " from " + url + ": ";
  if (response.status < kHttpOkFirst || response.status >= kHttpOkFirst + 100) {
    return {KindForStatus(response.status), prefix + ErrorBodySummary(response.body), {}};
  }
  ParsedReply reply = adapter.ParseReply(response.body);
  if (!reply.ok) {
    return {ErrorKind::kMalformed, prefix + reply.error_message, {}};
  }
  return {ErrorKind::kNone, {}, std::move(reply)};
}

class SlotGuard {
 public:
  explicit SlotGuard(std::counting_semaphore<>& slots) : slots_(slots) { slots_.acquire(); }
  ~SlotGuard() { slots_.release(); }
  SlotGuard(const SlotGuard&) = delete;
  SlotGuard& operator=(const SlotGuard&) = delete;

 private:
  std::counting_semaphore<>& slots_;
};

int64_t PromptChars(const ChatRequest& request) {
  int64_t chars = 0;
  for (const Message& message : request.messages) {
    chars += static_cast<int64_t>(message.content.size());
  }
  return chars;
}

class Client : public LlmClient {
 public:
  Client(const LlmConfig& config, CallRecorder recorder, std::shared_ptr<HttpTransport> transport,
         Clock& clock)
      : config_(config),
        recorder_(std::move(recorder)),
        transport_(std::move(transport)),
        clock_(clock),
        adapter_(MakeProviderAdapter(config)),
        policy_(config.max_retries, config.backoff_initial_s, config.backoff_max_s),
        budget_(config.budget),
        slots_(std::max(1, config.max_concurrency)),
        random_(std::random_device{}()) {}

  ChatResult Complete(const ChatRequest& request) override {
    ChatResult result;
    if (auto refusal = budget_.Admit()) {
      result.error = ErrorKind::kBudgetExhausted;
      result.error_message = *refusal;
    } else {
      result = Run(request);
      budget_.AddUsage(result.usage);
    }
    Record(request, result);
    return result;
  }

  Usage Spent() const override { return budget_.Spent(); }
  int64_t Calls() const override { return budget_.Calls(); }

 private:
  ChatResult Run(const ChatRequest& request) {
    const HttpRequest http = adapter_->BuildRequest(request);
    ChatResult result;
    while (true) {
      ++result.attempts;
      const HttpResponse response = Send(http, &result.usage);
      AttemptOutcome outcome = Classify(response, http.url, *adapter_);
      result.error = outcome.error;
      if (outcome.error == ErrorKind::kNone) {
        result.error_message.clear();
        result.text = RedactKey(outcome.reply.text, config_.api_key);
        result.usage.input_tokens += outcome.reply.input_tokens;
        result.usage.output_tokens += outcome.reply.output_tokens;
        break;
      }
      result.error_message = RedactKey(outcome.message, config_.api_key);
      if (!policy_.ShouldRetry(outcome.error, result.attempts)) {
        break;
      }
      const auto retry_after_s = RetryAfterSeconds(response.headers, clock_.WallNow());
      clock_.Sleep(policy_.DelaySeconds(result.attempts, retry_after_s, UnitRandom()));
    }
    if (!result.ok() && result.attempts > 1) {
      result.error_message += " (after " + std::to_string(result.attempts) + " attempts)";
    }
    result.usage.cost_usd = CostUsd(result.usage.input_tokens, result.usage.output_tokens,
                                    config_.price_input_per_mtok_usd, config_.price_output_per_mtok_usd);
    return result;
  }

  // One request under the concurrency limit; its duration is added to usage->latency_ms.
  HttpResponse Send(const HttpRequest& http, Usage* usage) {
    SlotGuard slot(slots_);
    const auto start = clock_.Now();
    HttpResponse response = transport_->Post(http, config_.request_timeout_s);
    usage->latency_ms += std::chrono::duration<double, std::milli>(clock_.Now() - start).count();
    return response;
  }

  double UnitRandom() {
    std::lock_guard lock(random_mutex_);
    return std::uniform_real_distribution<double>(0.0, 1.0)(random_);
  }

  void Record(const ChatRequest& request, const ChatResult& result) const {
    if (!recorder_) {
      return;
    }
    recorder_(CallRecord{request.purpose, ProviderName(config_.provider), config_.model, result.usage,
                         result.error, result.error_message, result.attempts, PromptChars(request),
                         static_cast<int64_t>(result.text.size())});
  }

  const LlmConfig config_;
  const CallRecorder recorder_;
  const std::shared_ptr<HttpTransport> transport_;
  Clock& clock_;
  const std::unique_ptr<ProviderAdapter> adapter_;
  const RetryPolicy policy_;
  BudgetTracker budget_;
  std::counting_semaphore<> slots_;
  std::mutex random_mutex_;
  std::mt19937_64 random_;
};

}  // namespace

std::unique_ptr<LlmClient> MakeLlmClient(const LlmConfig& config, CallRecorder recorder,
                                         std::shared_ptr<HttpTransport> transport, Clock& clock) {
  return std::make_unique<Client>(config, std::move(recorder), std::move(transport), clock);
}

}  // namespace egg::llm
