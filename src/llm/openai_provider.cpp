// OpenAI-compatible Chat Completions: POST {base_url}/chat/completions.
#include "llm/provider.h"

namespace egg::llm {
namespace {

class OpenAiAdapter : public ProviderAdapter {
 public:
  explicit OpenAiAdapter(const LlmConfig& config)
      : url_(JoinUrl(config.base_url, "/chat/completions")), model_(config.model), api_key_(config.api_key) {}

  HttpRequest BuildRequest(const ChatRequest& request, const RequestShape& shape) const override {
    Json messages = Json::array();
    for (const Message& message : request.messages) {
      messages.push_back({{"role", message.role}, {"content", message.content}});
    }
    Json body = {{"model", model_}, {"messages", std::move(messages)}};
    body[shape.max_completion_tokens ? "max_completion_tokens" : "max_tokens"] = shape.max_output_tokens;
    if (shape.temperature) {
      body["temperature"] = *shape.temperature;
    }
    if (!shape.reasoning_effort.empty()) {
      body["reasoning_effort"] = shape.reasoning_effort;
    }
    return JsonPost(url_, body, "Authorization", "Bearer ", api_key_);
  }

  ParsedReply ParseReply(const std::string& body) const override {
    const Json reply = Json::parse(body, nullptr, false);
    if (reply.is_discarded() || !reply.is_object()) {
      return MalformedReply("the reply is not a JSON object: " + ErrorBodySummary(body));
    }
    const auto choices = reply.find("choices");
    if (choices == reply.end() || !choices->is_array() || choices->empty()) {
      if (auto error = BodyError(reply, body)) {
        return *error;
      }
      return MalformedReply("the reply has no choices: " + ErrorBodySummary(body));
    }
    const Json& first = (*choices)[0];
    if (first.is_object() && first.contains("error") && first["error"].is_object()) {  // OpenRouter
      return *BodyError(first, first.dump());
    }
    const Json message = first.is_object() ? first.value("message", Json()) : Json();
    const Json content = message.is_object() ? message.value("content", Json()) : Json();
    if (!message.is_object() || (!content.is_string() && !content.is_null())) {
      return MalformedReply("the reply has no choices[0].message.content string");
    }
    ParsedReply parsed;
    parsed.ok = true;
    parsed.text = content.is_string() ? content.get<std::string>() : std::string();
    parsed.truncated = first.value("finish_reason", Json()) == "length";
    const Json usage = reply.value("usage", Json::object());
    parsed.usage.input_tokens = TokenCount(usage, "prompt_tokens");
    parsed.usage.cached_input_tokens = NestedTokenCount(usage, "prompt_tokens_details", "cached_tokens");
    parsed.usage.output_tokens = TokenCount(usage, "completion_tokens");
    parsed.usage.reasoning_tokens = NestedTokenCount(usage, "completion_tokens_details", "reasoning_tokens");
    return parsed;
  }

 private:
  std::string url_;
  std::string model_;
  std::string api_key_;
};

}  // namespace

std::unique_ptr<ProviderAdapter> MakeOpenAiAdapter(const LlmConfig& config) {
  return std::make_unique<OpenAiAdapter>(config);
}

}  // namespace egg::llm
