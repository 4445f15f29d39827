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

// Dollars for `usage` at the config's prices per million tokens: uncached input at the input price, cache
// reads and writes at theirs (the input price when unset), output (reasoning included) at the output price.
double CostUsd(const Usage& usage, const LlmConfig& prices);

}  // namespace egg::llm
