#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "llm/llm.h"

namespace egg::llm {
namespace {

using Map = std::map<std::string, std::string>;

class LlmConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("egg-llm-config-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteFile(const std::string& text) {
    const std::string path = (dir_ / "egg.toml").string();
    std::ofstream(path) << text;
    return path;
  }
  // The ConfigError's message from loading, or "" when it loads.
  static std::string LoadError(const std::string& path, const Map& env, const Map& overrides = {}) {
    try {
      LoadLlmConfig(path, env, overrides);
    } catch (const EggError& error) {
      EXPECT_EQ(error.Kind(), egg::ErrorKind::kConfig);
      return error.what();
    }
    return "";
  }

  std::filesystem::path dir_;
};

constexpr const char* kFullFile = R"(
[llm]
provider = "openai"
base_url = "http://127.0.0.1:8000/v1"
model = "file-model"
api_key_env = "MY_LLM_KEY"
request_timeout_s = 300
max_retries = 4
max_concurrency = 4
price_input_per_mtok_usd = 1.25
price_output_per_mtok_usd = 10.0
[budget]
max_calls = 200
max_tokens = 2000000
max_cost_usd = 5.0
[other]
anything = "ignored"
)";

TEST_F(LlmConfigTest, DefaultsNeedOnlyAModel) {
  const LlmConfig config = LoadLlmConfig("", {{"EGG_LLM_MODEL", "gpt-x"}, {"OPENAI_API_KEY", "sk-1"}}, {});
  EXPECT_EQ(config.provider, Provider::kOpenAi);
  EXPECT_EQ(config.base_url, "https://api.openai.com/v1");
  EXPECT_EQ(config.model, "gpt-x");
  EXPECT_EQ(config.api_key, "sk-1");
  EXPECT_EQ(config.request_timeout_s, 300);
  EXPECT_EQ(config.max_retries, 4);
  EXPECT_FALSE(config.budget.max_calls.has_value());
  EXPECT_FALSE(config.budget.max_cost_usd.has_value());
}

TEST_F(LlmConfigTest, AnthropicDefaultsAndKey) {
  const LlmConfig config = LoadLlmConfig("", {{"OPENAI_API_KEY", "wrong"}, {"ANTHROPIC_API_KEY", "ant-1"}},
                                         {{"provider", "anthropic"}, {"model", "claude-x"}});
  EXPECT_EQ(config.provider, Provider::kAnthropic);
  EXPECT_EQ(config.base_url, "https://api.anthropic.com");
  EXPECT_EQ(config.api_key, "ant-1");
}

TEST_F(LlmConfigTest, ReadsEveryFileSetting) {
  const LlmConfig config = LoadLlmConfig(WriteFile(kFullFile), {{"MY_LLM_KEY", "k-file"}}, {});
  EXPECT_EQ(config.base_url, "http://127.0.0.1:8000/v1");
  EXPECT_EQ(config.model, "file-model");
  EXPECT_EQ(config.api_key, "k-file");
  EXPECT_EQ(config.max_concurrency, 4);
  EXPECT_DOUBLE_EQ(config.price_input_per_mtok_usd, 1.25);
  EXPECT_DOUBLE_EQ(config.price_output_per_mtok_usd, 10.0);
  EXPECT_EQ(config.budget.max_calls, 200);
  EXPECT_EQ(config.budget.max_tokens, 2000000);
  EXPECT_EQ(config.budget.max_cost_usd, 5.0);
}

TEST_F(LlmConfigTest, FileLosesToEnvironmentWhichLosesToOverrides) {
  const std::string path = WriteFile(kFullFile);
  const Map env = {{"EGG_LLM_MODEL", "env-model"},   {"EGG_LLM_BASE_URL", "https://env.example/v1"},
                   {"EGG_LLM_TIMEOUT", "60"},        {"EGG_LLM_MAX_CALLS", "50"},
                   {"EGG_LLM_MAX_TOKENS", "1000"},   {"EGG_LLM_MAX_COST_USD", "2.5"},
                   {"EGG_LLM_PROVIDER", "anthropic"}};
  const LlmConfig from_env = LoadLlmConfig(path, env, {});
  EXPECT_EQ(from_env.provider, Provider::kAnthropic);
  EXPECT_EQ(from_env.model, "env-model");
  EXPECT_EQ(from_env.base_url, "https://env.example/v1");
  EXPECT_EQ(from_env.request_timeout_s, 60);
  EXPECT_EQ(from_env.budget.max_calls, 50);
  EXPECT_EQ(from_env.budget.max_tokens, 1000);
  EXPECT_EQ(from_env.budget.max_cost_usd, 2.5);
  const LlmConfig overridden = LoadLlmConfig(
      path, env,
      {{"model", "flag-model"}, {"request_timeout_s", "7.5"}, {"max_calls", "3"}, {"base_url", ""}});
  EXPECT_EQ(overridden.model, "flag-model");
  EXPECT_EQ(overridden.request_timeout_s, 7.5);
  EXPECT_EQ(overridden.budget.max_calls, 3);
  EXPECT_EQ(overridden.base_url, "https://env.example/v1");  // an empty override is no override
  EXPECT_EQ(overridden.max_retries, 4);                      // still the file's
}

