// OpenAI-compatible Chat Completions: POST {base_url}/chat/completions.
#include "llm/provider.h"

namespace egg::llm {
namespace {

class OpenAiAdapter : public ProviderAdapter {
 public:
  explicit OpenAiAdapter(const LlmConfig& config)
      : url_(JoinUrl(config.base_url, "/chat/completions")), model_(config.model), api_key_(config.api_key) {}

  HttpRequest BuildRequest(const ChatRequest& request) const override {
    Json messages = Json::array();
    for (const Message& message : request.messages) {
      messages.push_back({{"role", message.role}, {"content", message.content}});
    }
    const Json body = {{"model", model_},
                       {"messages", std::move(messages)},
                       {"max_tokens", request.max_tokens},
                       {"temperature", request.temperature}};
    HttpRequest http{url_, {{"Content-Type", "application/json"}}, body.dump()};
    if (!api_key_.empty()) {
      http.headers.emplace_back("Authorization", "Bearer " + api_key_);
    }
    return http;
  }

  ParsedReply ParseReply(const std::string& body) const override {
    const Json reply = Json::parse(body, nullptr, false);
    if (reply.is_discarded() || !reply.is_object()) {
      return {false, {}, 0, 0, "the reply is not a JSON object: " + ErrorBodySummary(body)};
    }
    const auto choices = reply.find("choices");
    if (choices == reply.end() || !choices->is_array() || choices->empty()) {
      return {false, {}, 0, 0, "the reply has no choices: " + ErrorBodySummary(body)};
    }
    const Json& first = (*choices)[0];
    const Json* content = nullptr;
    if (first.is_object() && first.contains("message") && first["message"].is_object() &&
        first["message"].contains("content")) {
      content = &first["message"]["content"];
    }
    if (content == nullptr || !content->is_string()) {
      return {false, {}, 0, 0, "the reply has no choices[0].message.content string"};
    }
    const Json usage = reply.value("usage", Json::object());
    return {true,
            content->get<std::string>(),
            TokenCount(usage, "prompt_tokens"),
            TokenCount(usage, "completion_tokens"),
            {}};
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
