// HttpServer: tarn-serve's event-driven HTTP/1.1 server (Boost.Beast on Asio), built for
// many keep-alive clients and for answers that come later from another thread (a batch).
//
// Each connection reads a request (headers first, so that "Expect: 100-continue" is
// answered and an oversized Content-Length refused before the body is read), hands it to
// the handler, and writes the answer when the handler's Responder is called, from any
// thread. Limits: a body over max_body_bytes gets 413, headers over 16 KiB 431, a
// malformed request 400; a connection idle or reading for longer than request_timeout is
// closed. Drain() is the graceful stop of SIGTERM: no new connections, idle ones closed,
// requests in flight answered (with "Connection: close"), then the threads end.
//
// REQUIRES: Create() -> Start() -> Drain() -> destruction. The handler runs on the I/O
// threads and must not block; the Responder must be called exactly once.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace tarn::serve {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, as sent
  std::string content_type;
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

using Responder = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(HttpRequest request, Responder respond)>;

class HttpServer {
 public:
  struct Options {
    std::string host = "0.0.0.0";
    int port = 8501;  // 0: any free port (see port())
    int threads = 1;
    size_t max_body_bytes = 16u << 20;
    std::chrono::milliseconds request_timeout{30000};
  };

  static StatusOr<std::unique_ptr<HttpServer>> Create(Options options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  void Start();
  // Returns once every connection is closed, or after `deadline`: then the ones left are cut,
  // and their number returned (0: every request was answered).
  size_t Drain(std::chrono::milliseconds deadline);

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// TF Serving's mapping of status codes to HTTP statuses.
int HttpStatusFor(StatusCode code);

}  // namespace tarn::serve
