// Length-prefixed JSON frames (4-byte big-endian length, then UTF-8 JSON) over file descriptors.
// Both calls are blocking; ReadFrame gives up at `deadline`. Not thread-safe per descriptor.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace egg::harness {

inline constexpr uint32_t kMaxFrameBytes = 64U * 1024U * 1024U;

enum class ReadStatus { kOk, kEof, kTimeout, kError };

struct FrameRead {
  ReadStatus status = ReadStatus::kError;
  std::string payload;
  std::string error;
};

// Returns false and sets *error when the descriptor is closed or the payload is too large.
bool WriteFrame(int fd, std::string_view payload, std::string* error);
FrameRead ReadFrame(int fd, std::chrono::steady_clock::time_point deadline);

}  // namespace egg::harness
