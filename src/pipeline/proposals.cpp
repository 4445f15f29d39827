#include "pipeline/proposals.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace egg::pipeline {

Proposals::Result Proposals::Get(int index) {
  if (concurrency_ <= 1) {
    return code_.Propose(context_(), report_, index, count_);
  }
  if (!batch_) {
    AskAll();
  }
  return std::move((*batch_)[static_cast<size_t>(index)]);
}

void Proposals::AskAll() {
  const agents::StageContext context = context_();
  std::vector<Result> results(static_cast<size_t>(count_));
  std::atomic<int> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&] {
    for (int index = next++; index < count_; index = next++) {
      try {
        results[static_cast<size_t>(index)] = code_.Propose(context, report_, index, count_);
      } catch (...) {
        std::lock_guard lock(failure_mutex);
        failure = failure ? failure : std::current_exception();
      }
    }
  };
  std::vector<std::thread> workers;
  for (int worker = 0; worker < std::min(concurrency_, count_); ++worker) {
    workers.emplace_back(work);
  }
  for (std::thread& worker : workers) {
    worker.join();
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
  batch_ = std::move(results);
}

}  // namespace egg::pipeline
