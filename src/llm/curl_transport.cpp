#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <mutex>
#include <string_view>

#include "llm/http_transport.h"

namespace egg::llm {
namespace {

constexpr size_t kMaxReplyBytes = size_t{64} << 20;
constexpr double kMillisecondsPerSecond = 1000.0;
constexpr long kMinTimeoutMs = 1;

std::string Lowercase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

std::string_view Trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

struct Exchange {
  std::string body;
  std::map<std::string, std::string> headers;
  bool too_large = false;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  const size_t bytes = size * count;
  if (exchange->body.size() + bytes > kMaxReplyBytes) {
    exchange->too_large = true;
    return 0;
  }
  exchange->body.append(data, bytes);
  return bytes;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  const size_t bytes = size * count;
  const std::string_view line(data, bytes);
  if (line.substr(0, 5) == "HTTP/") {
    exchange->headers.clear();  // a new response (after 100 Continue): keep only the final one's headers
  } else if (const auto colon = line.find(':'); colon != std::string_view::npos) {
    exchange->headers[Lowercase(Trim(line.substr(0, colon)))] = std::string(Trim(line.substr(colon + 1)));
  }
  return bytes;
}

bool IsLoopbackUrl(std::string_view url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    return false;
  }
  const std::string_view rest = url.substr(scheme_end + 3);
  for (std::string_view host : {"127.0.0.1", "localhost", "[::1]"}) {
    if (rest.substr(0, host.size()) == host &&
        (rest.size() == host.size() || rest[host.size()] == ':' || rest[host.size()] == '/')) {
      return true;
    }
  }
  return false;
}

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

class CurlTransport : public HttpTransport {
 public:
  CurlTransport() { InitCurlOnce(); }

  HttpResponse Post(const HttpRequest& request, double timeout_s) override {
    CURL* curl = curl_easy_init();
    if (curl == nullptr) {
      return {TransportError::kNetwork, "curl_easy_init failed", 0, {}, {}};
    }
    curl_slist* headers = nullptr;
    for (const auto& [name, value] : request.headers) {
      headers = curl_slist_append(headers, (name + ": " + value).c_str());
    }
    headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
    Exchange exchange;
    std::string error_buffer(CURL_ERROR_SIZE, '\0');
    Configure(curl, request, headers, timeout_s, &exchange, error_buffer.data());
    const CURLcode code = curl_easy_perform(curl);
    HttpResponse response = Finish(curl, code, request.url, std::move(exchange), error_buffer.c_str());
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return response;
  }

 private:
  static void Configure(CURL* curl, const HttpRequest& request, curl_slist* headers, double timeout_s,
                        Exchange* exchange, char* error_buffer) {
    const long timeout_ms = std::max(kMinTimeoutMs, std::lround(timeout_s * kMillisecondsPerSecond));
    curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, exchange);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, exchange);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
    if (IsLoopbackUrl(request.url)) {
      curl_easy_setopt(curl, CURLOPT_PROXY, "");
    }
  }

  static HttpResponse Finish(CURL* curl, CURLcode code, const std::string& url, Exchange exchange,
                             const char* error_buffer) {
    HttpResponse response;
    if (code == CURLE_OK) {
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
      response.headers = std::move(exchange.headers);
      response.body = std::move(exchange.body);
      return response;
    }
    response.error = code == CURLE_OPERATION_TIMEDOUT ? TransportError::kTimeout : TransportError::kNetwork;
    const std::string detail = exchange.too_large
                                   ? "the reply exceeds " + std::to_string(kMaxReplyBytes >> 20) + " MiB"
                               : error_buffer[0] != '\0' ? std::string(error_buffer)
                                                         : std::string(curl_easy_strerror(code));
    response.error_message = "POST " + url + ": " + detail;
    return response;
  }
};

}  // namespace

std::unique_ptr<HttpTransport> MakeCurlTransport() { return std::make_unique<CurlTransport>(); }

}  // namespace egg::llm
