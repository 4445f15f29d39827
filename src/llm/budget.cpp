#include "llm/budget.h"

#include <fmt/format.h>

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
  spent_.output_tokens += usage.output_tokens;
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

double CostUsd(int64_t input_tokens, int64_t output_tokens, double price_input_per_mtok_usd,
               double price_output_per_mtok_usd) {
  return static_cast<double>(input_tokens) * price_input_per_mtok_usd / kTokensPerMillion +
         static_cast<double>(output_tokens) * price_output_per_mtok_usd / kTokensPerMillion;
}

}  // namespace egg::llm
