#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "common/json.h"
#include "llm/budget.h"
#include "llm/client.h"
#include "llm/llm.h"
#include "llm/model_family.h"
#include "llm/refusal.h"
#include "llm/test_fakes.h"

namespace egg::llm {
namespace {

using testing::FakeClock;
using testing::FakeTransport;
using testing::Reply;
using testing::TransportFailure;

constexpr const char* kKey = "sk-secret-key-ABCDEF0123456789";

std::string OpenAiReply(const std::string& text, int prompt_tokens, int completion_tokens) {
  return Json{{"choices", {{{"message", {{"role", "assistant"}, {"content", text}}}}}},
              {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}}}}
      .dump();
}

class LlmClientTest : public ::testing::Test {
 protected:
  LlmClientTest() {
    config_.base_url = "http://127.0.0.1:1/v1";
    config_.model = "test-model";
    config_.api_key = kKey;
    config_.max_retries = 2;
    config_.price_input_per_mtok_usd = 1.25;
    config_.price_output_per_mtok_usd = 10.0;
  }
  std::unique_ptr<LlmClient> Client() {
    return MakeLlmClient(
        config_,
        [this](const CallRecord& record) {
          std::lock_guard lock(records_mutex_);  // the recorder is called from every calling thread
          records_.push_back(record);
        },
        transport_, clock_);
  }
  static ChatRequest Request(const std::string& purpose = "unit") {
    return ChatRequest{{{"system", "sys"}, {"user", "write a kernel"}}, purpose, {}};
  }

  LlmConfig config_;
  std::mutex records_mutex_;
  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  FakeClock clock_;
  std::vector<CallRecord> records_;
};

TEST_F(LlmClientTest, ReturnsTextUsageAndCost) {
  transport_->Push(Reply(200, OpenAiReply("kernel code", 1000, 200)));
  auto client = Client();
  const ChatResult result = client->Complete(Request());
  ASSERT_TRUE(result.ok()) << result.error_message;
  EXPECT_EQ(result.text, "kernel code");
  EXPECT_EQ(result.attempts, 1);
  EXPECT_EQ(result.usage.input_tokens, 1000);
  EXPECT_EQ(result.usage.output_tokens, 200);
  EXPECT_DOUBLE_EQ(result.usage.cost_usd, 1000 * 1.25 / 1e6 + 200 * 10.0 / 1e6);
  EXPECT_EQ(client->Calls(), 1);
  EXPECT_EQ(client->Spent().input_tokens, 1000);
  EXPECT_DOUBLE_EQ(client->Spent().cost_usd, result.usage.cost_usd);
}

TEST_F(LlmClientTest, RecorderGetsOneRecordPerCompleteWithSummedUsage) {
  transport_->Push(Reply(503, "down"));
  transport_->Push(Reply(200, OpenAiReply("abc", 10, 4)));
  transport_->Push(Reply(400, R"({"error":{"message":"bad"}})"));
  auto client = Client();
  client->Complete(Request("stage1.seeds/code"));
  client->Complete(Request("stage2"));
  ASSERT_EQ(records_.size(), 2U);
  const CallRecord& first = records_[0];
  EXPECT_EQ(first.purpose, "stage1.seeds/code");
  EXPECT_EQ(first.provider, "openai");
  EXPECT_EQ(first.model, "test-model");
  EXPECT_EQ(first.attempts, 2);
  EXPECT_EQ(first.error, ErrorKind::kNone);
  EXPECT_EQ(first.usage.input_tokens, 10);
  EXPECT_EQ(first.usage.output_tokens, 4);
  EXPECT_EQ(first.prompt_chars, 3 + 14);
  EXPECT_EQ(first.reply_chars, 3);
  EXPECT_EQ(records_[1].error, ErrorKind::kBadRequest);
  EXPECT_EQ(records_[1].attempts, 1);
  EXPECT_EQ(client->Calls(), 2);
}

