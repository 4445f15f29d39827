#include "llm/provider.h"

#include <gtest/gtest.h>

#include <algorithm>

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
  request.max_tokens = 123;
  request.temperature = 0.5;
  request.purpose = "test/purpose";
  return request;
}

using Headers = std::vector<std::pair<std::string, std::string>>;

std::string Header(const Headers& headers, const std::string& name) {
  auto found =
      std::find_if(headers.begin(), headers.end(), [&](const auto& header) { return header.first == name; });
  return found == headers.end() ? "<absent>" : found->second;
}

TEST(OpenAiProviderTest, BuildsChatCompletionsRequest) {
  const HttpRequest http =
      MakeOpenAiAdapter(Config(Provider::kOpenAi, "http://127.0.0.1:8000/v1/"))->BuildRequest(Request());
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
  const HttpRequest http =
      MakeOpenAiAdapter(Config(Provider::kOpenAi, "http://localhost:1/v1", ""))->BuildRequest(Request());
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
  EXPECT_EQ(reply.input_tokens, 11);
  EXPECT_EQ(reply.output_tokens, 7);
}

TEST(OpenAiProviderTest, MissingUsageCountsZero) {
  const auto adapter = MakeOpenAiAdapter(Config(Provider::kOpenAi, "https://x/v1"));
  for (const char* body : {R"({"choices":[{"message":{"content":"ok"}}]})",
                           R"({"choices":[{"message":{"content":"ok"}}],"usage":null})"}) {
    const ParsedReply reply = adapter->ParseReply(body);
    ASSERT_TRUE(reply.ok) << body;
    EXPECT_EQ(reply.text, "ok");
    EXPECT_EQ(reply.input_tokens, 0);
    EXPECT_EQ(reply.output_tokens, 0);
  }
}

TEST(OpenAiProviderTest, RejectsMalformedReplies) {
  const auto adapter = MakeOpenAiAdapter(Config(Provider::kOpenAi, "https://x/v1"));
  for (const char* body :
       {"not json", "[]", R"({"choices":[]})", R"({"choices":[{"message":{"content":null}}]})",
        R"({"choices":[{"text":"legacy"}]})", R"({"id":"x"})", ""}) {
    const ParsedReply reply = adapter->ParseReply(body);
    EXPECT_FALSE(reply.ok) << body;
    EXPECT_FALSE(reply.error_message.empty()) << body;
  }
}

TEST(AnthropicProviderTest, BuildsMessagesRequest) {
  ChatRequest request = Request();
  request.messages.push_back({"system", "and precise"});
  const HttpRequest http =
      MakeAnthropicAdapter(Config(Provider::kAnthropic, "https://api.anthropic.com"))->BuildRequest(request);
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
      MakeAnthropicAdapter(Config(Provider::kAnthropic, "https://a"))->BuildRequest(request);
  EXPECT_FALSE(Json::parse(http.body).contains("system"));
}

TEST(AnthropicProviderTest, DoesNotDoubleTheVersionInTheUrl) {
  for (const char* base : {"http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/"}) {
    const HttpRequest http =
        MakeAnthropicAdapter(Config(Provider::kAnthropic, base))->BuildRequest(Request());
    EXPECT_EQ(http.url, "http://127.0.0.1:9/v1/messages") << base;
  }
  const HttpRequest http =
      MakeAnthropicAdapter(Config(Provider::kAnthropic, "http://127.0.0.1:9/"))->BuildRequest(Request());
  EXPECT_EQ(http.url, "http://127.0.0.1:9/v1/messages");
}

TEST(AnthropicProviderTest, ConcatenatesTextBlocksAndReadsUsage) {
  const auto adapter = MakeAnthropicAdapter(Config(Provider::kAnthropic, "https://a"));
  const ParsedReply reply = adapter->ParseReply(
      R"({"content":[{"type":"text","text":"one "},{"type":"tool_use","id":"t","input":{}},)"
      R"({"type":"text","text":"two"}],"usage":{"input_tokens":21,"output_tokens":5}})");
  ASSERT_TRUE(reply.ok) << reply.error_message;
  EXPECT_EQ(reply.text, "one two");
  EXPECT_EQ(reply.input_tokens, 21);
  EXPECT_EQ(reply.output_tokens, 5);
}

TEST(AnthropicProviderTest, MissingUsageCountsZeroAndMalformedIsRejected) {
  const auto adapter = MakeAnthropicAdapter(Config(Provider::kAnthropic, "https://a"));
  const ParsedReply no_usage = adapter->ParseReply(R"({"content":[{"type":"text","text":"x"}]})");
  ASSERT_TRUE(no_usage.ok);
  EXPECT_EQ(no_usage.input_tokens + no_usage.output_tokens, 0);
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

}  // namespace
}  // namespace egg::llm
