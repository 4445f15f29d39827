// LoadLlmConfig: defaults < TOML file ([llm], [budget]) < environment < overrides, validated.
#define TOML_HEADER_ONLY 1
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string_view>

#include "common/environment.h"
#include "common/error.h"
#include "llm/llm.h"

namespace egg::llm {
namespace {

constexpr const char* kDefaultOpenAiUrl = "https://api.openai.com/v1";
constexpr const char* kDefaultAnthropicUrl = "https://api.anthropic.com";
constexpr size_t kMaxShownValueChars = 80;

enum class ValueType { kString, kInteger, kNumber };

struct SettingSpec {
  std::string_view key;
  std::string_view table;
  ValueType type;
  std::string_view env;  // the environment variable that overrides the file, if any
};

constexpr std::array<std::string_view, 6> kReasoningEfforts = {"none",   "minimal", "low",
                                                               "medium", "high",    "xhigh"};
constexpr int kMaxOutputTokensLimit = 1 << 20;

constexpr std::array<SettingSpec, 20> kSettings = {{
    {"provider", "llm", ValueType::kString, "EGG_LLM_PROVIDER"},
    {"base_url", "llm", ValueType::kString, "EGG_LLM_BASE_URL"},
    {"model", "llm", ValueType::kString, "EGG_LLM_MODEL"},
    {"api", "llm", ValueType::kString, "EGG_LLM_API"},
    {"max_output_tokens", "llm", ValueType::kInteger, "EGG_LLM_MAX_OUTPUT_TOKENS"},
    {"reasoning_effort", "llm", ValueType::kString, "EGG_LLM_REASONING_EFFORT"},
    {"temperature", "llm", ValueType::kNumber, ""},
    {"api_key_env", "llm", ValueType::kString, ""},
    {"request_timeout_s", "llm", ValueType::kNumber, "EGG_LLM_TIMEOUT"},
    {"max_retries", "llm", ValueType::kInteger, ""},
    {"backoff_initial_s", "llm", ValueType::kNumber, ""},
    {"backoff_max_s", "llm", ValueType::kNumber, ""},
    {"max_concurrency", "llm", ValueType::kInteger, ""},
    {"price_input_per_mtok_usd", "llm", ValueType::kNumber, ""},
    {"price_output_per_mtok_usd", "llm", ValueType::kNumber, ""},
    {"price_cached_input_per_mtok_usd", "llm", ValueType::kNumber, ""},
    {"price_cache_write_per_mtok_usd", "llm", ValueType::kNumber, ""},
    {"max_calls", "budget", ValueType::kInteger, "EGG_LLM_MAX_CALLS"},
    {"max_tokens", "budget", ValueType::kInteger, "EGG_LLM_MAX_TOKENS"},
    {"max_cost_usd", "budget", ValueType::kNumber, "EGG_LLM_MAX_COST_USD"},
}};

struct Setting {
  std::string value;
  std::string source;  // where it came from, for error messages
};
using Settings = std::map<std::string, Setting, std::less<>>;

enum class Bound { kPositive, kNonNegative };

const SettingSpec* FindSpec(std::string_view key) {
  for (const SettingSpec& spec : kSettings) {
    if (spec.key == key) {
      return &spec;
    }
  }
  return nullptr;
}

std::string NumberText(double value) {
  std::array<char, std::numeric_limits<double>::max_digits10 + 16> buffer{};
  const auto [end, error] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return error == std::errc() ? std::string(buffer.data(), end) : std::to_string(value);
}

std::string TomlValueText(const toml::node& node, const std::string& source) {
  if (auto text = node.value_exact<std::string>()) {
    return *text;
  }
  if (auto integer = node.value_exact<int64_t>()) {
    return std::to_string(*integer);
  }
  if (auto number = node.value_exact<double>()) {
    return NumberText(*number);
  }
  throw ConfigError(source + ": expected a string or a number");
}

void ReadTable(const toml::table& root, std::string_view name, const std::string& path, Settings* settings) {
  const toml::node* node = root.get(name);
  if (node == nullptr) {
    return;
  }
  const toml::table* table = node->as_table();
  if (table == nullptr) {
    throw ConfigError(path + ": [" + std::string(name) + "] must be a table");
  }
  for (const auto& [key, value] : *table) {
    const std::string source = path + ": [" + std::string(name) + "]." + std::string(key.str());
    if (key.str() == "api_key") {
      throw ConfigError(source +
                        " is refused: keep API keys out of files; put the key in the environment "
                        "variable named by [llm].api_key_env");
    }
    const SettingSpec* spec = FindSpec(key.str());
    if (spec == nullptr || spec->table != name) {
      throw ConfigError(source + " is not a known setting");
    }
    (*settings)[std::string(key.str())] = {TomlValueText(value, source), source};
  }
}

void ReadFile(const std::string& path, Settings* settings) {
  if (path.empty()) {
    return;
  }
  std::error_code ignored;
  if (!std::filesystem::is_regular_file(path, ignored)) {
    throw ConfigError("LLM config file not found: " + path);
  }
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& error) {
    throw ConfigError(path + ":" + std::to_string(error.source().begin.line) + ":" +
                      std::to_string(error.source().begin.column) + ": " + std::string(error.description()));
  }
  ReadTable(root, "llm", path, settings);
  ReadTable(root, "budget", path, settings);
}

void ReadEnvironment(const EnvMap& env, Settings* settings) {
  for (const SettingSpec& spec : kSettings) {
    if (spec.env.empty()) {
      continue;
    }
    if (auto value = LookupEnv(env, std::string(spec.env))) {
      (*settings)[std::string(spec.key)] = {*value, "$" + std::string(spec.env)};
    }
  }
}

void ReadOverrides(const std::map<std::string, std::string>& overrides, Settings* settings) {
  for (const auto& [key, value] : overrides) {
    if (FindSpec(key) == nullptr) {
      throw ConfigError("unknown LLM setting '" + key + "'");
    }
    if (!value.empty()) {
      (*settings)[key] = {value, "override " + key};
    }
  }
}

[[noreturn]] void ThrowBadValue(const std::string& key, const Setting& setting, const std::string& expected) {
  std::string shown = setting.value.substr(0, kMaxShownValueChars);
  throw ConfigError("bad LLM setting " + key + " = '" + shown + "' (from " + setting.source + "): expected " +
                    expected);
}

std::string String(const Settings& settings, const std::string& key, const std::string& fallback) {
  auto found = settings.find(key);
  return found == settings.end() || found->second.value.empty() ? fallback : found->second.value;
}

template <typename T>
std::optional<T> Parsed(const Settings& settings, const std::string& key, Bound bound) {
  auto found = settings.find(key);
  if (found == settings.end()) {
    return std::nullopt;
  }
  const std::string& text = found->second.value;
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool positive_ok = bound == Bound::kPositive ? value > 0 : value >= 0;
  if (error != std::errc() || end != text.data() + text.size() ||
      !std::isfinite(static_cast<double>(value)) || !positive_ok) {
    const std::string sign = bound == Bound::kPositive ? "a positive " : "a non-negative ";
    ThrowBadValue(key, found->second, sign + (std::is_integral_v<T> ? "integer" : "number"));
  }
  return value;
}

int SmallInt(const Settings& settings, const std::string& key, Bound bound, int fallback) {
  const auto value = Parsed<int64_t>(settings, key, bound);
  if (value && *value > std::numeric_limits<int>::max()) {
    ThrowBadValue(key, settings.find(key)->second, "an integer below 2^31");
  }
  return value ? static_cast<int>(*value) : fallback;
}

Provider ParseProvider(const Settings& settings) {
  const std::string name = String(settings, "provider", "openai");
  if (name == "openai") {
    return Provider::kOpenAi;
  }
  if (name == "anthropic") {
    return Provider::kAnthropic;
  }
  ThrowBadValue("provider", settings.find("provider")->second, "openai or anthropic");
}

Api ParseApi(const Settings& settings) {
  const std::string name = String(settings, "api", "chat_completions");
  if (name == "chat_completions") {
    return Api::kChatCompletions;
  }
  if (name == "responses") {
    return Api::kResponses;
  }
  ThrowBadValue("api", settings.find("api")->second, "chat_completions or responses");
}

std::string ParseReasoningEffort(const Settings& settings) {
  const std::string effort = String(settings, "reasoning_effort", "");
  if (!effort.empty() &&
      std::find(kReasoningEfforts.begin(), kReasoningEfforts.end(), effort) == kReasoningEfforts.end()) {
    ThrowBadValue("reasoning_effort", settings.find("reasoning_effort")->second,
                  "none, minimal, low, medium, high or xhigh");
  }
  return effort;
}

void ReadRequestShape(const Settings& settings, LlmConfig* config) {
  config->api = ParseApi(settings);
  if (config->api == Api::kResponses && config->provider != Provider::kOpenAi) {
    ThrowBadValue("api", settings.find("api")->second, "chat_completions with provider anthropic");
  }
  config->max_output_tokens = SmallInt(settings, "max_output_tokens", Bound::kPositive, 0);
  if (config->max_output_tokens > kMaxOutputTokensLimit) {
    ThrowBadValue("max_output_tokens", settings.find("max_output_tokens")->second, "at most 1048576");
  }
  config->reasoning_effort = ParseReasoningEffort(settings);
  config->temperature =
      Parsed<double>(settings, "temperature", Bound::kNonNegative).value_or(config->temperature);
}

void ReadConnection(const Settings& settings, const EnvMap& env, LlmConfig* config) {
  config->provider = ParseProvider(settings);
  const bool anthropic = config->provider == Provider::kAnthropic;
  config->base_url = String(settings, "base_url", anthropic ? kDefaultAnthropicUrl : kDefaultOpenAiUrl);
  if (config->base_url.rfind("http://", 0) != 0 && config->base_url.rfind("https://", 0) != 0) {
    ThrowBadValue("base_url", settings.find("base_url")->second, "a URL starting with http:// or https://");
  }
  config->model = String(settings, "model", "");
  if (config->model.empty()) {
    throw ConfigError("no LLM model: set EGG_LLM_MODEL, --model or [llm].model");
  }
  const std::string key_env =
      String(settings, "api_key_env", anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
  config->api_key = LookupEnv(env, key_env).value_or("");
}

void ReadLimits(const Settings& settings, LlmConfig* config) {
  config->request_timeout_s =
      Parsed<double>(settings, "request_timeout_s", Bound::kPositive).value_or(config->request_timeout_s);
  config->max_retries = SmallInt(settings, "max_retries", Bound::kNonNegative, config->max_retries);
  config->backoff_initial_s =
      Parsed<double>(settings, "backoff_initial_s", Bound::kPositive).value_or(config->backoff_initial_s);
  config->backoff_max_s =
      Parsed<double>(settings, "backoff_max_s", Bound::kPositive).value_or(config->backoff_max_s);
  config->max_concurrency = SmallInt(settings, "max_concurrency", Bound::kPositive, config->max_concurrency);
  config->price_input_per_mtok_usd = Parsed<double>(settings, "price_input_per_mtok_usd", Bound::kNonNegative)
                                         .value_or(config->price_input_per_mtok_usd);
  config->price_output_per_mtok_usd =
      Parsed<double>(settings, "price_output_per_mtok_usd", Bound::kNonNegative)
          .value_or(config->price_output_per_mtok_usd);
  config->price_cached_input_per_mtok_usd =
      Parsed<double>(settings, "price_cached_input_per_mtok_usd", Bound::kNonNegative);
  config->price_cache_write_per_mtok_usd =
      Parsed<double>(settings, "price_cache_write_per_mtok_usd", Bound::kNonNegative);
  config->budget.max_calls = Parsed<int64_t>(settings, "max_calls", Bound::kPositive);
  config->budget.max_tokens = Parsed<int64_t>(settings, "max_tokens", Bound::kPositive);
  config->budget.max_cost_usd = Parsed<double>(settings, "max_cost_usd", Bound::kPositive);
}

}  // namespace

LlmConfig LoadLlmConfig(const std::string& config_path, const std::map<std::string, std::string>& env,
                        const std::map<std::string, std::string>& overrides) {
  Settings settings;
  ReadFile(config_path, &settings);
  ReadEnvironment(env, &settings);
  ReadOverrides(overrides, &settings);
  LlmConfig config;
  ReadConnection(settings, env, &config);
  ReadRequestShape(settings, &config);
  ReadLimits(settings, &config);
  return config;
}

}  // namespace egg::llm
