// One HTTP POST with a wall-clock limit, behind an interface so providers and retries are testable with a
// scripted fake. Transport failures (timeout, network) are data, never exceptions.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace egg::llm {

struct HttpRequest {
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  // name, value (may hold the API key)
  std::string body;
};

enum class TransportError { kNone, kTimeout, kNetwork };

struct HttpResponse {
  TransportError error = TransportError::kNone;
  std::string error_message;                   // set when error != kNone
  long status = 0;                             // HTTP status when error == kNone
  std::map<std::string, std::string> headers;  // names lower-cased; the final response's headers only
  std::string body;
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // Thread-safe: called concurrently by the client's workers.
  virtual HttpResponse Post(const HttpRequest& request, double timeout_s) = 0;
};

// libcurl, one easy handle per request. Loopback URLs never go through a proxy.
std::unique_ptr<HttpTransport> MakeCurlTransport();

}  // namespace egg::llm
