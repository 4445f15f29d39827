#include "llm/provider.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "llm/model_family.h"

namespace egg::llm {
namespace {

constexpr const char* kKey = "sk-test-0123456789abcdef";

LlmConfig Config(Provider provider, const std::string& base_url, const std::string& key = kKey) {
  LlmConfig config;
  config.provider = provider;
  config.base_url = base_url;
  config.model = "test-model";
  config.api_key = key;
  return config;
}

ChatRequest Request() {
  ChatRequest request;
  request.messages = {{"system", "be brief"}, {"user", "hello"}, {"assistant", "hi"}, {"user", "again"}};
  request.purpose = "test/purpose";
  return request;
}

RequestShape Shape() {
  RequestShape shape;
  shape.max_output_tokens = 123;
  shape.temperature = 0.5;
  return shape;
}

using Headers = std::vector<std::pair<std::string, std::string>>;

std::string Header(const Headers& headers, const std::string& name) {
  auto found =
      std::find_if(headers.begin(), headers.end(), [&](const auto& header) { return header.first == name; });
  return found == headers.end() ? "<absent>" : found->second;
}

TEST(OpenAiProviderTest, BuildsChatCompletionsRequest) {
  const HttpRequest http = MakeOpenAiAdapter(Config(Provider::kOpenAi, "http://127.0.0.1:8000/v1/"))
                               ->BuildRequest(Request(), Shape());
  EXPECT_EQ(http.url, "http://127.0.0.1:8000/v1/chat/completions");
  const Json expected = {{"model", "test-model"},
                         {"messages",
                          {{{"role", "system"}, {"content", "be brief"}},
                           {{"role", "user"}, {"content", "hello"}},
                           {{"role", "assistant"}, {"content", "hi"}},
                           {{"role", "user"}, {"content", "again"}}}},
                         {"max_tokens", 123},
                         {"temperature", 0.5}};
  EXPECT_EQ(Json::parse(http.body), expected);
  EXPECT_EQ(Header(http.headers, "Authorization"), std::string("Bearer ") + kKey);
  EXPECT_EQ(Header(http.headers, "Content-Type"), "application/json");
  EXPECT_EQ(http.headers.size(), 2U);
  EXPECT_EQ(http.body.find(kKey), std::string::npos);
  EXPECT_EQ(http.body.find("test/purpose"), std::string::npos);
}

TEST(OpenAiProviderTest, SendsNoAuthorizationWithoutKey) {
  const HttpRequest http = MakeOpenAiAdapter(Config(Provider::kOpenAi, "http://localhost:1/v1", ""))
                               ->BuildRequest(Request(), Shape());
  EXPECT_EQ(Header(http.headers, "Authorization"), "<absent>");
  EXPECT_EQ(http.headers.size(), 1U);
}

TEST(OpenAiProviderTest, ParsesTextAndUsage) {
  const auto adapter = MakeOpenAiAdapter(Config(Provider::kOpenAi, "https://x/v1"));
  const ParsedReply reply =
      adapter->ParseReply(R"({"choices":[{"message":{"role":"assistant","content":"the answer"}}],)"
                          R"("usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}})");
  ASSERT_TRUE(reply.ok) << reply.error_message;
  EXPECT_EQ(reply.text, "the answer");
  EXPECT_EQ(reply.usage.input_tokens, 11);
  EXPECT_EQ(reply.usage.output_tokens, 7);
}

TEST(OpenAiProviderTest, MissingUsageCountsZero) {
  const auto adapter = MakeOpenAiAdapter(Config(Provider::kOpenAi, "https://x/v1"));
  for (const char* body : {R"({"choices":[{"message":{"content":"ok"}}]})",
                           R"({"choices":[{"message":{"content":"ok"}}],"usage":null})"}) {
    const ParsedReply reply = adapter->ParseReply(body);
    ASSERT_TRUE(reply.ok) << body;
    EXPECT_EQ(reply.text, "ok");
    EXPECT_EQ(reply.usage.input_tokens, 0);
    EXPECT_EQ(reply.usage.output_tokens, 0);
  }
}

