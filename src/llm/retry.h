// When to retry an LLM request and how long to wait first: exponential backoff with full jitter, or the
// server's Retry-After when it gives one. Time comes from a Clock so tests never sleep.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "llm/llm.h"

namespace egg::llm {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point Now() = 0;
  virtual std::chrono::system_clock::time_point WallNow() = 0;  // for HTTP dates in Retry-After
  virtual void Sleep(double seconds) = 0;
};

// The real clock; shared, thread-safe.
Clock& SystemClock();

class RetryPolicy {
 public:
  RetryPolicy(int max_retries, double backoff_initial_s, double backoff_max_s)
      : max_retries_(max_retries), backoff_initial_s_(backoff_initial_s), backoff_max_s_(backoff_max_s) {}

  // Whether another attempt follows `attempts_made` attempts that ended in `kind`.
  bool ShouldRetry(ErrorKind kind, int attempts_made) const;
  // Seconds to wait after attempt number `attempts_made` (1-based). Without `retry_after_s`:
  // unit_random * min(backoff_max, backoff_initial * 2^(attempts_made-1)), unit_random in [0, 1].
  // With it: retry_after_s capped at backoff_max.
  double DelaySeconds(int attempts_made, std::optional<double> retry_after_s, double unit_random) const;

 private:
  int max_retries_;
  double backoff_initial_s_;
  double backoff_max_s_;
};

// Seconds to wait asked for by lower-cased response headers: retry-after-ms, or retry-after as seconds
// or an HTTP date (RFC 7231 IMF-fixdate). Nullopt when absent or unreadable; never negative.
std::optional<double> RetryAfterSeconds(const std::map<std::string, std::string>& headers,
                                        std::chrono::system_clock::time_point now);

}  // namespace egg::llm
