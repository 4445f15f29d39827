// Anthropic Messages: POST {base_url}/v1/messages; system messages go in the top-level "system" string.
#include "llm/provider.h"

namespace egg::llm {
namespace {

constexpr const char* kAnthropicVersion = "2023-06-01";

std::string MessagesUrl(const std::string& base_url) {
  const std::string base = JoinUrl(base_url, "");
  const bool has_version = base.size() >= 3 && base.compare(base.size() - 3, 3, "/v1") == 0;
  return base + (has_version ? "/messages" : "/v1/messages");
}

// Anthropic's input_tokens leaves out the cache reads and writes: egg's input_tokens counts all input.
Usage AnthropicUsage(const Json& usage) {
  Usage counted;
  counted.cached_input_tokens = TokenCount(usage, "cache_read_input_tokens");
  counted.cache_write_tokens = TokenCount(usage, "cache_creation_input_tokens");
  counted.input_tokens =
      TokenCount(usage, "input_tokens") + counted.cached_input_tokens + counted.cache_write_tokens;
  counted.output_tokens = TokenCount(usage, "output_tokens");
  return counted;
}

class AnthropicAdapter : public ProviderAdapter {
 public:
  explicit AnthropicAdapter(const LlmConfig& config)
      : url_(MessagesUrl(config.base_url)), model_(config.model), api_key_(config.api_key) {}

  HttpRequest BuildRequest(const ChatRequest& request, const RequestShape& shape) const override {
    SplitMessages split = SplitSystem(request.messages);
    Json body = {
        {"model", model_}, {"messages", std::move(split.rest)}, {"max_tokens", shape.max_output_tokens}};
    if (shape.temperature) {
      body["temperature"] = *shape.temperature;
    }
    if (!split.system.empty()) {
      body["system"] = split.system;
    }
    HttpRequest http{
        url_, {{"anthropic-version", kAnthropicVersion}, {"content-type", "application/json"}}, body.dump()};
    if (!api_key_.empty()) {
      http.headers.emplace_back("x-api-key", api_key_);
    }
    return http;
  }

  ParsedReply ParseReply(const std::string& body) const override {
    const Json reply = Json::parse(body, nullptr, false);
    if (reply.is_discarded() || !reply.is_object()) {
      return MalformedReply("the reply is not a JSON object: " + ErrorBodySummary(body));
    }
    const auto content = reply.find("content");
    if (content == reply.end() || !content->is_array()) {
      if (auto error = BodyError(reply, body)) {
        return *error;
      }
      return MalformedReply("the reply has no content array: " + ErrorBodySummary(body));
    }
    std::string text;
    for (const Json& block : *content) {
      if (block.is_object() && block.contains("type") && block["type"] == "text" && block.contains("text") &&
          block["text"].is_string()) {
        text += block["text"].get<std::string>();
      }
    }
    ParsedReply parsed;
    parsed.ok = true;
    parsed.text = std::move(text);
    parsed.truncated = reply.value("stop_reason", Json()) == "max_tokens";
    parsed.usage = AnthropicUsage(reply.value("usage", Json::object()));
    return parsed;
  }

 private:
  std::string url_;
  std::string model_;
  std::string api_key_;
};

}  // namespace

std::unique_ptr<ProviderAdapter> MakeAnthropicAdapter(const LlmConfig& config) {
  return std::make_unique<AnthropicAdapter>(config);
}

}  // namespace egg::llm