TEST_F(LlmConfigTest, RefusesAKeyInTheFile) {
  const std::string path = WriteFile("[llm]\nmodel = \"m\"\napi_key = \"sk-planted-in-file\"\n");
  const std::string error = LoadError(path, {});
  EXPECT_NE(error.find("[llm].api_key is refused"), std::string::npos) << error;
  EXPECT_EQ(error.find("sk-planted-in-file"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

TEST_F(LlmConfigTest, RefusesBadProviderAndValues) {
  EXPECT_NE(
      LoadError("", {{"EGG_LLM_MODEL", "m"}, {"EGG_LLM_PROVIDER", "gemini"}}).find("openai or anthropic"),
      std::string::npos);
  EXPECT_NE(LoadError("", {{"EGG_LLM_MODEL", "m"}, {"EGG_LLM_TIMEOUT", "soon"}}).find("EGG_LLM_TIMEOUT"),
            std::string::npos);
  EXPECT_NE(LoadError("", {{"EGG_LLM_MODEL", "m"}, {"EGG_LLM_MAX_CALLS", "0"}}).find("positive integer"),
            std::string::npos);
  EXPECT_NE(LoadError("", {{"EGG_LLM_MODEL", "m"}, {"EGG_LLM_MAX_CALLS", "2.5"}}).find("max_calls"),
            std::string::npos);
  EXPECT_NE(LoadError("", {{"EGG_LLM_MODEL", "m"}, {"EGG_LLM_MAX_COST_USD", "-1"}}).find("max_cost_usd"),
            std::string::npos);
  EXPECT_NE(LoadError("", {{"EGG_LLM_MODEL", "m"}, {"EGG_LLM_BASE_URL", "ftp://x"}}).find("http://"),
            std::string::npos);
  EXPECT_NE(LoadError(WriteFile("[llm]\nmodel = \"m\"\nmax_concurrency = 0\n"), {}).find("max_concurrency"),
            std::string::npos);
  EXPECT_NE(LoadError("", {{"EGG_LLM_MODEL", "m"}}, {{"top_p", "1"}}).find("unknown LLM setting"),
            std::string::npos);
}

TEST_F(LlmConfigTest, RefusesAMissingModel) {
  EXPECT_EQ(LoadError("", {{"OPENAI_API_KEY", "k"}}),
            "no LLM model: set EGG_LLM_MODEL, --model or [llm].model");
}

TEST_F(LlmConfigTest, RefusesMissingUnreadableOrUnknownFileContent) {
  EXPECT_NE(LoadError((dir_ / "absent.toml").string(), {{"EGG_LLM_MODEL", "m"}}).find("not found"),
            std::string::npos);
  const std::string syntax = LoadError(WriteFile("[llm\nmodel = 1\n"), {});
  EXPECT_NE(syntax.find("egg.toml:1:"), std::string::npos) << syntax;
  EXPECT_NE(LoadError(WriteFile("[llm]\nmodle = \"m\"\n"), {}).find("[llm].modle is not a known setting"),
            std::string::npos);
  EXPECT_NE(LoadError(WriteFile("[budget]\nmodel = \"m\"\n"), {}).find("not a known setting"),
            std::string::npos);
  EXPECT_NE(LoadError(WriteFile("llm = 3\n"), {}).find("must be a table"), std::string::npos);
  EXPECT_NE(LoadError(WriteFile("[llm]\nmodel = true\n"), {}).find("expected a string or a number"),
            std::string::npos);
}

TEST_F(LlmConfigTest, EmptyKeyIsAllowedForLocalServers) {
  const LlmConfig config =
      LoadLlmConfig("", {}, {{"model", "local"}, {"base_url", "http://127.0.0.1:8000/v1"}});
  EXPECT_EQ(config.api_key, "");
}

TEST_F(LlmConfigTest, ReadsRequestShapeSettingsAndPrices) {
  const std::string path = WriteFile(R"(
[llm]
model = "gpt-5.1"
api = "responses"
max_output_tokens = 4096
reasoning_effort = "high"
temperature = 0.7
price_cached_input_per_mtok_usd = 0.125
price_cache_write_per_mtok_usd = 1.5
)");
  const LlmConfig config = LoadLlmConfig(path, {}, {});
  EXPECT_EQ(config.api, Api::kResponses);
  EXPECT_EQ(config.max_output_tokens, 4096);
  EXPECT_EQ(config.reasoning_effort, "high");
  EXPECT_DOUBLE_EQ(config.temperature, 0.7);
  EXPECT_EQ(config.price_cached_input_per_mtok_usd, 0.125);
  EXPECT_EQ(config.price_cache_write_per_mtok_usd, 1.5);
  const LlmConfig overridden =
      LoadLlmConfig(path, {{"EGG_LLM_MAX_OUTPUT_TOKENS", "999"}}, {{"api", "chat_completions"}});
  EXPECT_EQ(overridden.max_output_tokens, 999);
  EXPECT_EQ(overridden.api, Api::kChatCompletions);
  const LlmConfig defaults = LoadLlmConfig("", {{"EGG_LLM_MODEL", "m"}}, {});
  EXPECT_EQ(defaults.api, Api::kChatCompletions);
  EXPECT_EQ(defaults.max_output_tokens, 0);
  EXPECT_FALSE(defaults.price_cached_input_per_mtok_usd.has_value());
}

TEST_F(LlmConfigTest, RefusesBadRequestShapeSettings) {
  const Map env = {{"EGG_LLM_MODEL", "m"}};
  EXPECT_NE(LoadError("", env, {{"api", "completions"}}).find("chat_completions or responses"),
            std::string::npos);
  EXPECT_NE(LoadError("", env, {{"reasoning_effort", "extreme"}}).find("reasoning_effort"),
            std::string::npos);
  EXPECT_NE(LoadError("", env, {{"max_output_tokens", "0"}}).find("positive integer"), std::string::npos);
  EXPECT_NE(LoadError("", env, {{"provider", "anthropic"}, {"api", "responses"}}).find("api"),
            std::string::npos);
}

}  // namespace
}  // namespace egg::llm
