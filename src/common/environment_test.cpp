#include "common/environment.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace egg {
namespace {

bool Contains(const std::vector<std::string>& entries, const std::string& prefix) {
  return std::any_of(entries.begin(), entries.end(),
                     [&](const std::string& entry) { return entry.rfind(prefix, 0) == 0; });
}

TEST(EnvironmentTest, WorkerEnvironmentDropsSecretsAndUnknownVariables) {
  const EnvMap parent = {{"PATH", "/usr/bin"},
                         {"OPENAI_API_KEY", "sk-test-1234567890"},
                         {"ANTHROPIC_API_KEY", "anthropic-secret-value"},
                         {"TRITON_CACHE_DIR", "/tmp/triton"},
                         {"TRITON_AUTH_TOKEN", "x"},
                         {"HTTP_PROXY", "http://proxy"},
                         {"CUDA_HOME", "/usr/local/cuda"},
                         {"LC_ALL", "C"},
                         {"TORCH_LOGS", "prefix-sk-test-1234567890-suffix"}};
  const auto env = WorkerEnvironment(parent, {{"PYTHONPATH", "/repo/python"}});
  EXPECT_TRUE(Contains(env, "PATH=/usr/bin"));
  EXPECT_TRUE(Contains(env, "TRITON_CACHE_DIR=/tmp/triton"));
  EXPECT_TRUE(Contains(env, "CUDA_HOME="));
  EXPECT_TRUE(Contains(env, "LC_ALL=C"));
  EXPECT_TRUE(Contains(env, "PYTHONPATH=/repo/python"));
  EXPECT_FALSE(Contains(env, "OPENAI_API_KEY"));
  EXPECT_FALSE(Contains(env, "ANTHROPIC_API_KEY"));
  EXPECT_FALSE(Contains(env, "TRITON_AUTH_TOKEN"));
  EXPECT_FALSE(Contains(env, "HTTP_PROXY"));
  EXPECT_FALSE(Contains(env, "TORCH_LOGS")) << "a variable carrying a secret's value must be dropped";
  for (const auto& entry : env) {
    EXPECT_EQ(entry.find("sk-test"), std::string::npos) << entry;
  }
}

TEST(EnvironmentTest, ExtraWinsOverParent) {
  const auto env = WorkerEnvironment({{"CUDA_VISIBLE_DEVICES", "0,1"}}, {{"CUDA_VISIBLE_DEVICES", "1"}});
  ASSERT_EQ(env.size(), 1U);
  EXPECT_EQ(env[0], "CUDA_VISIBLE_DEVICES=1");
}

TEST(EnvironmentTest, SecretNames) {
  EXPECT_TRUE(IsSecretName("OPENAI_API_KEY"));
  EXPECT_TRUE(IsSecretName("hf_token"));
  EXPECT_TRUE(IsSecretName("DB_PASSWORD"));
  EXPECT_FALSE(IsSecretName("PATH"));
  EXPECT_FALSE(IsSecretName("TRITON_CACHE_DIR"));
}

TEST(EnvironmentTest, HomeAndPythonResolution) {
  EXPECT_EQ(EggHome({{"EGG_HOME", "/data/egg"}}), "/data/egg");
  EXPECT_EQ(EggHome({{"HOME", "/home/u"}}), "/home/u/.cache/egg");
  EXPECT_EQ(WorkerPython({{"EGG_PYTHON", "/opt/py"}}, ""), "/opt/py");
  EXPECT_EQ(WorkerPython({{"EGG_PYTHON", "/opt/py"}}, "/flag/py"), "/flag/py");
  EXPECT_EQ(WorkerPython({{"EGG_ROOT", "/nonexistent"}}, ""), "python3");
}

}  // namespace
}  // namespace egg
