// Run-ending errors: a small typed family caught once in main(), which prints one line and exits non-zero.
// Expected failures of a candidate are never exceptions: they are data (harness::EvalResult).
#pragma once

#include <stdexcept>
#include <string>

namespace egg {

enum class ErrorKind { kUsage, kConfig, kIo, kWorker, kInterrupted, kInternal };

class EggError : public std::runtime_error {
 public:
  EggError(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind Kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

inline EggError UsageError(const std::string& message) { return {ErrorKind::kUsage, message}; }
inline EggError ConfigError(const std::string& message) { return {ErrorKind::kConfig, message}; }
inline EggError IoError(const std::string& message) { return {ErrorKind::kIo, message}; }
inline EggError WorkerError(const std::string& message) { return {ErrorKind::kWorker, message}; }
inline EggError InterruptedError(const std::string& message) { return {ErrorKind::kInterrupted, message}; }

// Process exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitCandidateFailed = 1;  // the run finished, but the candidate is not correct
inline constexpr int kExitError = 2;            // bad input, configuration or environment
inline constexpr int kExitInterrupted = 130;

}  // namespace egg
