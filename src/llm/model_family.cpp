#include "llm/model_family.h"

#include <cctype>
#include <cstdio>
#include <string_view>

namespace egg::llm {
namespace {

constexpr int kOpusNoTemperatureMajor = 4;
constexpr int kOpusNoTemperatureMinor = 7;
constexpr int kNoTemperatureMajor = 5;  // every Claude family from 5 on

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// "o1", "o3-mini", "o4-mini-2025-04-16": the letter o, one digit, then the end or '-'.
bool IsOSeries(std::string_view model) {
  return model.size() >= 2 && model[0] == 'o' && std::isdigit(static_cast<unsigned char>(model[1])) != 0 &&
         (model.size() == 2 || model[2] == '-');
}

bool IsOpenAiReasoning(std::string_view model) { return IsOSeries(model) || StartsWith(model, "gpt-5"); }

struct ClaudeVersion {
  std::string family;  // opus, sonnet, haiku
  int major = 0;
  int minor = 0;
};

// "claude-opus-4-7", "claude-opus-4-7-20260101", "claude-sonnet-4-5", "claude-3-7-sonnet-latest".
ClaudeVersion ParseClaude(const std::string& model) {
  ClaudeVersion version;
  char family[16] = {};
  if (std::sscanf(model.c_str(), "claude-%15[a-z]-%d-%d", family, &version.major, &version.minor) >= 2) {
    version.family = family;
    if (version.minor > 99) {  // a date, not a minor version
      version.minor = 0;
    }
    return version;
  }
  version = {};
  std::sscanf(model.c_str(), "claude-%d-%d-%15[a-z]", &version.major, &version.minor, family);
  version.family = family;
  return version;
}

bool ClaudeRefusesTemperature(const std::string& model) {
  const ClaudeVersion version = ParseClaude(model);
  if (version.major >= kNoTemperatureMajor) {
    return true;
  }
  return version.family == "opus" &&
         (version.major > kOpusNoTemperatureMajor ||
          (version.major == kOpusNoTemperatureMajor && version.minor >= kOpusNoTemperatureMinor));
}

}  // namespace

ModelTraits TraitsFor(Provider provider, const std::string& model) {
  ModelTraits traits;
  if (model.find('/') != std::string::npos) {
    return traits;
  }
  if (provider == Provider::kAnthropic || StartsWith(model, "claude-")) {
    traits.accepts_temperature = !ClaudeRefusesTemperature(model);
    traits.default_max_output_tokens = kAnthropicMaxOutputTokens;
    return traits;
  }
  if (IsOpenAiReasoning(model)) {
    traits.reasoning = true;
    traits.accepts_temperature = false;
    traits.default_max_output_tokens = kReasoningMaxOutputTokens;
  }
  return traits;
}

}  // namespace egg::llm
