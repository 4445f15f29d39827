#include "llm/budget.h"

#include <fmt/format.h>

#include <algorithm>

namespace egg::llm {
namespace {

constexpr double kTokensPerMillion = 1e6;

}  // namespace

std::optional<std::string> BudgetTracker::Admit() {
  std::lock_guard lock(mutex_);
  if (auto refusal = RefusalLocked()) {
    return refusal;
  }
  ++calls_;
  return std::nullopt;
}

void BudgetTracker::AddUsage(const Usage& usage) {
  std::lock_guard lock(mutex_);
  spent_.input_tokens += usage.input_tokens;
  spent_.cached_input_tokens += usage.cached_input_tokens;
  spent_.cache_write_tokens += usage.cache_write_tokens;
  spent_.output_tokens += usage.output_tokens;
  spent_.reasoning_tokens += usage.reasoning_tokens;
  spent_.cost_usd += usage.cost_usd;
  spent_.latency_ms += usage.latency_ms;
}

Usage BudgetTracker::Spent() const {
  std::lock_guard lock(mutex_);
  return spent_;
}

int64_t BudgetTracker::Calls() const {
  std::lock_guard lock(mutex_);
  return calls_;
}

std::optional<std::string> BudgetTracker::RefusalLocked() const {
  if (limits_.max_calls && calls_ >= *limits_.max_calls) {
    return fmt::format("LLM budget exhausted: {} calls made, max_calls = {}", calls_, *limits_.max_calls);
  }
  const int64_t tokens = spent_.input_tokens + spent_.output_tokens;
  if (limits_.max_tokens && tokens >= *limits_.max_tokens) {
    return fmt::format("LLM budget exhausted: {} tokens used, max_tokens = {}", tokens, *limits_.max_tokens);
  }
  if (limits_.max_cost_usd && spent_.cost_usd >= *limits_.max_cost_usd) {
    return fmt::format("LLM budget exhausted: ${:.4f} spent, max_cost_usd = {}", spent_.cost_usd,
                       *limits_.max_cost_usd);
  }
  return std::nullopt;
}

double CostUsd(const Usage& usage, const LlmConfig& prices) {
  const double input_price = prices.price_input_per_mtok_usd;
  const double cached_price = prices.price_cached_input_per_mtok_usd.value_or(input_price);
  const double write_price = prices.price_cache_write_per_mtok_usd.value_or(input_price);
  const int64_t uncached =
      std::max<int64_t>(0, usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens);
  const double dollars_per_mtok = static_cast<double>(uncached) * input_price +
                                  static_cast<double>(usage.cached_input_tokens) * cached_price +
                                  static_cast<double>(usage.cache_write_tokens) * write_price +
                                  static_cast<double>(usage.output_tokens) * prices.price_output_per_mtok_usd;
  return dollars_per_mtok / kTokensPerMillion;
}

}  // namespace egg::llm