TEST_F(LlmClientTest, KeyNeverLeaksIntoErrorsRecordsOrResults) {
  const std::string echo = Json{{"error", {{"message", std::string("invalid key ") + kKey}}}}.dump();
  transport_->Push(Reply(400, echo));
  transport_->Push(
      TransportFailure(TransportError::kNetwork, std::string("POST http://h/?k=") + kKey + ": refused"));
  transport_->Push(TransportFailure(TransportError::kNetwork, "again"));
  transport_->Push(TransportFailure(TransportError::kNetwork, "and again"));
  transport_->Push(Reply(200, OpenAiReply(std::string("you said ") + kKey, 1, 1)));
  auto client = Client();
  std::vector<ChatResult> results = {client->Complete(Request()), client->Complete(Request()),
                                     client->Complete(Request())};
  EXPECT_EQ(results[0].error, ErrorKind::kBadRequest);
  EXPECT_EQ(results[0].error_message,
            "HTTP 400 from http://127.0.0.1:1/v1/chat/completions: invalid key [redacted]");
  EXPECT_EQ(results[1].error, ErrorKind::kNetwork);
  EXPECT_TRUE(results[2].ok());
  EXPECT_EQ(results[2].text, "you said [redacted]");
  for (const ChatResult& result : results) {
    EXPECT_EQ(result.error_message.find(kKey), std::string::npos) << result.error_message;
    EXPECT_EQ(result.text.find(kKey), std::string::npos);
  }
  ASSERT_EQ(records_.size(), 3U);
  for (const CallRecord& record : records_) {
    EXPECT_EQ(record.error_message.find(kKey), std::string::npos) << record.error_message;
  }
  // The key does go where it must: the Authorization header, and nowhere else in the request.
  const HttpRequest sent = transport_->Requests().front();
  EXPECT_EQ(sent.body.find(kKey), std::string::npos);
  EXPECT_EQ(sent.url.find(kKey), std::string::npos);
}

TEST_F(LlmClientTest, ConcurrencyLimitBoundsSimultaneousRequests) {
  constexpr int kLimit = 3;
  constexpr int kThreads = 8;
  config_.max_concurrency = kLimit;
  transport_ = std::make_shared<FakeTransport>(std::chrono::milliseconds(50));
  transport_->SetDefault(Reply(200, OpenAiReply("x", 1, 1)));
  auto client = Client();
  std::vector<std::thread> threads;
  std::atomic<int> ok_count{0};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] { ok_count += client->Complete(Request()).ok() ? 1 : 0; });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(ok_count.load(), kThreads);
  EXPECT_EQ(transport_->MaxInFlight(), kLimit);
  EXPECT_EQ(client->Calls(), kThreads);
  EXPECT_EQ(client->Spent().input_tokens, kThreads);
}

TEST(LlmTest, RedactKeyReplacesEveryOccurrence) {
  EXPECT_EQ(RedactKey("a KEY b KEYKEY", "KEY"), "a [redacted] b [redacted][redacted]");
  EXPECT_EQ(RedactKey("nothing here", "KEY"), "nothing here");
  EXPECT_EQ(RedactKey("no key configured", ""), "no key configured");
  EXPECT_EQ(RedactKey("[redacted]", "redacted"), "[[redacted]]");
}

TEST(LlmTest, NamesKindsAndProviders) {
  EXPECT_EQ(ErrorKindName(ErrorKind::kRateLimited), "rate_limited");
  EXPECT_EQ(ErrorKindName(ErrorKind::kBudgetExhausted), "budget_exhausted");
  EXPECT_EQ(ProviderName(Provider::kAnthropic), "anthropic");
  EXPECT_EQ(ProviderName(Provider::kOpenAi), "openai");
  EXPECT_TRUE(IsRetryable(ErrorKind::kNetwork));
  EXPECT_FALSE(IsRetryable(ErrorKind::kMalformed));
}