TEST(OpenAiProviderTest, RejectsMalformedReplies) {
  const auto adapter = MakeOpenAiAdapter(Config(Provider::kOpenAi, "https://x/v1"));
  for (const char* body :
       {"not json", "[]", R"({"choices":[]})", R"({"choices":[{"message":{"content":7}}]})",
        R"({"choices":[{"text":"legacy"}]})", R"({"id":"x"})", ""}) {
    const ParsedReply reply = adapter->ParseReply(body);
    EXPECT_FALSE(reply.ok) << body;
    EXPECT_FALSE(reply.error_message.empty()) << body;
  }
}

TEST(AnthropicProviderTest, BuildsMessagesRequest) {
  ChatRequest request = Request();
  request.messages.push_back({"system", "and precise"});
  const HttpRequest http = MakeAnthropicAdapter(Config(Provider::kAnthropic, "https://api.anthropic.com"))
                               ->BuildRequest(request, Shape());
  EXPECT_EQ(http.url, "https://api.anthropic.com/v1/messages");
  const Json expected = {{"model", "test-model"},
                         {"system", "be brief\n\nand precise"},
                         {"messages",
                          {{{"role", "user"}, {"content", "hello"}},
                           {{"role", "assistant"}, {"content", "hi"}},
                           {{"role", "user"}, {"content", "again"}}}},
                         {"max_tokens", 123},
                         {"temperature", 0.5}};
  EXPECT_EQ(Json::parse(http.body), expected);
  EXPECT_EQ(Header(http.headers, "x-api-key"), kKey);
  EXPECT_EQ(Header(http.headers, "anthropic-version"), "2023-06-01");
  EXPECT_EQ(Header(http.headers, "content-type"), "application/json");
  EXPECT_EQ(Header(http.headers, "Authorization"), "<absent>");
  EXPECT_EQ(http.body.find(kKey), std::string::npos);
}

TEST(AnthropicProviderTest, OmitsSystemWhenThereIsNone) {
  ChatRequest request;
  request.messages = {{"user", "hello"}};
  const HttpRequest http =
      MakeAnthropicAdapter(Config(Provider::kAnthropic, "https://a"))->BuildRequest(request, Shape());
  EXPECT_FALSE(Json::parse(http.body).contains("system"));
}

TEST(AnthropicProviderTest, DoesNotDoubleTheVersionInTheUrl) {
  for (const char* base : {"http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/"}) {
    const HttpRequest http =
        MakeAnthropicAdapter(Config(Provider::kAnthropic, base))->BuildRequest(Request(), Shape());
    EXPECT_EQ(http.url, "http://127.0.0.1:9/v1/messages") << base;
  }
  const HttpRequest http = MakeAnthropicAdapter(Config(Provider::kAnthropic, "http://127.0.0.1:9/"))
                               ->BuildRequest(Request(), Shape());
  EXPECT_EQ(http.url, "http://127.0.0.1:9/v1/messages");
}

TEST(AnthropicProviderTest, ConcatenatesTextBlocksAndReadsUsage) {
  const auto adapter = MakeAnthropicAdapter(Config(Provider::kAnthropic, "https://a"));
  const ParsedReply reply = adapter->ParseReply(
      R"({"content":[{"type":"text","text":"one "},{"type":"tool_use","id":"t","input":{}},)"
      R"({"type":"text","text":"two"}],"usage":{"input_tokens":21,"output_tokens":5}})");
  ASSERT_TRUE(reply.ok) << reply.error_message;
  EXPECT_EQ(reply.text, "one two");
  EXPECT_EQ(reply.usage.input_tokens, 21);
  EXPECT_EQ(reply.usage.output_tokens, 5);
}

TEST(AnthropicProviderTest, MissingUsageCountsZeroAndMalformedIsRejected) {
  const auto adapter = MakeAnthropicAdapter(Config(Provider::kAnthropic, "https://a"));
  const ParsedReply no_usage = adapter->ParseReply(R"({"content":[{"type":"text","text":"x"}]})");
  ASSERT_TRUE(no_usage.ok);
  EXPECT_EQ(no_usage.usage.input_tokens + no_usage.usage.output_tokens, 0);
  for (const char* body : {"{", R"({"content":"text"})", R"({"type":"message"})", "null"}) {
    EXPECT_FALSE(adapter->ParseReply(body).ok) << body;
  }
}

