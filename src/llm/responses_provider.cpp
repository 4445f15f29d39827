// OpenAI Responses: POST {base_url}/responses; system messages become "instructions", nothing is stored
// server-side ("store": false), the cap is max_output_tokens and the effort reasoning.effort.
#include "llm/provider.h"

namespace egg::llm {
namespace {

class ResponsesAdapter : public ProviderAdapter {
 public:
  explicit ResponsesAdapter(const LlmConfig& config)
      : url_(JoinUrl(config.base_url, "/responses")), model_(config.model), api_key_(config.api_key) {}

  HttpRequest BuildRequest(const ChatRequest& request, const RequestShape& shape) const override {
    SplitMessages split = SplitSystem(request.messages);
    Json body = {{"model", model_},
                 {"input", std::move(split.rest)},
                 {"max_output_tokens", shape.max_output_tokens},
                 {"store", false}};
    if (!split.system.empty()) {
      body["instructions"] = split.system;
    }
    if (shape.temperature) {
      body["temperature"] = *shape.temperature;
    }
    if (!shape.reasoning_effort.empty()) {
      body["reasoning"] = {{"effort", shape.reasoning_effort}};
    }
    return JsonPost(url_, body, "Authorization", "Bearer ", api_key_);
  }

  ParsedReply ParseReply(const std::string& body) const override {
    const Json reply = Json::parse(body, nullptr, false);
    if (reply.is_discarded() || !reply.is_object()) {
      return MalformedReply("the reply is not a JSON object: " + ErrorBodySummary(body));
    }
    const Json status = reply.value("status", Json());
    if (status == "failed" || !reply.contains("output")) {
      if (auto error = BodyError(reply, body)) {
        return *error;
      }
    }
    const auto output = reply.find("output");
    if (output == reply.end() || !output->is_array()) {
      return MalformedReply("the reply has no output array: " + ErrorBodySummary(body));
    }
    ParsedReply parsed;
    parsed.ok = true;
    parsed.text = OutputText(*output);
    parsed.truncated = status == "incomplete";
    const Json usage = reply.value("usage", Json::object());
    parsed.usage.input_tokens = TokenCount(usage, "input_tokens");
    parsed.usage.cached_input_tokens = NestedTokenCount(usage, "input_tokens_details", "cached_tokens");
    parsed.usage.output_tokens = TokenCount(usage, "output_tokens");
    parsed.usage.reasoning_tokens = NestedTokenCount(usage, "output_tokens_details", "reasoning_tokens");
    return parsed;
  }

 private:
  // The output_text parts of the message items, in order (reasoning items are skipped).
  static std::string OutputText(const Json& output) {
    std::string text;
    for (const Json& item : output) {
      if (!item.is_object() || item.value("type", Json()) != "message" || !item.contains("content") ||
          !item["content"].is_array()) {
        continue;
      }
      for (const Json& part : item["content"]) {
        if (part.is_object() && part.value("type", Json()) == "output_text" && part.contains("text") &&
            part["text"].is_string()) {
          text += part["text"].get<std::string>();
        }
      }
    }
    return text;
  }

  std::string url_;
  std::string model_;
  std::string api_key_;
};

}  // namespace

std::unique_ptr<ProviderAdapter> MakeResponsesAdapter(const LlmConfig& config) {
  return std::make_unique<ResponsesAdapter>(config);
}

}  // namespace egg::llm
