// Test doubles for the LLM room: a scripted HttpTransport that records what it was sent, and a Clock that
// records sleeps instead of sleeping. Header-only, used by the *_test.cpp files only.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "llm/http_transport.h"
#include "llm/retry.h"

namespace egg::llm::testing {

inline HttpResponse Reply(long status, std::string body, std::map<std::string, std::string> headers = {}) {
  return {TransportError::kNone, {}, status, std::move(headers), std::move(body)};
}

inline HttpResponse TransportFailure(TransportError error, std::string message) {
  return {error, std::move(message), 0, {}, {}};
}

class FakeTransport : public HttpTransport {
 public:
  explicit FakeTransport(std::chrono::milliseconds hold = std::chrono::milliseconds(0)) : hold_(hold) {}

  void Push(HttpResponse response) {
    std::lock_guard lock(mutex_);
    script_.push_back(std::move(response));
  }
  // When the script runs out, every further request gets this.
  void SetDefault(HttpResponse response) {
    std::lock_guard lock(mutex_);
    default_ = std::move(response);
  }

  HttpResponse Post(const HttpRequest& request, double timeout_s) override {
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(request);
      timeouts_s_.push_back(timeout_s);
      max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
    }
    std::this_thread::sleep_for(hold_);
    std::lock_guard lock(mutex_);
    --in_flight_;
    if (script_.empty()) {
      return default_;
    }
    HttpResponse response = std::move(script_.front());
    script_.pop_front();
    return response;
  }

  std::vector<HttpRequest> Requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  std::vector<double> Timeouts() const {
    std::lock_guard lock(mutex_);
    return timeouts_s_;
  }
  int MaxInFlight() const {
    std::lock_guard lock(mutex_);
    return max_in_flight_;
  }

 private:
  const std::chrono::milliseconds hold_;
  mutable std::mutex mutex_;
  std::deque<HttpResponse> script_;
  HttpResponse default_ = Reply(500, R"({"error":{"message":"script exhausted"}})");
  std::vector<HttpRequest> requests_;
  std::vector<double> timeouts_s_;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
};

class FakeClock : public Clock {
 public:
  // A fixed wall time: 2025-01-01T00:00:00Z.
  static constexpr std::chrono::seconds kWallEpoch{1735689600};

  std::chrono::steady_clock::time_point Now() override {
    std::lock_guard lock(mutex_);
    return std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(slept_s_)));
  }
  std::chrono::system_clock::time_point WallNow() override {
    return std::chrono::system_clock::time_point(kWallEpoch);
  }
  void Sleep(double seconds) override {
    std::lock_guard lock(mutex_);
    sleeps_s_.push_back(seconds);
    slept_s_ += seconds;
  }
  std::vector<double> Sleeps() const {
    std::lock_guard lock(mutex_);
    return sleeps_s_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<double> sleeps_s_;
  double slept_s_ = 0;
};

}  // namespace egg::llm::testing