TEST(LlmErrorSummaryTest, PrefersTheProvidersMessage) {
  EXPECT_EQ(ErrorBodySummary(R"({"error":{"message":"Rate limit\nreached","type":"x"}})"),
            "Rate limit reached");
  EXPECT_EQ(
      ErrorBodySummary(R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"),
      "Overloaded");
  EXPECT_EQ(ErrorBodySummary(R"({"error":"model not found"})"), "model not found");
  EXPECT_EQ(ErrorBodySummary(R"({"detail":"Not Found"})"), "Not Found");
  EXPECT_EQ(ErrorBodySummary("<html>\n  Bad   Gateway\n</html>"), "<html> Bad Gateway </html>");
  EXPECT_EQ(ErrorBodySummary(""), "(empty body)");
}

TEST(LlmErrorSummaryTest, TruncatesLongBodies) {
  const std::string summary = ErrorBodySummary(std::string(5000, 'x'));
  EXPECT_LE(summary.size(), 303U);
  EXPECT_GE(summary.size(), 300U);
  EXPECT_EQ(summary.substr(summary.size() - 3), "...");
  const std::string multibyte = OneLine(std::string(10, 'a') + "\xC3\xA9\xC3\xA9", 11);
  EXPECT_EQ(multibyte, std::string(10, 'a') + "...");
}

TEST(OpenAiProviderTest, ReasoningShapeSendsMaxCompletionTokensAndEffortOnly) {
  LlmConfig config = Config(Provider::kOpenAi, "https://api.openai.com/v1");
  config.model = "gpt-5.1";
  config.reasoning_effort = "medium";
  const RequestShape shape = InitialShape(config);
  EXPECT_TRUE(shape.max_completion_tokens);
  EXPECT_FALSE(shape.temperature.has_value());
  const Json body = Json::parse(MakeOpenAiAdapter(config)->BuildRequest(Request(), shape).body);
  EXPECT_EQ(body["max_completion_tokens"], 32768);
  EXPECT_EQ(body["reasoning_effort"], "medium");
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_FALSE(body.contains("temperature"));
  config.model = "qwen2.5-coder";
  config.max_output_tokens = 2048;
  const Json classic =
      Json::parse(MakeOpenAiAdapter(config)->BuildRequest(Request(), InitialShape(config)).body);
  EXPECT_EQ(classic["max_tokens"], 2048);
  EXPECT_EQ(classic["temperature"], kDefaultTemperature);
}

TEST(OpenAiProviderTest, ReadsFinishReasonCachedAndReasoningTokens) {
  const auto adapter = MakeOpenAiAdapter(Config(Provider::kOpenAi, "https://x/v1"));
  const ParsedReply reply = adapter->ParseReply(
      R"({"choices":[{"message":{"content":""},"finish_reason":"length"}],"usage":{"prompt_tokens":100,)"
      R"("completion_tokens":50,"prompt_tokens_details":{"cached_tokens":64},)"
      R"("completion_tokens_details":{"reasoning_tokens":50}}})");
  ASSERT_TRUE(reply.ok);
  EXPECT_TRUE(reply.truncated);
  EXPECT_EQ(reply.usage.cached_input_tokens, 64);
  EXPECT_EQ(reply.usage.reasoning_tokens, 50);
  const ParsedReply null_content = adapter->ParseReply(R"({"choices":[{"message":{"content":null}}]})");
  EXPECT_TRUE(null_content.ok);
  EXPECT_EQ(null_content.text, "");
}

TEST(OpenAiProviderTest, ErrorsInside200BodiesAreBodyErrors) {
  const auto adapter = MakeOpenAiAdapter(Config(Provider::kOpenAi, "https://x/v1"));
  for (
      const char* body :
      {R"({"error":{"message":"Upstream error from provider","code":502}})",
       R"({"choices":[{"error":{"message":"provider returned error","code":502},"finish_reason":"error"}]})"}) {
    const ParsedReply reply = adapter->ParseReply(body);
    EXPECT_FALSE(reply.ok) << body;
    EXPECT_TRUE(reply.body_error) << body;
    EXPECT_NE(reply.error_message.find("error"), std::string::npos) << reply.error_message;
  }
}

TEST(ResponsesProviderTest, BuildsAResponsesRequest) {
  LlmConfig config = Config(Provider::kOpenAi, "http://127.0.0.1:9/v1/");
  config.model = "gpt-5.1-codex-max";
  config.reasoning_effort = "high";
  RequestShape shape = InitialShape(config);
  shape.api = Api::kResponses;
  const HttpRequest http = MakeResponsesAdapter(config)->BuildRequest(Request(), shape);
  EXPECT_EQ(http.url, "http://127.0.0.1:9/v1/responses");
  const Json expected = {{"model", "gpt-5.1-codex-max"},
                         {"instructions", "be brief"},
                         {"input",
                          {{{"role", "user"}, {"content", "hello"}},
                           {{"role", "assistant"}, {"content", "hi"}},
                           {{"role", "user"}, {"content", "again"}}}},
                         {"max_output_tokens", 32768},
                         {"reasoning", {{"effort", "high"}}},
                         {"store", false}};
  EXPECT_EQ(Json::parse(http.body), expected);
  EXPECT_EQ(Header(http.headers, "Authorization"), std::string("Bearer ") + kKey);
}

TEST(ResponsesProviderTest, ReadsOutputTextStatusAndUsage) {
  const auto adapter = MakeResponsesAdapter(Config(Provider::kOpenAi, "https://x/v1"));
  const ParsedReply reply = adapter->ParseReply(
      R"({"object":"response","status":"completed","output":[{"type":"reasoning","summary":[]},)"
      R"({"type":"message","role":"assistant","content":[{"type":"output_text","text":"one "},)"
      R"({"type":"output_text","text":"two"}]}],"usage":{"input_tokens":30,"input_tokens_details":)"
      R"({"cached_tokens":10},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":12}}})");
  ASSERT_TRUE(reply.ok) << reply.error_message;
  EXPECT_EQ(reply.text, "one two");
  EXPECT_FALSE(reply.truncated);
  EXPECT_EQ(reply.usage.input_tokens, 30);
  EXPECT_EQ(reply.usage.cached_input_tokens, 10);
  EXPECT_EQ(reply.usage.reasoning_tokens, 12);
  const ParsedReply cut = adapter->ParseReply(
      R"({"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]})");
  EXPECT_TRUE(cut.ok && cut.truncated);
  const ParsedReply failed =
      adapter->ParseReply(R"({"status":"failed","error":{"code":"server_error","message":"boom"}})");
  EXPECT_TRUE(!failed.ok && failed.body_error);
}

