#include "llm/client.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <semaphore>

#include "llm/budget.h"
#include "llm/provider.h"
#include "llm/refusal.h"

namespace egg::llm {
namespace {

constexpr long kHttpTooManyRequests = 429;
constexpr long kHttpRequestTimeout = 408;
constexpr long kHttpUnauthorized = 401;
constexpr long kHttpForbidden = 403;
constexpr long kHttpNotFound = 404;
constexpr long kHttpOkFirst = 200;
constexpr long kHttpClientErrorFirst = 400;
constexpr long kHttpServerErrorFirst = 500;
constexpr long kHttpStatusEnd = 600;
constexpr int kMaxReshapesPerCall = 4;
constexpr int kMaxOutputTokensCeiling = 131072;
constexpr int kCapGrowth = 2;

struct AttemptOutcome {
  ErrorKind error = ErrorKind::kNone;
  std::string message;
  ParsedReply reply;
  Refusal refusal;  // what a 400/404 asks to change
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
  if (status == kHttpNotFound) {
    return ErrorKind::kNotFound;
  }
  if (status >= kHttpClientErrorFirst && status < kHttpServerErrorFirst) {
    return ErrorKind::kBadRequest;
  }
  if (status >= kHttpServerErrorFirst && status < kHttpStatusEnd) {
    return ErrorKind::kServer;
  }
  return ErrorKind::kMalformed;
}

AttemptOutcome Classify(const HttpResponse& response, const std::string& url, const ProviderAdapter& adapter,
                        int sent_cap, int64_t prompt_chars) {
  if (response.error != TransportError::kNone) {
    const ErrorKind kind =
        response.error == TransportError::kTimeout ? ErrorKind::kTimeout : ErrorKind::kNetwork;
    return {kind, response.error_message, {}, {}};
  }
  const std::string prefix = "HTTP " + std::to_string(response.status) + " from " + url + ": ";
  if (response.status < kHttpOkFirst || response.status >= kHttpOkFirst + 100) {
    ErrorKind kind = KindForStatus(response.status);
    if (kind != ErrorKind::kServer && IsQuotaError(response.status, response.body)) {
      kind = ErrorKind::kQuota;
    }
    AttemptOutcome outcome{kind, prefix + ErrorBodySummary(response.body), {}, {}};
    if (kind == ErrorKind::kBadRequest || kind == ErrorKind::kNotFound) {
      outcome.refusal = ReadRefusal(response.body, sent_cap, prompt_chars);
    }
    return outcome;
  }
  ParsedReply reply = adapter.ParseReply(response.body);
  if (!reply.ok) {
    ErrorKind kind = ErrorKind::kMalformed;
    if (reply.body_error) {
      kind = IsQuotaError(response.status, response.body) ? ErrorKind::kQuota : ErrorKind::kServer;
    }
    return {kind, prefix + reply.error_message, {}, {}};
  }
  return {ErrorKind::kNone, {}, std::move(reply), {}};
}

// A 2xx reply whose text is cut at the cap or empty once its reasoning is stripped becomes kTruncated.
void ReadText(const std::string& url, int cap, AttemptOutcome* outcome) {
  const bool had_text = !outcome->reply.text.empty();
  outcome->reply.text = StripThinking(outcome->reply.text);
  if (!outcome->reply.truncated && !outcome->reply.text.empty()) {
    return;
  }
  outcome->error = ErrorKind::kTruncated;
  outcome->message = fmt::format("HTTP 200 from {}: ", url);
  if (outcome->reply.truncated) {
    outcome->message +=
        fmt::format("the reply was cut at its output cap of {} tokens (raise max_output_tokens)", cap);
  } else {
    outcome->message += had_text ? "the reply held only reasoning, no answer" : "the reply was empty";
  }
}

void AddTokens(const Usage& reply, Usage* total) {
  total->input_tokens += reply.input_tokens;
  total->cached_input_tokens += reply.cached_input_tokens;
  total->cache_write_tokens += reply.cache_write_tokens;
  total->output_tokens += reply.output_tokens;
  total->reasoning_tokens += reply.reasoning_tokens;
}

// The request shape every call starts from, changed by the servers' refusals. Thread-safe.
class SharedShape {
 public:
  explicit SharedShape(RequestShape initial) : shape_(std::move(initial)) {}

