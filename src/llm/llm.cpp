#include "llm/llm.h"

#include "llm/client.h"

namespace egg::llm {

std::string ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNone:
      return "none";
    case ErrorKind::kRateLimited:
      return "rate_limited";
    case ErrorKind::kServer:
      return "server";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kNetwork:
      return "network";
    case ErrorKind::kAuth:
      return "auth";
    case ErrorKind::kQuota:
      return "quota";
    case ErrorKind::kNotFound:
      return "not_found";
    case ErrorKind::kBadRequest:
      return "bad_request";
    case ErrorKind::kMalformed:
      return "malformed";
    case ErrorKind::kTruncated:
      return "truncated";
    case ErrorKind::kBudgetExhausted:
      return "budget_exhausted";
  }
  return "unknown";
}

bool IsRetryable(ErrorKind kind) {
  return kind == ErrorKind::kRateLimited || kind == ErrorKind::kServer || kind == ErrorKind::kTimeout ||
         kind == ErrorKind::kNetwork;
}

bool IsConfigurationError(ErrorKind kind) {
  return kind == ErrorKind::kAuth || kind == ErrorKind::kQuota || kind == ErrorKind::kNotFound ||
         kind == ErrorKind::kBadRequest;
}

std::string ApiName(Api api) { return api == Api::kResponses ? "responses" : "chat_completions"; }

std::string ProviderName(Provider provider) {
  return provider == Provider::kAnthropic ? "anthropic" : "openai";
}

std::string RedactKey(const std::string& text, const std::string& key) {
  if (key.empty()) {
    return text;
  }
  static const std::string kRedacted = "[redacted]";
  std::string redacted = text;
  for (size_t at = redacted.find(key); at != std::string::npos;
       at = redacted.find(key, at + kRedacted.size())) {
    redacted.replace(at, key.size(), kRedacted);
  }
  return redacted;
}

std::unique_ptr<LlmClient> MakeLlmClient(const LlmConfig& config, CallRecorder recorder) {
  return MakeLlmClient(config, std::move(recorder), MakeCurlTransport(), SystemClock());
}

}  // namespace egg::llm
