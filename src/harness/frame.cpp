#include "harness/frame.h"

#include <poll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace egg::harness {
namespace {

constexpr size_t kHeaderBytes = 4;
constexpr unsigned kBitsPerByte = 8;

bool WriteAll(int fd, const char* data, size_t size, std::string* error) {
  while (size > 0) {
    const ssize_t written = write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) {
        continue;
      }
      *error = std::string("write failed: ") + std::strerror(errno);
      return false;
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

// Reads exactly `size` bytes unless EOF, error or deadline comes first.
ReadStatus ReadExactly(int fd, char* data, size_t size, std::chrono::steady_clock::time_point deadline,
                       std::string* error) {
  while (size > 0) {
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (remaining.count() <= 0) {
      return ReadStatus::kTimeout;
    }
    pollfd descriptor{fd, POLLIN, 0};
    const int ready = poll(&descriptor, 1, static_cast<int>(remaining.count()));
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    if (ready < 0) {
      *error = std::string("poll failed: ") + std::strerror(errno);
      return ReadStatus::kError;
    }
    if (ready == 0) {
      return ReadStatus::kTimeout;
    }
    const ssize_t got = read(fd, data, size);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      *error = std::string("read failed: ") + std::strerror(errno);
      return ReadStatus::kError;
    }
    if (got == 0) {
      return ReadStatus::kEof;
    }
    data += got;
    size -= static_cast<size_t>(got);
  }
  return ReadStatus::kOk;
}

}  // namespace

bool WriteFrame(int fd, std::string_view payload, std::string* error) {
  if (payload.size() > kMaxFrameBytes) {
    *error = "frame too large";
    return false;
  }
  const auto size = static_cast<uint32_t>(payload.size());
  std::array<char, kHeaderBytes> header{};
  for (size_t i = 0; i < kHeaderBytes; ++i) {
    header[i] = static_cast<char>((size >> (kBitsPerByte * (kHeaderBytes - 1 - i))) & 0xFFU);
  }
  return WriteAll(fd, header.data(), header.size(), error) &&
         WriteAll(fd, payload.data(), payload.size(), error);
}

FrameRead ReadFrame(int fd, std::chrono::steady_clock::time_point deadline) {
  FrameRead result;
  std::array<char, kHeaderBytes> header{};
  result.status = ReadExactly(fd, header.data(), header.size(), deadline, &result.error);
  if (result.status != ReadStatus::kOk) {
    return result;
  }
  uint32_t size = 0;
  for (char byte : header) {
    size = (size << kBitsPerByte) | static_cast<unsigned char>(byte);
  }
  if (size > kMaxFrameBytes) {
    result.status = ReadStatus::kError;
    result.error = "frame of " + std::to_string(size) + " bytes exceeds the limit";
    return result;
  }
  result.payload.resize(size);
  result.status = ReadExactly(fd, result.payload.data(), size, deadline, &result.error);
  if (result.status == ReadStatus::kEof) {
    result.error = "worker closed the pipe inside a frame";
  }
  return result;
}

}  // namespace egg::harness
