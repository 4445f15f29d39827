#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <thread>

#include "llm/http_transport.h"

namespace egg::llm {
namespace {

constexpr int kPollPatienceMs = 5000;
constexpr size_t kReadChunk = 4096;

// A one-connection HTTP server on 127.0.0.1 with an ephemeral port. With an empty `answer` it accepts and
// then says nothing until the client hangs up.
class LoopbackServer {
 public:
  explicit LoopbackServer(std::string answer) : answer_(std::move(answer)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(listen_fd_, 1) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LoopbackServer() {
    if (thread_.joinable()) {
      thread_.join();
    }
    close(listen_fd_);
  }
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/chat/completions"; }
  // What the client sent; read it after the request finished (the server thread is joined first).
  std::string Received() {
    if (thread_.joinable()) {
      thread_.join();
    }
    return received_;
  }

 private:
  static bool WaitReadable(int fd) {
    pollfd entry{fd, POLLIN, 0};
    return poll(&entry, 1, kPollPatienceMs) == 1;
  }

  void Serve() {
    if (!WaitReadable(listen_fd_)) {
      return;
    }
    const int connection = accept(listen_fd_, nullptr, nullptr);
    if (connection < 0) {
      return;
    }
    std::array<char, kReadChunk> buffer{};
    while (!RequestComplete() && WaitReadable(connection)) {
      const ssize_t got = read(connection, buffer.data(), buffer.size());
      if (got <= 0) {
        break;
      }
      received_.append(buffer.data(), static_cast<size_t>(got));
    }
    if (!answer_.empty()) {
      EXPECT_EQ(write(connection, answer_.data(), answer_.size()), static_cast<ssize_t>(answer_.size()));
    } else {
      while (WaitReadable(connection) && read(connection, buffer.data(), buffer.size()) > 0) {
      }
    }
    close(connection);
  }

  bool RequestComplete() const {
    const auto header_end = received_.find("\r\n\r\n");
    if (header_end == std::string::npos) {
      return false;
    }
    const auto length_at = received_.find("Content-Length: ");
    const size_t length = length_at == std::string::npos ? 0 : std::stoul(received_.substr(length_at + 16));
    return received_.size() >= header_end + 4 + length;
  }

  std::string answer_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string received_;
};

TEST(CurlTransportTest, PostsToALoopbackServer) {
  const std::string reply_body = R"({"choices":[{"message":{"content":"hi"}}]})";
  LoopbackServer server(
      "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 7\r\n"
      "Content-Length: " +
      std::to_string(reply_body.size()) + "\r\nConnection: close\r\n\r\n" + reply_body);
  const HttpRequest request{server.Url(),
                            {{"Content-Type", "application/json"}, {"Authorization", "Bearer sk-loop"}},
                            R"({"model":"m"})"};
  const HttpResponse response = MakeCurlTransport()->Post(request, 5.0);
  ASSERT_EQ(response.error, TransportError::kNone) << response.error_message;
  EXPECT_EQ(response.status, 429);
  EXPECT_EQ(response.body, reply_body);
  EXPECT_EQ(response.headers.at("retry-after"), "7");
  EXPECT_EQ(response.headers.at("content-type"), "application/json");
  const std::string received = server.Received();
  EXPECT_EQ(received.rfind("POST /v1/chat/completions HTTP/1.1\r\n", 0), 0U) << received;
  EXPECT_NE(received.find("Authorization: Bearer sk-loop\r\n"), std::string::npos);
  EXPECT_NE(received.find("Content-Type: application/json\r\n"), std::string::npos);
  EXPECT_EQ(received.find("Expect:"), std::string::npos);
  EXPECT_EQ(received.substr(received.size() - 13), R"({"model":"m"})");
}

TEST(CurlTransportTest, TimesOutWhenTheServerNeverAnswers) {
  constexpr double kTimeoutS = 0.5;
  LoopbackServer server("");
  const auto start = std::chrono::steady_clock::now();
  const HttpResponse response = MakeCurlTransport()->Post({server.Url(), {}, "{}"}, kTimeoutS);
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(response.error, TransportError::kTimeout) << response.error_message;
  EXPECT_GE(elapsed_s, kTimeoutS * 0.9);
  EXPECT_LT(elapsed_s, kTimeoutS * 2);
  EXPECT_NE(response.error_message.find(server.Url()), std::string::npos) << response.error_message;
}

TEST(CurlTransportTest, RefusedConnectionIsANetworkError) {
  // A bound socket that does not listen: connecting to its port is refused, and nobody else can take it.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/v1";
  const HttpResponse response = MakeCurlTransport()->Post({url, {}, "{}"}, 5.0);
  close(fd);
  EXPECT_EQ(response.error, TransportError::kNetwork);
  EXPECT_FALSE(response.error_message.empty());
}

}  // namespace
}  // namespace egg::llm