TEST(LlmTest, AnthropicClientEndToEnd) {
  LlmConfig config;
  config.provider = Provider::kAnthropic;
  config.base_url = "https://api.anthropic.com";
  config.model = "claude-test";
  config.api_key = kKey;
  auto transport = std::make_shared<FakeTransport>();
  transport->Push(
      Reply(529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"));
  transport->Push(Reply(
      200, R"({"content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":5,"output_tokens":1}})"));
  FakeClock clock;
  std::vector<CallRecord> records;
  auto client = MakeLlmClient(
      config, [&](const CallRecord& record) { records.push_back(record); }, transport, clock);
  const ChatResult result = client->Complete(ChatRequest{{{"user", "hello"}}, "p", {}});
  ASSERT_TRUE(result.ok()) << result.error_message;
  EXPECT_EQ(result.text, "hi");
  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(result.usage.input_tokens, 5);
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].provider, "anthropic");
  EXPECT_EQ(transport->Requests()[0].url, "https://api.anthropic.com/v1/messages");
}

class BudgetTest : public LlmClientTest {};

TEST_F(BudgetTest, RefusesTheCallAfterMaxCallsWithoutARequest) {
  config_.budget.max_calls = 2;
  transport_->SetDefault(Reply(200, OpenAiReply("x", 1, 1)));
  auto client = Client();
  EXPECT_TRUE(client->Complete(Request()).ok());
  EXPECT_TRUE(client->Complete(Request()).ok());
  const ChatResult refused = client->Complete(Request());
  EXPECT_EQ(refused.error, ErrorKind::kBudgetExhausted);
  EXPECT_EQ(refused.attempts, 0);
  EXPECT_NE(refused.error_message.find("max_calls = 2"), std::string::npos) << refused.error_message;
  EXPECT_EQ(transport_->Requests().size(), 2U);
  EXPECT_EQ(client->Calls(), 2);
  ASSERT_EQ(records_.size(), 3U);
  EXPECT_EQ(records_[2].error, ErrorKind::kBudgetExhausted);
}

TEST_F(BudgetTest, RefusesOnceTokensAreSpent) {
  config_.budget.max_tokens = 100;
  transport_->Push(Reply(200, OpenAiReply("x", 60, 30)));
  transport_->Push(Reply(200, OpenAiReply("y", 5, 5)));
  transport_->Push(Reply(200, OpenAiReply("z", 5, 5)));
  auto client = Client();
  EXPECT_TRUE(client->Complete(Request()).ok());  // 90 tokens
  EXPECT_TRUE(client->Complete(Request()).ok());  // 100 tokens
  EXPECT_EQ(client->Complete(Request()).error, ErrorKind::kBudgetExhausted);
  EXPECT_EQ(transport_->Requests().size(), 2U);
  EXPECT_EQ(client->Spent().input_tokens + client->Spent().output_tokens, 100);
}

TEST_F(BudgetTest, RefusesOnceDollarsAreSpent) {
  config_.budget.max_cost_usd = 0.01;
  // 1000 * 1.25 / 1e6 + 900 * 10 / 1e6 = 0.01025 dollars.
  transport_->Push(Reply(200, OpenAiReply("x", 1000, 900)));
  auto client = Client();
  EXPECT_TRUE(client->Complete(Request()).ok());
  const ChatResult refused = client->Complete(Request());
  EXPECT_EQ(refused.error, ErrorKind::kBudgetExhausted);
  EXPECT_NE(refused.error_message.find("max_cost_usd"), std::string::npos) << refused.error_message;
  EXPECT_EQ(transport_->Requests().size(), 1U);
}

TEST(BudgetTrackerTest, AdmitsWithoutLimitsAndComputesCost) {
  BudgetTracker tracker(Budget{});
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(tracker.Admit().has_value());
  }
  EXPECT_EQ(tracker.Calls(), 5);
  LlmConfig prices;
  prices.price_input_per_mtok_usd = 1.25;
  prices.price_output_per_mtok_usd = 10.0;
  Usage usage;
  usage.input_tokens = 2'000'000;
  usage.output_tokens = 1'000'000;
  EXPECT_DOUBLE_EQ(CostUsd(usage, prices), 2.5 + 10.0);
  usage.cached_input_tokens = 1'000'000;  // at the input price while no cached price is set
  EXPECT_DOUBLE_EQ(CostUsd(usage, prices), 2.5 + 10.0);
  prices.price_cached_input_per_mtok_usd = 0.125;
  prices.price_cache_write_per_mtok_usd = 2.0;
  usage.cache_write_tokens = 500'000;
  EXPECT_DOUBLE_EQ(CostUsd(usage, prices), 0.5 * 1.25 + 0.125 + 0.5 * 2.0 + 10.0);
}

