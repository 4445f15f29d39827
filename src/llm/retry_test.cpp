#include "llm/retry.h"

#include <gtest/gtest.h>

#include "llm/client.h"
#include "llm/test_fakes.h"

namespace egg::llm {
namespace {

using testing::FakeClock;
using testing::FakeTransport;
using testing::Reply;
using testing::TransportFailure;

constexpr const char* kOkBody =
    R"({"choices":[{"message":{"content":"done"}}],"usage":{"prompt_tokens":3,"completion_tokens":2}})";

TEST(RetryPolicyTest, RetriesOnlyTransientKindsWithinTheLimit) {
  const RetryPolicy policy(2, 1.0, 60.0);
  for (ErrorKind kind :
       {ErrorKind::kRateLimited, ErrorKind::kServer, ErrorKind::kTimeout, ErrorKind::kNetwork}) {
    EXPECT_TRUE(policy.ShouldRetry(kind, 1)) << ErrorKindName(kind);
    EXPECT_TRUE(policy.ShouldRetry(kind, 2)) << ErrorKindName(kind);
    EXPECT_FALSE(policy.ShouldRetry(kind, 3)) << ErrorKindName(kind);
  }
  for (ErrorKind kind : {ErrorKind::kNone, ErrorKind::kAuth, ErrorKind::kBadRequest, ErrorKind::kMalformed,
                         ErrorKind::kBudgetExhausted}) {
    EXPECT_FALSE(policy.ShouldRetry(kind, 1)) << ErrorKindName(kind);
  }
}

TEST(RetryPolicyTest, BackoffDoublesUpToTheCapWithFullJitter) {
  const RetryPolicy policy(10, 1.5, 10.0);
  EXPECT_DOUBLE_EQ(policy.DelaySeconds(1, std::nullopt, 1.0), 1.5);
  EXPECT_DOUBLE_EQ(policy.DelaySeconds(2, std::nullopt, 1.0), 3.0);
  EXPECT_DOUBLE_EQ(policy.DelaySeconds(3, std::nullopt, 1.0), 6.0);
  EXPECT_DOUBLE_EQ(policy.DelaySeconds(4, std::nullopt, 1.0), 10.0);
  EXPECT_DOUBLE_EQ(policy.DelaySeconds(400, std::nullopt, 1.0), 10.0);
  EXPECT_DOUBLE_EQ(policy.DelaySeconds(3, std::nullopt, 0.25), 1.5);
  EXPECT_DOUBLE_EQ(policy.DelaySeconds(3, std::nullopt, 0.0), 0.0);
}

TEST(RetryPolicyTest, RetryAfterWinsButIsCapped) {
  const RetryPolicy policy(10, 1.0, 10.0);
  EXPECT_DOUBLE_EQ(policy.DelaySeconds(1, 7.0, 0.0), 7.0);
  EXPECT_DOUBLE_EQ(policy.DelaySeconds(1, 700.0, 0.0), 10.0);
}

TEST(RetryPolicyTest, ReadsRetryAfterHeaders) {
  const auto now = std::chrono::system_clock::time_point(FakeClock::kWallEpoch);
  EXPECT_EQ(RetryAfterSeconds({{"retry-after", "5"}}, now), 5.0);
  EXPECT_EQ(RetryAfterSeconds({{"retry-after", "1.5"}}, now), 1.5);
  EXPECT_EQ(RetryAfterSeconds({{"retry-after-ms", "250"}, {"retry-after", "9"}}, now), 0.25);
  // FakeClock's wall epoch is Wed, 01 Jan 2025 00:00:00 GMT.
  EXPECT_EQ(RetryAfterSeconds({{"retry-after", "Wed, 01 Jan 2025 00:00:30 GMT"}}, now), 30.0);
  EXPECT_EQ(RetryAfterSeconds({{"retry-after", "Tue, 31 Dec 2024 23:59:00 GMT"}}, now), 0.0);
  EXPECT_EQ(RetryAfterSeconds({{"retry-after", "soon"}}, now), std::nullopt);
  EXPECT_EQ(RetryAfterSeconds({{"retry-after", "Wed, 01 Foo 2025 00:00:30 GMT"}}, now), std::nullopt);
  EXPECT_EQ(RetryAfterSeconds({}, now), std::nullopt);
}

class RetryTest : public ::testing::Test {
 protected:
  RetryTest() {
    config_.base_url = "http://127.0.0.1:1/v1";
    config_.model = "m";
    config_.max_retries = 3;
    config_.backoff_initial_s = 1.0;
    config_.backoff_max_s = 20.0;
    config_.request_timeout_s = 42;
  }
  ChatResult Complete() {
    auto client = MakeLlmClient(config_, nullptr, transport_, clock_);
    return client->Complete(ChatRequest{{{"user", "hi"}}, "retry-test", {}});
  }

