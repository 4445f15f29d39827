#include "llm/retry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <string_view>
#include <thread>

namespace egg::llm {
namespace {

constexpr double kMillisecondsPerSecond = 1000.0;
constexpr int kMaxDoublings = 62;
constexpr int kTmBaseYear = 1900;

class RealClock : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point WallNow() override { return std::chrono::system_clock::now(); }
  void Sleep(double seconds) override {
    if (seconds > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    }
  }
};

std::optional<double> ParseNumber(const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end || !std::isfinite(value)) {
    return std::nullopt;
  }
  return std::max(0.0, value);
}

// "Sun, 06 Nov 1994 08:49:37 GMT", parsed without the C locale's help.
std::optional<std::chrono::system_clock::time_point> ParseHttpDate(const std::string& text) {
  static constexpr std::string_view kMonths = "JanFebMarAprMayJunJulAugSepOctNovDec";
  char month[4] = {};
  std::tm fields{};
  if (std::sscanf(text.c_str(), "%*3s, %2d %3s %4d %2d:%2d:%2d GMT", &fields.tm_mday, month, &fields.tm_year,
                  &fields.tm_hour, &fields.tm_min, &fields.tm_sec) != 6) {
    return std::nullopt;
  }
  const auto position = kMonths.find(month);
  if (position == std::string_view::npos || position % 3 != 0) {
    return std::nullopt;
  }
  fields.tm_mon = static_cast<int>(position / 3);
  fields.tm_year -= kTmBaseYear;
  const std::time_t seconds = timegm(&fields);
  if (seconds == -1) {
    return std::nullopt;
  }
  return std::chrono::system_clock::from_time_t(seconds);
}

}  // namespace

Clock& SystemClock() {
  static RealClock clock;
  return clock;
}

bool RetryPolicy::ShouldRetry(ErrorKind kind, int attempts_made) const {
  return IsRetryable(kind) && attempts_made <= max_retries_;
}

double RetryPolicy::DelaySeconds(int attempts_made, std::optional<double> retry_after_s,
                                 double unit_random) const {
  if (retry_after_s) {
    return std::min(*retry_after_s, backoff_max_s_);
  }
  const int doublings = std::clamp(attempts_made - 1, 0, kMaxDoublings);
  const double ceiling = std::min(backoff_max_s_, std::ldexp(backoff_initial_s_, doublings));
  return std::clamp(unit_random, 0.0, 1.0) * ceiling;
}

std::optional<double> RetryAfterSeconds(const std::map<std::string, std::string>& headers,
                                        std::chrono::system_clock::time_point now) {
  if (auto ms = headers.find("retry-after-ms"); ms != headers.end()) {
    if (auto value = ParseNumber(ms->second)) {
      return *value / kMillisecondsPerSecond;
    }
  }
  auto found = headers.find("retry-after");
  if (found == headers.end()) {
    return std::nullopt;
  }
  if (auto seconds = ParseNumber(found->second)) {
    return seconds;
  }
  if (auto date = ParseHttpDate(found->second)) {
    return std::max(0.0, std::chrono::duration<double>(*date - now).count());
  }
  return std::nullopt;
}

}  // namespace egg::llm