TEST(AnthropicProviderTest, NoTemperatureForOpusFourSevenAndCacheUsage) {
  LlmConfig config = Config(Provider::kAnthropic, "https://a");
  config.model = "claude-opus-4-7";
  const Json body =
      Json::parse(MakeAnthropicAdapter(config)->BuildRequest(Request(), InitialShape(config)).body);
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_EQ(body["max_tokens"], kAnthropicMaxOutputTokens);
  const ParsedReply reply = MakeAnthropicAdapter(config)->ParseReply(
      R"({"content":[{"type":"text","text":"x"}],"stop_reason":"max_tokens","usage":{"input_tokens":10,)"
      R"("cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":5}})");
  ASSERT_TRUE(reply.ok);
  EXPECT_TRUE(reply.truncated);
  EXPECT_EQ(reply.usage.input_tokens, 130);
  EXPECT_EQ(reply.usage.cached_input_tokens, 100);
  EXPECT_EQ(reply.usage.cache_write_tokens, 20);
}

TEST(StripThinkingTest, DropsReasoningBeforeTheAnswer) {
  EXPECT_EQ(StripThinking("<think>\ndraft ```python\nbad\n```\n</think>\n\nfinal"), "final");
  EXPECT_EQ(StripThinking("draft ```python\nbad\n```\n</think>\nfinal"), "final");
  EXPECT_EQ(StripThinking("<think>still thinking"), "");
  EXPECT_EQ(StripThinking("a<think>x</think>b<think>y</think>c"), "abc");
  EXPECT_EQ(StripThinking("plain answer"), "plain answer");
}

}  // namespace
}  // namespace egg::llm