class ReshapeTest : public LlmClientTest {
 protected:
  Json Body(size_t index) const { return Json::parse(transport_->Requests().at(index).body); }
};

TEST_F(ReshapeTest, ResponsesOnlyModelSwitchesTheApiForEveryLaterCall) {
  config_.model = "gpt-5.1-codex-max";
  transport_->Push(Reply(404,
                         R"({"error":{"message":"This model is only supported in v1/responses and not in )"
                         R"(v1/chat/completions.","type":"invalid_request_error","param":"model"}})"));
  const std::string ok =
      R"({"status":"completed","output":[{"type":"message","content":[{"type":"output_text",)"
      R"("text":"done"}]}],"usage":{"input_tokens":3,"output_tokens":2}})";
  transport_->Push(Reply(200, ok));
  transport_->Push(Reply(200, ok));
  auto client = Client();
  const ChatResult first = client->Complete(Request());
  ASSERT_TRUE(first.ok()) << first.error_message;
  EXPECT_EQ(first.text, "done");
  EXPECT_EQ(first.attempts, 2);
  EXPECT_TRUE(clock_.Sleeps().empty());
  EXPECT_TRUE(client->Complete(Request()).ok());
  const auto requests = transport_->Requests();
  ASSERT_EQ(requests.size(), 3U);
  EXPECT_EQ(requests[0].url, "http://127.0.0.1:1/v1/chat/completions");
  EXPECT_EQ(requests[1].url, "http://127.0.0.1:1/v1/responses");
  EXPECT_EQ(requests[2].url, "http://127.0.0.1:1/v1/responses");
  ASSERT_EQ(client->Adaptations().size(), 1U);
  EXPECT_NE(client->Adaptations()[0].find("Responses API"), std::string::npos);
  EXPECT_EQ(client->Errors().at("not_found").count, 1);
}

TEST_F(ReshapeTest, UnknownModelThatRefusesTemperatureLosesIt) {
  transport_->Push(Reply(400, R"({"error":{"message":"Unsupported value: 'temperature' does not support 0.2 )"
                              R"(with this model.","param":"temperature"}})"));
  transport_->Push(Reply(200, OpenAiReply("ok", 1, 1)));
  auto client = Client();
  ASSERT_TRUE(client->Complete(Request()).ok());
  EXPECT_TRUE(Body(0).contains("temperature"));
  EXPECT_FALSE(Body(1).contains("temperature"));
}

TEST_F(ReshapeTest, ContextLengthIsLearnedAndKeptForLaterCalls) {
  transport_->Push(Reply(400,
                         R"({"object":"error","message":"This model's maximum context length is 8192 )"
                         R"(tokens. However, you requested 16400 tokens (16 in the messages, 16384 in the )"
                         R"(completion).","type":"BadRequestError","code":400})"));
  transport_->SetDefault(Reply(200, OpenAiReply("ok", 1, 1)));
  auto client = Client();
  ASSERT_TRUE(client->Complete(Request()).ok());
  ASSERT_TRUE(client->Complete(Request()).ok());
  EXPECT_EQ(Body(0)["max_tokens"], kClassicMaxOutputTokens);
  EXPECT_EQ(Body(1)["max_tokens"], 8192 - 16 - 16);
  EXPECT_EQ(Body(2)["max_tokens"], CapWithinContext(8192, 17));
  EXPECT_EQ(transport_->Requests().size(), 3U);
}

TEST_F(ReshapeTest, ATruncatedReplyIsRetriedOnceWithALargerCapThenReported) {
  config_.max_output_tokens = 1000;
  const std::string cut =
      Json{{"choices", {{{"message", {{"content", ""}}}, {"finish_reason", "length"}}}}}.dump();
  transport_->Push(Reply(200, cut));
  transport_->Push(Reply(200, OpenAiReply("whole", 1, 1)));
  transport_->Push(Reply(200, cut));
  transport_->Push(Reply(200, cut));
  auto client = Client();
  const ChatResult grown = client->Complete(Request());
  ASSERT_TRUE(grown.ok()) << grown.error_message;
  EXPECT_EQ(grown.text, "whole");
  EXPECT_EQ(Body(1)["max_tokens"], 2000);
  const ChatResult truncated = client->Complete(Request());
  EXPECT_EQ(truncated.error, ErrorKind::kTruncated);
  EXPECT_EQ(truncated.attempts, 2);
  EXPECT_NE(truncated.error_message.find("output cap of 2000 tokens"), std::string::npos)
      << truncated.error_message;
  EXPECT_EQ(client->Errors().at("truncated").count, 3);
  EXPECT_TRUE(clock_.Sleeps().empty());
}