  LlmConfig config_;
  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  FakeClock clock_;
};

TEST_F(RetryTest, HonoursRetryAfterOn429) {
  transport_->Push(Reply(429, R"({"error":{"message":"slow down"}})", {{"retry-after", "7"}}));
  transport_->Push(Reply(200, kOkBody));
  const ChatResult result = Complete();
  ASSERT_TRUE(result.ok()) << result.error_message;
  EXPECT_EQ(result.text, "done");
  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(result.error_message, "");
  EXPECT_EQ(clock_.Sleeps(), std::vector<double>{7.0});
  EXPECT_EQ(transport_->Requests().size(), 2U);
  EXPECT_EQ(transport_->Timeouts(), (std::vector<double>{42, 42}));
}

TEST_F(RetryTest, HonoursRetryAfterAsHttpDateCapped) {
  transport_->Push(Reply(429, "{}", {{"retry-after", "Wed, 01 Jan 2025 00:00:12 GMT"}}));
  transport_->Push(Reply(503, "{}", {{"retry-after", "Wed, 01 Jan 2025 01:00:00 GMT"}}));
  transport_->Push(Reply(200, kOkBody));
  const ChatResult result = Complete();
  ASSERT_TRUE(result.ok()) << result.error_message;
  EXPECT_EQ(clock_.Sleeps(), (std::vector<double>{12.0, 20.0}));
}

TEST_F(RetryTest, ServerErrorTwiceThenSuccess) {
  transport_->Push(Reply(503, "overloaded"));
  transport_->Push(Reply(502, "bad gateway"));
  transport_->Push(Reply(200, kOkBody));
  const ChatResult result = Complete();
  ASSERT_TRUE(result.ok()) << result.error_message;
  EXPECT_EQ(result.attempts, 3);
  const std::vector<double> sleeps = clock_.Sleeps();
  ASSERT_EQ(sleeps.size(), 2U);
  EXPECT_GE(sleeps[0], 0.0);
  EXPECT_LE(sleeps[0], 1.0);
  EXPECT_GE(sleeps[1], 0.0);
  EXPECT_LE(sleeps[1], 2.0);
  EXPECT_EQ(result.usage.input_tokens, 3);
  EXPECT_EQ(result.usage.output_tokens, 2);
}

TEST_F(RetryTest, TimeoutThenSuccess) {
  transport_->Push(TransportFailure(TransportError::kTimeout, "POST url: Operation timed out"));
  transport_->Push(TransportFailure(TransportError::kNetwork, "POST url: Connection refused"));
  transport_->Push(Reply(200, kOkBody));
  const ChatResult result = Complete();
  ASSERT_TRUE(result.ok()) << result.error_message;
  EXPECT_EQ(result.attempts, 3);
  EXPECT_EQ(clock_.Sleeps().size(), 2U);
}

TEST_F(RetryTest, ExhaustedRetriesReportTheLastError) {
  transport_->SetDefault(Reply(503, R"({"error":{"message":"busy"}})"));
  const ChatResult result = Complete();
  EXPECT_EQ(result.error, ErrorKind::kServer);
  EXPECT_EQ(result.attempts, config_.max_retries + 1);
  EXPECT_EQ(transport_->Requests().size(), static_cast<size_t>(config_.max_retries + 1));
  EXPECT_EQ(clock_.Sleeps().size(), static_cast<size_t>(config_.max_retries));
  EXPECT_EQ(result.error_message,
            "HTTP 503 from http://127.0.0.1:1/v1/chat/completions: busy (after 4 attempts)");
  EXPECT_EQ(result.text, "");
}

TEST_F(RetryTest, ExhaustedTimeoutsReportTimeout) {
  config_.max_retries = 1;
  transport_->SetDefault(TransportFailure(TransportError::kTimeout, "POST url: timed out"));
  const ChatResult result = Complete();
  EXPECT_EQ(result.error, ErrorKind::kTimeout);
  EXPECT_EQ(result.attempts, 2);
}

TEST_F(RetryTest, AuthIsNotRetried) {
  transport_->Push(Reply(401, R"({"error":{"message":"Incorrect API key provided"}})"));
  const ChatResult result = Complete();
  EXPECT_EQ(result.error, ErrorKind::kAuth);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_EQ(transport_->Requests().size(), 1U);
  EXPECT_TRUE(clock_.Sleeps().empty());
  EXPECT_NE(result.error_message.find("Incorrect API key provided"), std::string::npos);
}

TEST_F(RetryTest, BadRequestAndMalformedAreNotRetried) {
  transport_->Push(Reply(400, R"({"error":{"message":"max_tokens too large"}})"));
  EXPECT_EQ(Complete().error, ErrorKind::kBadRequest);
  transport_->Push(Reply(403, "{}"));
  EXPECT_EQ(Complete().error, ErrorKind::kAuth);
  transport_->Push(Reply(200, R"({"unexpected":true})"));
  const ChatResult malformed = Complete();
  EXPECT_EQ(malformed.error, ErrorKind::kMalformed);
  EXPECT_EQ(malformed.attempts, 1);
  EXPECT_EQ(transport_->Requests().size(), 3U);
  EXPECT_TRUE(clock_.Sleeps().empty());
}

TEST_F(RetryTest, ZeroRetriesMeansOneAttempt) {
  config_.max_retries = 0;
  transport_->SetDefault(Reply(429, "{}"));
  const ChatResult result = Complete();
  EXPECT_EQ(result.error, ErrorKind::kRateLimited);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_TRUE(clock_.Sleeps().empty());
}

}  // namespace
}  // namespace egg::llm
