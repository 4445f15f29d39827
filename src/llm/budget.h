// A task's LLM budget: calls, tokens and dollars spent so far against optional limits. Thread-safe.
// A call is admitted (and counted) before its request is sent; its usage is added when it ends.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "llm/llm.h"

namespace egg::llm {

class BudgetTracker {
 public:
  explicit BudgetTracker(Budget limits) : limits_(limits) {}

  // Counts one call when none of the limits is reached yet; otherwise returns why not (one line).
  std::optional<std::string> Admit();
  void AddUsage(const Usage& usage);
  Usage Spent() const;
  int64_t Calls() const;

 private:
  std::optional<std::string> RefusalLocked() const;

  Budget limits_;
  mutable std::mutex mutex_;
  Usage spent_;
  int64_t calls_ = 0;
};

// input_tokens * price_input / 1e6 + output_tokens * price_output / 1e6.
double CostUsd(int64_t input_tokens, int64_t output_tokens, double price_input_per_mtok_usd,
               double price_output_per_mtok_usd);

}  // namespace egg::llm
