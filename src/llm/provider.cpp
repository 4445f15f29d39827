#include "llm/provider.h"

#include <algorithm>
#include <cctype>

namespace egg::llm {
namespace {

constexpr size_t kErrorSummaryChars = 300;

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0U) == 0x80U; }

std::string ErrorTextFromJson(const Json& reply) {
  if (!reply.is_object()) {
    return {};
  }
  if (auto error = reply.find("error"); error != reply.end()) {
    if (error->is_string()) {
      return error->get<std::string>();
    }
    if (error->is_object() && error->contains("message") && (*error)["message"].is_string()) {
      return (*error)["message"].get<std::string>();
    }
  }
  for (const char* field : {"message", "detail"}) {
    if (auto value = reply.find(field); value != reply.end() && value->is_string()) {
      return value->get<std::string>();
    }
  }
  return {};
}

}  // namespace

std::string OneLine(const std::string& text, size_t max_chars) {
  std::string line;
  bool pending_space = false;
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      pending_space = !line.empty();
      continue;
    }
    if (pending_space) {
      line += ' ';
      pending_space = false;
    }
    line += c;
  }
  if (line.size() <= max_chars) {
    return line;
  }
  size_t cut = max_chars;
  while (cut > 0 && IsUtf8Continuation(line[cut])) {
    --cut;
  }
  return line.substr(0, cut) + "...";
}

std::string ErrorBodySummary(const std::string& body) {
  const Json reply = Json::parse(body, nullptr, false);
  std::string text = reply.is_discarded() ? std::string() : ErrorTextFromJson(reply);
  if (text.empty()) {
    text = body;
  }
  text = OneLine(text, kErrorSummaryChars);
  return text.empty() ? "(empty body)" : text;
}

int64_t TokenCount(const Json& object, const char* name) {
  if (!object.is_object()) {
    return 0;
  }
  auto value = object.find(name);
  if (value == object.end() || !value->is_number_integer()) {
    return 0;
  }
  return std::max<int64_t>(0, value->get<int64_t>());
}

std::string JoinUrl(const std::string& base_url, const std::string& path) {
  std::string url = base_url;
  while (!url.empty() && url.back() == '/') {
    url.pop_back();
  }
  return url + path;
}

std::unique_ptr<ProviderAdapter> MakeProviderAdapter(const LlmConfig& config) {
  switch (config.provider) {
    case Provider::kOpenAi:
      return MakeOpenAiAdapter(config);
    case Provider::kAnthropic:
      return MakeAnthropicAdapter(config);
  }
  return MakeOpenAiAdapter(config);
}

}  // namespace egg::llm
