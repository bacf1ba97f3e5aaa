#include "serve/http_server.h"

#include <atomic>
#include <condition_variable>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

namespace tarn::serve {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr size_t kHeaderLimit = 16 << 10;

std::string ErrorBody(const std::string& message) {
  return nlohmann::json{{"error", message}}.dump() + "\n";
}

}  // namespace

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kCancelled: return 499;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kDeadlineExceeded: return 504;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kFailedPrecondition: return 400;
    case StatusCode::kAborted: return 409;
    case StatusCode::kOutOfRange: return 400;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kUnknown:
    case StatusCode::kInternal:
    case StatusCode::kDataLoss: return 500;
  }
  return 500;
}

class Session;

class HttpServer::Impl {
 public:
  Impl(Options options, HttpHandler handler)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        acceptor_(ioc_),
        work_(net::make_work_guard(ioc_)) {}

  Status Listen();
  void Accept();
  void Start() {
    Accept();
    for (int i = 0; i < std::max(1, options_.threads); ++i) {
      threads_.emplace_back([this] { ioc_.run(); });
    }
  }
  size_t Drain(std::chrono::milliseconds deadline);
  void Stop() {
    work_.reset();
    ioc_.stop();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  void Register(Session* s, std::weak_ptr<Session> w) {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_[s] = std::move(w);
  }
  void Unregister(Session* s) {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.erase(s);
    if (sessions_.empty()) drained_cv_.notify_all();
  }

  Options options_;
  HttpHandler handler_;
  int port_ = 0;
  // Before ioc_: sessions still queued in ioc_ unregister when it is destroyed.
  std::mutex mu_;
  std::condition_variable drained_cv_;
  std::map<Session*, std::weak_ptr<Session>> sessions_;  // guarded by mu_
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  // Keeps the I/O threads running while nothing is pending on a socket: a request waiting
  // for its batch is only a Responder held by another thread. Without it, closing the
  // acceptor (Drain) left no work, run() returned, and those answers were never written.
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::atomic<bool> draining_{false};
  std::vector<std::thread> threads_;
};

// One connection. All its handlers run on its strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server)
      : stream_(std::move(socket)), server_(server) {}
  ~Session() { server_.Unregister(this); }

  void Start() {
    server_.Register(this, weak_from_this());
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

  // From Drain: close now if no request is being answered.
  void CloseIfIdle() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->busy_) self->Close();
    });
  }

 private:
  void ReadHeader() {
    if (server_.draining_) return Close();
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(server_.options_.max_body_bytes);
    stream_.expires_after(server_.options_.request_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    busy_ = true;
    const auto& req = parser_->get();
    if (auto length = parser_->content_length();
        length && *length > server_.options_.max_body_bytes) {
      return Fail(413, "request body of " + std::to_string(*length) +
                           " bytes is over the limit of " +
                           std::to_string(server_.options_.max_body_bytes));
    }
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      continue_.emplace(http::status::continue_, req.version());
      return http::async_write(stream_, *continue_,
                               [self = shared_from_this()](beast::error_code ec, size_t) {
                                 if (ec) return self->Close();
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->OnRead(ec);
                     });
  }

  void OnReadError(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == net::error::operation_aborted ||
        ec == beast::error::timeout || ec == net::error::connection_reset ||
        ec == net::error::eof) {
      return Close();
    }
    if (ec == http::error::body_limit) {
      return Fail(413, "request body is over the limit of " +
                           std::to_string(server_.options_.max_body_bytes) + " bytes");
    }
    if (ec == http::error::header_limit) return Fail(431, "request headers are over 16 KiB");
    if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
      return Fail(400, "malformed HTTP request: " + ec.message());
    }
    Close();
  }

  void OnRead(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    stream_.expires_never();  // the handler may take its time (a batch); the write has its own
    auto req = parser_->release();
    keep_alive_ = req.keep_alive();
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    request.content_type = std::string(req[http::field::content_type]);
    request.body = std::move(req.body());
    server_.handler_(std::move(request), [self = shared_from_this()](HttpResponse response) {
      net::post(self->stream_.get_executor(),
                [self, response = std::move(response)]() mutable {
                  self->Write(std::move(response));
                });
    });
  }

  void Fail(int status, const std::string& message) {
    busy_ = true;
    keep_alive_ = false;
    Write(HttpResponse{status, "application/json", ErrorBody(message)});
  }

  void Write(HttpResponse response) {
    response_.emplace();
    response_->version(11);
    response_->result(static_cast<unsigned>(response.status));
    response_->set(http::field::server, "tarn-serve");
    response_->set(http::field::content_type, response.content_type);
    response_->body() = std::move(response.body);
    response_->keep_alive(keep_alive_ && !server_.draining_);
    response_->prepare_payload();
    stream_.expires_after(server_.options_.request_timeout);
    http::async_write(stream_, *response_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->OnWrite(ec);
                      });
  }

  void OnWrite(beast::error_code ec) {
    busy_ = false;
    if (ec || !response_->keep_alive()) return Close();
    response_.reset();
    ReadHeader();
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::empty_body>> continue_;
  std::optional<http::response<http::string_body>> response_;
  bool keep_alive_ = true;
  bool busy_ = false;
};

Status HttpServer::Impl::Listen() {
  beast::error_code ec;
  const auto address = net::ip::make_address(options_.host, ec);
  if (ec) return InvalidArgumentError("listen address \"" + options_.host + "\": " + ec.message());
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(options_.port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return UnavailableError("cannot listen on " + options_.host + ":" +
                            std::to_string(options_.port) + ": " + ec.message());
  }
  port_ = acceptor_.local_endpoint(ec).port();
  return OkStatus();
}

void HttpServer::Impl::Accept() {
  acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(socket), *this)->Start();
    }
    Accept();
  });
}

size_t HttpServer::Impl::Drain(std::chrono::milliseconds deadline) {
  draining_ = true;
  net::post(ioc_, [this] {
    beast::error_code ignored;
    acceptor_.close(ignored);
  });
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [p, w] : sessions_) {
      if (auto s = w.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->CloseIfIdle();
  live.clear();
  size_t cut = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    drained_cv_.wait_for(lock, deadline, [&] { return sessions_.empty(); });
    cut = sessions_.size();
  }
  Stop();
  return cut;
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  if (impl_) impl_->Stop();
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(Options options, HttpHandler handler) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(handler));
  RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port_; }

void HttpServer::Start() { impl_->Start(); }

size_t HttpServer::Drain(std::chrono::milliseconds deadline) { return impl_->Drain(deadline); }

}  // namespace tarn::serve
