#include "llm/provider.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "llm/model_family.h"

namespace egg::llm {
namespace {

constexpr size_t kErrorSummaryChars = 300;
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr const char* kSystemSeparator = "\n\n";

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

ParsedReply MalformedReply(std::string message) {
  ParsedReply parsed;
  parsed.error_message = std::move(message);
  return parsed;
}

std::optional<ParsedReply> BodyError(const Json& reply, const std::string& body) {
  const bool error_object = reply.is_object() && reply.contains("error") && !reply["error"].is_null();
  const bool error_type = reply.is_object() && reply.value("type", Json()) == "error";
  if (!error_object && !error_type) {
    return std::nullopt;
  }
  ParsedReply parsed;
  parsed.body_error = true;
  parsed.error_message = "an error inside a 2xx reply: " + ErrorBodySummary(body);
  return parsed;
}

int64_t NestedTokenCount(const Json& object, const char* outer, const char* inner) {
  if (!object.is_object() || !object.contains(outer)) {
    return 0;
  }
  return TokenCount(object[outer], inner);
}

std::string StripThinking(const std::string& text) {
  std::string kept = text;
  const size_t first_close = kept.find(kThinkClose);
  if (first_close != std::string::npos && kept.rfind(kThinkOpen, first_close) == std::string::npos) {
    kept.erase(0, first_close + kThinkClose.size());
  }
  for (size_t open = kept.find(kThinkOpen); open != std::string::npos; open = kept.find(kThinkOpen, open)) {
    const size_t close = kept.find(kThinkClose, open);
    kept.erase(open, close == std::string::npos ? std::string::npos : close + kThinkClose.size() - open);
  }
  const size_t start = kept.find_first_not_of(" \t\r\n");
  return start == std::string::npos ? std::string() : kept.substr(start);
}

SplitMessages SplitSystem(const std::vector<Message>& messages) {
  SplitMessages split;
  for (const Message& message : messages) {
    if (message.role == "system") {
      split.system += (split.system.empty() ? "" : kSystemSeparator) + message.content;
    } else {
      split.rest.push_back({{"role", message.role}, {"content", message.content}});
    }
  }
  return split;
}

HttpRequest JsonPost(std::string url, const Json& body, const std::string& auth_name,
                     const std::string& auth_prefix, const std::string& key) {
  HttpRequest http{std::move(url), {{"Content-Type", "application/json"}}, body.dump()};
  if (!key.empty()) {
    http.headers.emplace_back(auth_name, auth_prefix + key);
  }
  return http;
}

RequestShape InitialShape(const LlmConfig& config) {
  const ModelTraits traits = TraitsFor(config.provider, config.model);
  RequestShape shape;
  shape.api = config.provider == Provider::kOpenAi ? config.api : Api::kChatCompletions;
  shape.max_completion_tokens = traits.reasoning;
  if (traits.accepts_temperature) {
    shape.temperature = config.temperature;
  }
  if (config.provider == Provider::kOpenAi) {
    shape.reasoning_effort = config.reasoning_effort;  // set: the user knows the model takes it (gpt-oss too)
  }
  shape.max_output_tokens =
      config.max_output_tokens > 0 ? config.max_output_tokens : traits.default_max_output_tokens;
  return shape;
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

std::unique_ptr<ProviderAdapter> MakeProviderAdapter(const LlmConfig& config, Api api) {
  if (config.provider == Provider::kAnthropic) {
    return MakeAnthropicAdapter(config);
  }
  return api == Api::kResponses ? MakeResponsesAdapter(config) : MakeOpenAiAdapter(config);
}

}  // namespace egg::llm
