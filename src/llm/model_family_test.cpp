#include "llm/model_family.h"

#include <gtest/gtest.h>

namespace egg::llm {
namespace {

TEST(ModelFamilyTest, OpenAiReasoningModelsTakeNoTemperatureAndAReasoningCap) {
  for (const char* model : {"gpt-5.1", "gpt-5", "gpt-5-mini", "gpt-5.1-codex-max", "o1", "o3-mini", "o4-mini",
                            "o4-mini-2025-04-16"}) {
    const ModelTraits traits = TraitsFor(Provider::kOpenAi, model);
    EXPECT_TRUE(traits.reasoning) << model;
    EXPECT_FALSE(traits.accepts_temperature) << model;
    EXPECT_EQ(traits.default_max_output_tokens, kReasoningMaxOutputTokens) << model;
  }
}

TEST(ModelFamilyTest, ClassicAndRoutedModelsKeepTheClassicShape) {
  for (const char* model : {"gpt-4o", "gpt-4.1-mini", "qwen2.5-coder:32b", "Qwen/QwQ-32B", "openai/gpt-5.1",
                            "omni-model", "o", "deepseek-reasoner"}) {
    const ModelTraits traits = TraitsFor(Provider::kOpenAi, model);
    EXPECT_FALSE(traits.reasoning) << model;
    EXPECT_TRUE(traits.accepts_temperature) << model;
    EXPECT_EQ(traits.default_max_output_tokens, kClassicMaxOutputTokens) << model;
  }
}

TEST(ModelFamilyTest, ClaudeOpusFromFourSevenRefusesTemperature) {
  for (const char* model : {"claude-opus-4-7", "claude-opus-4-7-20260301", "claude-opus-4-8", "claude-opus-5",
                            "claude-sonnet-5-1"}) {
    EXPECT_FALSE(TraitsFor(Provider::kAnthropic, model).accepts_temperature) << model;
  }
  for (const char* model :
       {"claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "claude-opus-4-1", "claude-opus-4-5",
        "claude-opus-4-20250514", "claude-3-7-sonnet-latest", "claude-haiku-4-5"}) {
    const ModelTraits traits = TraitsFor(Provider::kAnthropic, model);
    EXPECT_TRUE(traits.accepts_temperature) << model;
    EXPECT_FALSE(traits.reasoning) << model;
    EXPECT_EQ(traits.default_max_output_tokens, kAnthropicMaxOutputTokens) << model;
  }
}

}  // namespace
}  // namespace egg::llm