TEST_F(ReshapeTest, ThinkingIsStrippedAndAThinkingOnlyReplyIsRetried) {
  transport_->Push(Reply(200, OpenAiReply("<think>draft</think>\nanswer", 1, 1)));
  transport_->Push(Reply(200, OpenAiReply("<think>only thoughts", 1, 1)));
  transport_->Push(Reply(200, OpenAiReply("<think>ok</think>second", 1, 1)));
  auto client = Client();
  EXPECT_EQ(client->Complete(Request()).text, "answer");
  const ChatResult second = client->Complete(Request());
  EXPECT_EQ(second.text, "second");
  EXPECT_EQ(second.attempts, 2);
}

TEST_F(ReshapeTest, ErrorsInside200AreRetriedAndQuotaStopsAtOnce) {
  transport_->Push(Reply(200, R"({"error":{"message":"Upstream overloaded","code":502}})"));
  transport_->Push(Reply(200, OpenAiReply("ok", 1, 1)));
  transport_->Push(
      Reply(429, R"({"error":{"message":"You exceeded your current quota, please check your plan )"
                 R"(and billing details.","type":"insufficient_quota","code":"insufficient_quota"}})"));
  auto client = Client();
  const ChatResult retried = client->Complete(Request());
  ASSERT_TRUE(retried.ok()) << retried.error_message;
  EXPECT_EQ(retried.attempts, 2);
  const ChatResult quota = client->Complete(Request());
  EXPECT_EQ(quota.error, ErrorKind::kQuota);
  EXPECT_EQ(quota.attempts, 1);
  EXPECT_TRUE(IsConfigurationError(quota.error));
  EXPECT_NE(quota.error_message.find("exceeded your current quota"), std::string::npos);
  EXPECT_EQ(client->Errors().at("server").count, 1);
  EXPECT_EQ(clock_.Sleeps().size(), 1U);
}

TEST_F(ReshapeTest, CachedAndReasoningTokensAreCountedAndPriced) {
  config_.price_cached_input_per_mtok_usd = 0.125;
  transport_->Push(Reply(200, Json{{"choices", {{{"message", {{"content", "ok"}}}}}},
                                   {"usage",
                                    {{"prompt_tokens", 1000},
                                     {"completion_tokens", 500},
                                     {"prompt_tokens_details", {{"cached_tokens", 800}}},
                                     {"completion_tokens_details", {{"reasoning_tokens", 400}}}}}}
                                  .dump()));
  auto client = Client();
  const ChatResult result = client->Complete(Request());
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.usage.cached_input_tokens, 800);
  EXPECT_EQ(result.usage.reasoning_tokens, 400);
  EXPECT_DOUBLE_EQ(result.usage.cost_usd, (200 * 1.25 + 800 * 0.125 + 500 * 10.0) / 1e6);
  EXPECT_EQ(client->Spent().reasoning_tokens, 400);
}

TEST_F(ReshapeTest, EchoedKeysAreRedactedInErrorsAndTallies) {
  const Json echoed = {{"error", {{"message", std::string("The model `x` does not exist; key ") + kKey}}}};
  transport_->Push(Reply(404, echoed.dump()));
  auto client = Client();
  const ChatResult result = client->Complete(Request());
  EXPECT_EQ(result.error, ErrorKind::kNotFound);
  EXPECT_EQ(result.error_message.find(kKey), std::string::npos);
  EXPECT_EQ(client->Errors().at("not_found").last_message.find(kKey), std::string::npos);
}

}  // namespace
}  // namespace egg::llm