  RequestShape ForCall(std::optional<int> cap, int64_t prompt_chars) const {
    std::lock_guard lock(mutex_);
    RequestShape call = shape_;
    call.max_output_tokens = BoundLocked(cap.value_or(shape_.max_output_tokens), prompt_chars);
    return call;
  }

  // A larger cap for a reply cut short: doubled within the limits known; `cap` when none is larger.
  int Grown(int cap, int64_t prompt_chars) const {
    std::lock_guard lock(mutex_);
    return std::max(cap, BoundLocked(std::min(kMaxOutputTokensCeiling, cap * kCapGrowth), prompt_chars));
  }

  // Applies `refusal` to `call` and to later calls; false when it changes nothing (the error stands).
  // *note says what changed for all later calls, when something did.
  bool Apply(const Refusal& refusal, RequestShape* call, std::string* note) {
    std::lock_guard lock(mutex_);
    switch (refusal.reshape) {
      case Reshape::kNone:
        return false;
      case Reshape::kUseResponsesApi:
        return Switch(&RequestShape::api, Api::kResponses, call, "switched to the Responses API", note);
      case Reshape::kDropTemperature:
        return Switch(&RequestShape::temperature, std::optional<double>(), call,
                      "stopped sending temperature", note);
      case Reshape::kUseMaxCompletionTokens:
        return call->api == Api::kChatCompletions &&
               Switch(&RequestShape::max_completion_tokens, true, call, "sends max_completion_tokens", note);
      case Reshape::kFitOutputCap:
        return FitLocked(refusal, call, note);
    }
    return false;
  }

 private:
  template <typename T>
  bool Switch(T RequestShape::* field, T value, RequestShape* call, const char* what, std::string* note) {
    if (call->*field == value) {
      return false;
    }
    call->*field = value;
    if (shape_.*field != value) {
      shape_.*field = value;
      *note = what;
    }
    return true;
  }

  bool FitLocked(const Refusal& refusal, RequestShape* call, std::string* note) {
    if (refusal.output_cap >= call->max_output_tokens) {
      return false;
    }
    call->max_output_tokens = refusal.output_cap;
    if (refusal.context_tokens > 0 && refusal.context_tokens != context_tokens_) {
      context_tokens_ = refusal.context_tokens;
      *note = fmt::format("output cap kept within the server's context of {} tokens", context_tokens_);
    }
    if (refusal.max_output > 0 && (max_output_ == 0 || refusal.max_output < max_output_)) {
      max_output_ = refusal.max_output;
      *note = fmt::format("output cap lowered to the model's maximum of {} tokens", max_output_);
    }
    return true;
  }

  int BoundLocked(int cap, int64_t prompt_chars) const {
    if (max_output_ > 0) {
      cap = std::min(cap, max_output_);
    }
    if (const int fit = context_tokens_ > 0 ? CapWithinContext(context_tokens_, prompt_chars) : 0; fit > 0) {
      cap = std::min(cap, fit);
    }
    return cap;
  }

  mutable std::mutex mutex_;
  RequestShape shape_;
  int context_tokens_ = 0;  // learned from a refusal
  int max_output_ = 0;      // learned from a refusal
};

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
        chat_(MakeProviderAdapter(config, Api::kChatCompletions)),
        responses_(MakeProviderAdapter(config, Api::kResponses)),
        shape_(InitialShape(config)),
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

  std::map<std::string, ErrorTally> Errors() const override {
    std::lock_guard lock(tally_mutex_);
    return errors_;
  }

