#include "llm/refusal.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <optional>
#include <regex>
#include <string_view>

#include "common/json.h"

namespace egg::llm {
namespace {

constexpr long kHttpPaymentRequired = 402;
constexpr int kMinUsefulCap = 1024;       // below this no Code reply fits: the refusal stands
constexpr int kContextMarginTokens = 16;  // tokenizer slack when the server counted the input
constexpr int64_t kCharsPerTokenLow = 3;  // a generous token estimate for prompts of code and prose
constexpr int kEstimateMarginTokens = 256;

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

bool Has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

bool HasAny(const std::string& text, std::initializer_list<std::string_view> parts) {
  return std::any_of(parts.begin(), parts.end(), [&](std::string_view part) { return Has(text, part); });
}

std::optional<int> ToInt(const std::string& digits) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || value <= 0 || value > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  return static_cast<int>(value);
}

// The first number captured by `pattern` (its group `group`) in `text`.
std::optional<int> Number(const std::string& text, const char* pattern, size_t group = 1) {
  std::smatch match;
  if (!std::regex_search(text, match, std::regex(pattern, std::regex::icase)) || match.size() <= group) {
    return std::nullopt;
  }
  return ToInt(match[group].str());
}

std::optional<int> JsonInt(const Json& error, const char* name) {
  if (!error.is_object() || !error.contains(name) || !error[name].is_number_integer()) {
    return std::nullopt;
  }
  return ToInt(std::to_string(error[name].get<int64_t>()));
}

// The server's context length, from a message or llama.cpp's n_ctx.
std::optional<int> ContextTokens(const std::string& text, const Json& error) {
  if (auto n_ctx = JsonInt(error, "n_ctx")) {
    return n_ctx;
  }
  if (auto context = Number(text, R"(maximum context length (?:is|of) (\d+))")) {
    return context;
  }
  return Number(text, R"((\d+) \+ (\d+) > (\d+), decrease input length)", 3);  // Anthropic
}

// The input tokens the server counted, when it says.
std::optional<int> InputTokens(const std::string& text, const Json& error) {
  if (auto counted = JsonInt(error, "n_prompt_tokens")) {
    return counted;
  }
  for (const char* pattern :
       {R"((\d+) in the messages)", R"(request has (\d+) input tokens)", R"((\d+) tokens from the input)",
        R"((\d+) \+ \d+ > \d+, decrease input length)"}) {
    if (auto tokens = Number(text, pattern)) {
      return tokens;
    }
  }
  return std::nullopt;
}

// The model's own output ceiling, when the message names one.
std::optional<int> MaxOutput(const std::string& text) {
  for (const char* pattern :
       {R"(> (\d+), which is the maximum allowed number of output tokens)",
        R"(supports at most (\d+) completion tokens)", R"(valid range of max_tokens is \[1, (\d+)\])"}) {
    if (auto tokens = Number(text, pattern)) {
      return tokens;
    }
  }
  return std::nullopt;
}

Refusal FitOutputCap(const std::string& text, const Json& error, int sent_cap, int64_t prompt_chars) {
  Refusal refusal;
  refusal.reshape = Reshape::kFitOutputCap;
  if (auto ceiling = MaxOutput(text)) {
    refusal.max_output = *ceiling;
    refusal.output_cap = *ceiling;
  } else if (auto context = ContextTokens(text, error)) {
    refusal.context_tokens = *context;
    const auto input = InputTokens(text, error);
    refusal.output_cap =
        input ? *context - *input - kContextMarginTokens : CapWithinContext(*context, prompt_chars);
  }
  if (refusal.output_cap < kMinUsefulCap || refusal.output_cap >= sent_cap) {
    return {};
  }
  return refusal;
}

Json ErrorObject(const Json& body) {
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    return body["error"];
  }
  return body;
}

}  // namespace

int CapWithinContext(int context_tokens, int64_t prompt_chars) {
  const int64_t cap = context_tokens - prompt_chars / kCharsPerTokenLow - kEstimateMarginTokens;
  return cap < kMinUsefulCap ? 0 : static_cast<int>(cap);
}

Refusal ReadRefusal(const std::string& body, int sent_cap, int64_t prompt_chars) {
  const Json parsed = Json::parse(body, nullptr, false);
  const Json error = ErrorObject(parsed);
  const std::string text = Lower(body);
  if (Has(text, "v1/responses") && HasAny(text, {"only supported in", "not supported in v1/chat"})) {
    return {Reshape::kUseResponsesApi};
  }
  const Json param_field = error.is_object() ? error.value("param", Json()) : Json();
  const std::string param = param_field.is_string() ? param_field.get<std::string>() : "";
  const bool unsupported =
      HasAny(text, {"unsupported", "not supported", "does not support", "deprecated", "only the default"});
  if (unsupported && (param == "temperature" || Has(text, "temperature"))) {
    return {Reshape::kDropTemperature};
  }
  if (Has(text, "max_completion_tokens") && (param == "max_tokens" || unsupported)) {
    return {Reshape::kUseMaxCompletionTokens};
  }
  return FitOutputCap(body, error, sent_cap, prompt_chars);
}

bool IsQuotaError(long status, const std::string& body) {
  if (status == kHttpPaymentRequired) {
    return true;
  }
  return HasAny(Lower(body),
                {"insufficient_quota", "billing_error", "billing_hard_limit", "exceeded your current quota",
                 "credit balance is too low", "insufficient credits"});
}

}  // namespace egg::llm
