#include "llm/refusal.h"

#include <gtest/gtest.h>

namespace egg::llm {
namespace {

constexpr int kSentCap = 32768;

TEST(RefusalTest, ResponsesOnlyModelsAskForTheResponsesApi) {
  const char* body =
      R"({"error":{"message":"This model is only supported in v1/responses and not in v1/chat/completions.",)"
      R"("type":"invalid_request_error","param":"model","code":null}})";
  EXPECT_EQ(ReadRefusal(body, kSentCap, 100).reshape, Reshape::kUseResponsesApi);
}

TEST(RefusalTest, ReasoningModelRefusalsAskForTheirShape) {
  EXPECT_EQ(
      ReadRefusal(R"({"error":{"message":"Unsupported value: 'temperature' does not support 0.2 with this )"
                  R"(model. Only the default (1) value is supported.","param":"temperature"}})",
                  kSentCap, 100)
          .reshape,
      Reshape::kDropTemperature);
  EXPECT_EQ(ReadRefusal(R"({"type":"error","error":{"type":"invalid_request_error",)"
                        R"("message":"temperature is deprecated for this model."}})",
                        kSentCap, 100)
                .reshape,
            Reshape::kDropTemperature);
  EXPECT_EQ(
      ReadRefusal(R"({"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this )"
                  R"(model. Use 'max_completion_tokens' instead.","param":"max_tokens"}})",
                  kSentCap, 100)
          .reshape,
      Reshape::kUseMaxCompletionTokens);
}

TEST(RefusalTest, ContextLengthsFitTheCap) {
  const Refusal vllm = ReadRefusal(
      R"({"object":"error","message":"This model's maximum context length is 16384 tokens. However, you )"
      R"(requested 40000 tokens (7232 in the messages, 32768 in the completion). Please reduce the length.",)"
      R"("type":"BadRequestError","param":null,"code":400})",
      kSentCap, 100);
  EXPECT_EQ(vllm.reshape, Reshape::kFitOutputCap);
  EXPECT_EQ(vllm.context_tokens, 16384);
  EXPECT_EQ(vllm.output_cap, 16384 - 7232 - 16);
  const Refusal llama_cpp = ReadRefusal(
      R"({"error":{"code":400,"message":"the request exceeds the available context size, try increasing it",)"
      R"("type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":12288}})",
      kSentCap, 100);
  EXPECT_EQ(llama_cpp.context_tokens, 12288);
  EXPECT_EQ(llama_cpp.output_cap, 12288 - 5000 - 16);
  const Refusal no_count = ReadRefusal(
      R"({"message":"Requested token count exceeds the model's maximum context length of 16384 tokens."})",
      kSentCap, 3000);
  EXPECT_EQ(no_count.context_tokens, 16384);
  EXPECT_EQ(no_count.output_cap, CapWithinContext(16384, 3000));
  const Refusal anthropic = ReadRefusal(
      R"({"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 32000 > 8192, which is )"
      R"(the maximum allowed number of output tokens for claude-3-5-haiku-20241022"}})",
      kSentCap, 100);
  EXPECT_EQ(anthropic.max_output, 8192);
  EXPECT_EQ(anthropic.output_cap, 8192);
}

TEST(RefusalTest, NothingToChangeWhenTheCapWouldNotHelp) {
  EXPECT_EQ(
      ReadRefusal(R"({"error":{"message":"The model `gpt-nope` does not exist"}})", kSentCap, 100).reshape,
      Reshape::kNone);
  const char* too_long =
      R"({"message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens )"
      R"((8000 in the messages, 1000 in the completion)."})";
  EXPECT_EQ(ReadRefusal(too_long, 1000, 100).reshape, Reshape::kNone);
  EXPECT_EQ(CapWithinContext(4096, 40000), 0);
}

TEST(RefusalTest, QuotaAndBillingErrors) {
  EXPECT_TRUE(IsQuotaError(
      429, R"({"error":{"message":"You exceeded your current quota, please check your plan )"
           R"(and billing details.","type":"insufficient_quota","code":"insufficient_quota"}})"));
  EXPECT_TRUE(IsQuotaError(400, R"({"type":"error","error":{"type":"invalid_request_error","message":"Your )"
                                R"(credit balance is too low to access the Anthropic API."}})"));
  EXPECT_TRUE(IsQuotaError(402, "{}"));
  EXPECT_FALSE(
      IsQuotaError(429, R"({"error":{"message":"Rate limit reached for requests","type":"requests"}})"));
}

}  // namespace
}  // namespace egg::llm