  std::vector<std::string> Adaptations() const override {
    std::lock_guard lock(tally_mutex_);
    return adaptations_;
  }

 private:
  // One call: attempts until a usable reply, an error that stands, or the retries are spent. Refusals that
  // ask for another request shape and one reply cut short are answered at once, without counting as retries.
  ChatResult Run(const ChatRequest& request) {
    const int64_t prompt_chars = PromptChars(request);
    RequestShape shape = shape_.ForCall(request.max_output_tokens, prompt_chars);
    ChatResult result;
    int retried_attempts = 0;
    int reshapes = 0;
    bool grown = false;
    while (true) {
      ++result.attempts;
      const ProviderAdapter& adapter = shape.api == Api::kResponses ? *responses_ : *chat_;
      const HttpRequest http = adapter.BuildRequest(request, shape);
      const HttpResponse response = Send(http, &result.usage);
      AttemptOutcome outcome = Classify(response, http.url, adapter, shape.max_output_tokens, prompt_chars);
      if (outcome.error == ErrorKind::kNone) {
        AddTokens(outcome.reply.usage, &result.usage);
        ReadText(http.url, shape.max_output_tokens, &outcome);
      }
      result.error = outcome.error;
      if (outcome.error == ErrorKind::kNone) {
        result.error_message.clear();
        result.text = RedactKey(outcome.reply.text, config_.api_key);
        break;
      }
      result.error_message = RedactKey(outcome.message, config_.api_key);
      Tally(result.error, result.error_message);
      if (outcome.error == ErrorKind::kTruncated) {
        const int bigger =
            grown ? shape.max_output_tokens : shape_.Grown(shape.max_output_tokens, prompt_chars);
        grown = true;
        if (bigger == shape.max_output_tokens) {
          break;
        }
        shape.max_output_tokens = bigger;
        continue;
      }
      if (reshapes < kMaxReshapesPerCall && Reshaped(outcome.refusal, result.error_message, &shape)) {
        ++reshapes;
        continue;
      }
      if (!policy_.ShouldRetry(outcome.error, ++retried_attempts)) {
        break;
      }
      const auto retry_after_s = RetryAfterSeconds(response.headers, clock_.WallNow());
      clock_.Sleep(policy_.DelaySeconds(retried_attempts, retry_after_s, UnitRandom()));
    }
    if (!result.ok() && result.attempts > 1) {
      result.error_message += " (after " + std::to_string(result.attempts) + " attempts)";
    }
    result.usage.cost_usd = CostUsd(result.usage, config_);
    return result;
  }

  bool Reshaped(const Refusal& refusal, const std::string& message, RequestShape* shape) {
    std::string note;
    if (!shape_.Apply(refusal, shape, &note)) {
      return false;
    }
    if (!note.empty()) {
      std::lock_guard lock(tally_mutex_);
      adaptations_.push_back(note + " (the server said: " + message + ")");
    }
    return true;
  }

  void Tally(ErrorKind kind, const std::string& message) {
    std::lock_guard lock(tally_mutex_);
    ErrorTally& tally = errors_[ErrorKindName(kind)];
    ++tally.count;
    tally.last_message = message;
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
  const std::unique_ptr<ProviderAdapter> chat_;
  const std::unique_ptr<ProviderAdapter> responses_;
  SharedShape shape_;
  const RetryPolicy policy_;
  BudgetTracker budget_;
  std::counting_semaphore<> slots_;
  std::mutex random_mutex_;
  std::mt19937_64 random_;
  mutable std::mutex tally_mutex_;
  std::map<std::string, ErrorTally> errors_;
  std::vector<std::string> adaptations_;
};

}  // namespace

std::unique_ptr<LlmClient> MakeLlmClient(const LlmConfig& config, CallRecorder recorder,
                                         std::shared_ptr<HttpTransport> transport, Clock& clock) {
  return std::make_unique<Client>(config, std::move(recorder), std::move(transport), clock);
}

}  // namespace egg::llm
