#include "harness/frame.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <string>

namespace egg::harness {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

class FrameTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(pipe(fds_.data()), 0); }
  void TearDown() override {
    close(fds_[0]);
    if (fds_[1] >= 0) {
      close(fds_[1]);
    }
  }
  std::array<int, 2> fds_{};
};

TEST_F(FrameTest, RoundTripsPayloads) {
  std::string error;
  ASSERT_TRUE(WriteFrame(fds_[1], R"({"op":"hello"})", &error)) << error;
  ASSERT_TRUE(WriteFrame(fds_[1], "", &error)) << error;
  FrameRead first = ReadFrame(fds_[0], steady_clock::now() + milliseconds(500));
  ASSERT_EQ(first.status, ReadStatus::kOk);
  EXPECT_EQ(first.payload, R"({"op":"hello"})");
  FrameRead second = ReadFrame(fds_[0], steady_clock::now() + milliseconds(500));
  ASSERT_EQ(second.status, ReadStatus::kOk);
  EXPECT_EQ(second.payload, "");
}

TEST_F(FrameTest, HeaderIsBigEndianLength) {
  std::string error;
  ASSERT_TRUE(WriteFrame(fds_[1], std::string(258, 'x'), &error));
  std::array<unsigned char, 4> header{};
  ASSERT_EQ(read(fds_[0], header.data(), 4), 4);
  EXPECT_EQ(header[0], 0);
  EXPECT_EQ(header[1], 0);
  EXPECT_EQ(header[2], 1);
  EXPECT_EQ(header[3], 2);
}

TEST_F(FrameTest, TimesOutWhenNothingArrives) {
  const auto start = steady_clock::now();
  FrameRead read = ReadFrame(fds_[0], start + milliseconds(100));
  EXPECT_EQ(read.status, ReadStatus::kTimeout);
  EXPECT_GE(steady_clock::now() - start, milliseconds(90));
}

TEST_F(FrameTest, ReportsEofAndTruncatedFrames) {
  const std::array<unsigned char, 5> partial = {0, 0, 0, 10, 'a'};
  ASSERT_EQ(write(fds_[1], partial.data(), partial.size()), 5);
  close(fds_[1]);
  fds_[1] = -1;
  FrameRead read = ReadFrame(fds_[0], steady_clock::now() + milliseconds(500));
  EXPECT_EQ(read.status, ReadStatus::kEof);
  EXPECT_NE(read.error.find("inside a frame"), std::string::npos);
}

TEST_F(FrameTest, RejectsOversizedHeader) {
  const std::array<unsigned char, 4> huge = {0xFF, 0xFF, 0xFF, 0xFF};
  ASSERT_EQ(write(fds_[1], huge.data(), huge.size()), 4);
  FrameRead read = ReadFrame(fds_[0], steady_clock::now() + milliseconds(500));
  EXPECT_EQ(read.status, ReadStatus::kError);
  EXPECT_NE(read.error.find("exceeds"), std::string::npos);
}

}  // namespace
}  // namespace egg::harness
