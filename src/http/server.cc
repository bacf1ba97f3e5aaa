#include "http/server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <type_traits>

namespace tarn::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = net::ip::tcp;
using unix_socket = net::local::stream_protocol;
using Clock = std::chrono::steady_clock;

namespace {

Response DefaultError(int status, const std::string& message) {
  return Response(status, "application/json", nlohmann::json{{"error", message}}.dump() + "\n");
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      const int hi = HexDigit(text[i + 1]), lo = HexDigit(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += (plus_is_space && c == '+') ? ' ' : c;
  }
  return out;
}

Listener Listener::Unix(std::string path, mode_t mode) {
  Listener l;
  l.kind = Kind::kUnix;
  l.path = std::move(path);
  l.mode = mode;
  return l;
}

std::string Listener::ToString() const {
  if (kind == Kind::kUnix) return "unix:" + path;
  const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return (tls() ? "https://" : "") + h + ":" + std::to_string(port);
}

// What Drain needs of a connection, whatever its stream.
class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() = default;
  // Close now if no request is being answered.
  virtual void CloseIfIdle() = 0;
};

class Server::Impl {
 public:
  Impl(Options options, Handler handler)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        iocs_(MakeContexts(options_.threads)),
        accept_strand_(net::make_strand(ioc())),
        accept_retry_(accept_strand_) {
    if (!options_.render_error) options_.render_error = DefaultError;
    for (auto& ioc : iocs_) work_.push_back(net::make_work_guard(*ioc));
  }

  // One event loop per I/O thread, each run by its thread alone: connections are dealt to
  // them in turn, and a connection's work never crosses threads, so no lock of Asio's
  // scheduler is contended and no thread wakes another (one loop shared by two threads spent
  // a fifth of the API's time in futex waits and wake-ups, measured with perf).
  static std::vector<std::unique_ptr<net::io_context>> MakeContexts(int threads) {
    std::vector<std::unique_ptr<net::io_context>> out;
    for (int i = 0; i < std::max(1, threads); ++i) {
      out.push_back(std::make_unique<net::io_context>(1));
    }
    return out;
  }
  net::io_context& ioc() { return *iocs_.front(); }
  // The loop of the next connection.
  net::io_context& NextContext() { return *iocs_[next_context_++ % iocs_.size()]; }

  Status Listen();
  Status LoadTls();
  Status ListenTcp();
  Status ListenUnix();
  void Accept() {
    if (tcp_acceptor_) return AcceptOn(*tcp_acceptor_);
    AcceptOn(*unix_acceptor_);
  }
  template <class Acceptor>
  void AcceptOn(Acceptor& acceptor);
  void CloseAcceptor() {
    beast::error_code ignored;
    if (tcp_acceptor_) tcp_acceptor_->close(ignored);
    if (unix_acceptor_) unix_acceptor_->close(ignored);
    accept_retry_.cancel();
  }
  void Start() {
    net::post(accept_strand_, [this] { Accept(); });
    for (auto& ioc : iocs_) {
      threads_.emplace_back([ioc = ioc.get()] { ioc->run(); });
    }
  }
  size_t Drain(std::chrono::milliseconds deadline);
  void Stop() {
    work_.clear();
    for (auto& ioc : iocs_) ioc->stop();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  ~Impl() {
    // The socket file goes with the server, unless another one has replaced it since.
    struct stat now {};
    if (bound_file_ && ::stat(options_.listen.path.c_str(), &now) == 0 &&
        now.st_ino == bound_file_->first && now.st_dev == bound_file_->second) {
      ::unlink(options_.listen.path.c_str());
    }
  }

  void Register(SessionBase* s, std::weak_ptr<SessionBase> w) {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_[s] = std::move(w);
  }
  void Unregister(SessionBase* s) {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.erase(s);
    if (sessions_.empty()) drained_cv_.notify_all();
  }
  size_t OpenConnections() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sessions_.size();
  }
  // A canned 503 written without waiting (the socket buffer of a new connection has room),
  // then the close: the cap must not cost what it protects.
  template <class Socket>
  void Refuse(Socket& socket) {
    ++refused_;
    if (tls_) {
      // No handshake to spend on it: the client sees the connection closed.
      beast::error_code ignored;
      socket.close(ignored);
      return;
    }
    const Response r = options_.render_error(
        503, "too many connections (" + std::to_string(options_.max_connections) +
                 " open); try again later");
    const std::string text = "HTTP/1.1 503 Service Unavailable\r\nServer: " +
                             options_.server_header + "\r\nContent-Type: " + r.content_type +
                             "\r\nContent-Length: " + std::to_string(r.body.size()) +
                             "\r\nConnection: close\r\n\r\n" + r.body;
    beast::error_code ignored;
    socket.non_blocking(true, ignored);
    socket.write_some(net::buffer(text), ignored);
    socket.shutdown(net::socket_base::shutdown_both, ignored);
    socket.close(ignored);
  }

  Options options_;
  Handler handler_;
  int port_ = 0;
  std::optional<net::ssl::context> tls_;  // a TLS listener's certificate and key
  // Before iocs_: sessions still queued in a loop unregister when it is destroyed.
  mutable std::mutex mu_;
  std::condition_variable drained_cv_;
  std::map<SessionBase*, std::weak_ptr<SessionBase>> sessions_;  // guarded by mu_
  std::vector<std::unique_ptr<net::io_context>> iocs_;
  size_t next_context_ = 0;  // used on accept_strand_
  // The acceptor (one of the two) is used on its own strand: Accept() and Drain()'s close
  // never race.
  net::strand<net::io_context::executor_type> accept_strand_;
  std::optional<tcp::acceptor> tcp_acceptor_;
  std::optional<unix_socket::acceptor> unix_acceptor_;
  std::optional<std::pair<ino_t, dev_t>> bound_file_;  // the socket file this server made
  net::steady_timer accept_retry_;
  // Keeps the I/O threads running while nothing is pending on a socket: a request waiting
  // for its batch is only a Responder held by another thread. Without it, closing the
  // acceptor (Drain) left no work, run() returned, and those answers were never written.
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> refused_{0};
  std::vector<std::thread> threads_;
};

template <class Protocol>
using PlainStream = beast::basic_stream<Protocol, net::any_io_executor, beast::unlimited_rate_policy>;
using TlsStream = beast::ssl_stream<PlainStream<tcp>>;

// One connection over `Protocol` (TCP, or a Unix-domain socket), plain or (kTls) TLS. All its
// handlers run on its strand.
template <class Protocol, bool kTls = false>
class Session : public SessionBase {
 public:
  using Stream = std::conditional_t<kTls, TlsStream, PlainStream<Protocol>>;

  Session(typename Protocol::socket socket, Server::Impl& server)
      : stream_(MakeStream(std::move(socket), server)),
        server_(server),
        timer_(stream_.get_executor()) {}
  ~Session() override { server_.Unregister(this); }

  void Start() {
    server_.Register(this, weak_from_this());
    DescribePeer();
    net::dispatch(stream_.get_executor(), [self = Self()] {
      if constexpr (kTls) {
        // The handshake counts against the head's time: a client that opens and says
        // nothing is closed as one that sends no head.
        self->Lowest().expires_after(self->options().header_timeout);
        self->stream_.async_handshake(net::ssl::stream_base::server,
                                      [self](beast::error_code ec) {
                                        if (ec) return self->Close();
                                        self->ReadRequest(true);
                                      });
      } else {
        self->ReadRequest(true);
      }
    });
  }

  void CloseIfIdle() override {
    net::post(stream_.get_executor(), [self = Self()] {
      if (!self->busy_) self->Close();
    });
  }

 private:
  static Stream MakeStream(typename Protocol::socket socket, Server::Impl& server) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *server.tls_);
    } else {
      return Stream(std::move(socket));
    }
  }

  std::shared_ptr<Session> Self() { return std::static_pointer_cast<Session>(shared_from_this()); }
  // The TCP or Unix stream under TLS (the stream itself when plain): timeouts and the socket.
  PlainStream<Protocol>& Lowest() { return beast::get_lowest_layer(stream_); }

  void DescribePeer() {
    if constexpr (std::is_same_v<Protocol, tcp>) {
      beast::error_code ec;
      const tcp::endpoint peer = Lowest().socket().remote_endpoint(ec);
      if (!ec) {
        const std::string a = peer.address().to_string();
        peer_ = (peer.address().is_v6() ? "[" + a + "]" : a) + ":" + std::to_string(peer.port());
      }
    } else {
      peer_ = "unix";
      ucred cred{};
      socklen_t len = sizeof cred;
      if (::getsockopt(Lowest().socket().native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) ==
          0) {
        credentials_ = PeerCredentials{cred.pid, cred.uid, cred.gid};
      }
    }
  }

  const Server::Options& options() const { return server_.options_; }

  // A new connection, or the next request on a kept-alive one.
  void ReadRequest(bool fresh) {
    if (server_.draining_) return Close();
    busy_ = false;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(options().max_header_bytes));
    parser_->body_limit(options().max_body_bytes);
    if (fresh || buffer_.size() > 0) return ReadHeader();
    // Idle between requests: wait for the next head's first byte, then give the rest of the
    // head header_timeout.
    Lowest().expires_after(options().idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = Self()](beast::error_code ec, size_t n) {
                              if (ec) return self->OnReadError(ec);
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    Lowest().expires_after(options().header_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = Self()](beast::error_code ec, size_t) {
                               self->OnHeader(ec);
                             });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    busy_ = true;
    const auto& req = parser_->get();
    if (parser_->is_done()) return Dispatch();
    if (beast::iequals(req[bhttp::field::expect], "100-continue")) {
      continue_.emplace(bhttp::status::continue_, req.version());
      Lowest().expires_after(options().write_timeout);
      return bhttp::async_write(stream_, *continue_,
                                [self = Self()](beast::error_code ec, size_t) {
                                  if (ec) return self->Close();
                                  self->ReadBody();
                                });
    }
    ReadBody();
  }

  void ReadBody() {
    Lowest().expires_after(options().body_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = Self()](beast::error_code ec, size_t) {
                        if (ec) return self->OnReadError(ec);
                        self->Dispatch();
                      });
  }

  void OnReadError(beast::error_code ec) {
    // Also a Content-Length over the limit, refused with the head before any body is read.
    if (ec == bhttp::error::body_limit) {
      return Fail(413, "request body is over the limit of " +
                           std::to_string(options().max_body_bytes) + " bytes");
    }
    if (ec == bhttp::error::header_limit) {
      return Fail(431, "request headers are over " +
                           std::to_string(options().max_header_bytes / 1024) + " KiB");
    }
    // A parse error (not an end of stream, a timeout or a reset) deserves an answer.
    if (ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message &&
        ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category()) {
      return Fail(400, "malformed HTTP request: " + ec.message());
    }
    Close();
  }

  void Dispatch() {
    Lowest().expires_never();  // the handler may take its time (a batch); the write has its own
    auto req = parser_->release();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == bhttp::verb::head;
    Request request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    request.content_type = std::string(req[bhttp::field::content_type]);
    request.body = std::move(req.body());
    request.peer = peer_;
    request.credentials = credentials_;
    request.tls = kTls;
    request.authorization = std::string(req[bhttp::field::authorization]);
    request.impersonate_user = std::string(req["Impersonate-User"]);
    request.cookie = std::string(req[bhttp::field::cookie]);
    request.csrf = std::string(req["X-Tarn-CSRF"]);
    request.connection_memo = &memo_;
    // An answer given before the handler returns (on this thread) is written right after it,
    // without a trip through the strand's queue; a later one is posted to the strand.
    dispatching_ = std::this_thread::get_id();
    server_.handler_(std::move(request), [self = Self()](Response response) {
      if (self->dispatching_ == std::this_thread::get_id()) {
        self->answer_ = std::move(response);
        return;
      }
      net::post(self->stream_.get_executor(),
                [self, response = std::move(response)]() mutable {
                  self->Write(std::move(response));
                });
    });
    dispatching_ = std::thread::id();
    if (answer_) {
      Response r = std::move(*answer_);
      answer_.reset();
      Write(std::move(r));
    }
  }

  // An answer the server gives itself; the client may still be sending a body, so the
  // connection closes by lingering.
  void Fail(int status, const std::string& message) {
    busy_ = true;
    keep_alive_ = false;
    linger_ = true;
    head_ = false;
    Write(options().render_error(status, message));
  }

  template <class Message>
  void SetHeaders(Message& m, const Response& r) {
    m.version(11);
    m.result(static_cast<unsigned>(r.status));
    m.set(bhttp::field::server, options().server_header);
    m.set(bhttp::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) m.insert(name, value);
    m.keep_alive(keep_alive_ && !server_.draining_);
  }

  void Write(Response r) {
    if (r.stream && !head_) return WriteStream(std::move(r));
    response_.emplace();
    SetHeaders(*response_, r);
    if (head_) {
      response_->content_length(r.stream ? 0 : r.body.size());
    } else {
      response_->body() = std::move(r.body);
      response_->prepare_payload();
    }
    Lowest().expires_after(options().write_timeout);
    bhttp::async_write(stream_, *response_,
                       [self = Self()](beast::error_code ec, size_t) {
                         self->AfterAnswer(ec, self->response_->keep_alive());
                       });
  }

  void AfterAnswer(beast::error_code ec, bool keep_alive) {
    response_.reset();
    if (ec) return Close();
    if (!keep_alive) return linger_ ? Linger() : Close();
    ReadRequest(false);
  }

  // ---- A chunked body from a BodyStream ----

  void WriteStream(Response r) {
    source_ = std::move(r.stream);
    stream_head_.emplace();
    SetHeaders(*stream_head_, r);
    stream_head_->chunked(true);
    serializer_.emplace(*stream_head_);
    Lowest().expires_after(options().write_timeout);
    bhttp::async_write_header(stream_, *serializer_,
                              [self = Self()](beast::error_code ec, size_t) {
                                if (ec) return self->Close();
                                self->PullChunk();
                              });
  }

  void PullChunk() {
    if (server_.draining_) return EndStream();
    switch (source_->Pull(&chunk_)) {
      case BodyStream::Next::kData:
        Lowest().expires_after(options().write_timeout);
        net::async_write(stream_, bhttp::make_chunk(net::buffer(chunk_)),
                         [self = Self()](beast::error_code ec, size_t) {
                           if (ec) return self->Close();
                           self->PullChunk();
                         });
        return;
      case BodyStream::Next::kWait:
        if (PeerHungUp()) return Close();
        timer_.expires_after(source_->poll_interval());
        timer_.async_wait([self = Self()](beast::error_code ec) {
          if (ec) return self->Close();
          self->PullChunk();
        });
        return;
      case BodyStream::Next::kEnd:
        return EndStream();
    }
  }

  void EndStream() {
    Lowest().expires_after(options().write_timeout);
    net::async_write(stream_, bhttp::make_chunk_last(),
                     [self = Self()](beast::error_code ec, size_t) {
                       const bool keep_alive = self->stream_head_->keep_alive();
                       self->source_.reset();
                       self->serializer_.reset();
                       self->stream_head_.reset();
                       self->AfterAnswer(ec, keep_alive);
                     });
  }

  // A client that went away while its stream waits for data (a quiet followed log) is
  // seen here, not only at the next write, which may never come.
  bool PeerHungUp() {
    pollfd p{Lowest().socket().native_handle(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
  }

  // nginx's lingering close: stop sending, then read and drop whatever the client still
  // sends until it closes or linger_timeout has passed, so that its pending body does not
  // turn our answer into a reset before it has read it.
  void Linger() {
    beast::error_code ignored;
    Lowest().socket().shutdown(net::socket_base::shutdown_send, ignored);
    linger_until_ = Clock::now() + options().linger_timeout;
    LingerRead();
  }

  void LingerRead() {
    buffer_.consume(buffer_.size());
    Lowest().expires_at(linger_until_);
    stream_.async_read_some(buffer_.prepare(64 << 10),
                            [self = Self()](beast::error_code ec, size_t) {
                              if (ec) return self->Close();
                              self->LingerRead();
                            });
  }

  void Close() {
    beast::error_code ignored;
    timer_.cancel();
    Lowest().socket().shutdown(net::socket_base::shutdown_both, ignored);
    Lowest().socket().close(ignored);
  }

  Stream stream_;
  Server::Impl& server_;
  net::steady_timer timer_;
  std::string peer_;
  std::optional<PeerCredentials> credentials_;
  std::shared_ptr<void> memo_;  // Request::connection_memo
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::optional<bhttp::response<bhttp::empty_body>> continue_;
  std::optional<bhttp::response<bhttp::string_body>> response_;
  // A streamed answer: its head, the serializer that wrote it, the source and its last chunk.
  std::optional<bhttp::response<bhttp::empty_body>> stream_head_;
  std::optional<bhttp::response_serializer<bhttp::empty_body>> serializer_;
  std::shared_ptr<BodyStream> source_;
  std::string chunk_;
  Clock::time_point linger_until_;
  // Set while the handler runs on this connection's strand; its answer if it gave one then.
  std::atomic<std::thread::id> dispatching_{};
  std::optional<Response> answer_;
  bool keep_alive_ = true;
  bool head_ = false;
  bool linger_ = false;
  bool busy_ = false;
};

Status Server::Impl::Listen() {
  if (options_.listen.kind == Listener::Kind::kUnix) return ListenUnix();
  if (!options_.listen.tls_cert_file.empty() || !options_.listen.tls_key_file.empty()) {
    RETURN_IF_ERROR(LoadTls());
  }
  return ListenTcp();
}

Status Server::Impl::LoadTls() {
  const Listener& l = options_.listen;
  if (l.tls_cert_file.empty() || l.tls_key_file.empty()) {
    return InvalidArgumentError("TLS on " + l.ToString() +
                                " needs both a certificate and a key file");
  }
  tls_.emplace(net::ssl::context::tls_server);
  beast::error_code ec;
  tls_->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                        net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                        net::ssl::context::no_tlsv1_1 | net::ssl::context::single_dh_use,
                    ec);
  tls_->use_certificate_chain_file(l.tls_cert_file, ec);
  if (ec) {
    return InvalidArgumentError("TLS certificate " + l.tls_cert_file + ": " + ec.message());
  }
  tls_->use_private_key_file(l.tls_key_file, net::ssl::context::pem, ec);
  // OpenSSL checks the key against the certificate as it loads it ("key values mismatch").
  if (ec || ::SSL_CTX_check_private_key(tls_->native_handle()) != 1) {
    return InvalidArgumentError("TLS key " + l.tls_key_file + ": " +
                                (ec ? ec.message() : std::string("no usable key")) +
                                " (it must be the PEM private key of the certificate " +
                                l.tls_cert_file + ")");
  }
  return OkStatus();
}

Status Server::Impl::ListenTcp() {
  beast::error_code ec;
  const std::string& host = options_.listen.host;
  const auto address = net::ip::make_address(host, ec);
  if (ec) return InvalidArgumentError("listen address \"" + host + "\": " + ec.message());
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(options_.listen.port));
  tcp_acceptor_.emplace(accept_strand_);
  tcp_acceptor_->open(endpoint.protocol(), ec);
  if (!ec) tcp_acceptor_->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) tcp_acceptor_->bind(endpoint, ec);
  if (!ec) tcp_acceptor_->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return UnavailableError("cannot listen on " + options_.listen.ToString() + ": " +
                            ec.message());
  }
  port_ = tcp_acceptor_->local_endpoint(ec).port();
  return OkStatus();
}

Status Server::Impl::ListenUnix() {
  const std::string& path = options_.listen.path;
  const std::string where = options_.listen.ToString();
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    return InvalidArgumentError(where + ": a socket path needs 1 to " +
                                std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  }
  beast::error_code ec;
  if (struct stat st {}; ::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return FailedPreconditionError(where + ": the path exists and is not a socket");
    }
    // Left by a server that is gone (connection refused), or in use by a live one.
    unix_socket::socket probe(ioc());
    probe.connect(unix_socket::endpoint(path), ec);
    if (!ec) return UnavailableError(where + ": another server listens on it");
    if (ec != net::error::connection_refused) {
      return UnavailableError(where + ": cannot tell whether a server listens on it: " +
                              ec.message());
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return UnavailableError(where + ": cannot remove the stale socket: " +
                              std::strerror(errno));
    }
  }
  unix_acceptor_.emplace(accept_strand_);
  unix_acceptor_->open(unix_socket(), ec);
  if (!ec) unix_acceptor_->bind(unix_socket::endpoint(path), ec);
  if (ec) return UnavailableError("cannot listen on " + where + ": " + ec.message());
  struct stat made {};
  if (::stat(path.c_str(), &made) == 0) bound_file_ = std::make_pair(made.st_ino, made.st_dev);
  // bind() made the file as the umask allows; who may connect is what `mode` says.
  if (::chmod(path.c_str(), options_.listen.mode) != 0) {
    return UnavailableError(where + ": chmod " + std::strerror(errno));
  }
  unix_acceptor_->listen(net::socket_base::max_listen_connections, ec);
  if (ec) return UnavailableError("cannot listen on " + where + ": " + ec.message());
  return OkStatus();
}

template <class Acceptor>
void Server::Impl::AcceptOn(Acceptor& acceptor) {
  using Protocol = typename Acceptor::protocol_type;
  acceptor.async_accept(
      net::make_strand(NextContext()),
      [this, &acceptor](beast::error_code ec, typename Protocol::socket socket) {
        if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
        if (ec) {
          // Out of descriptors (EMFILE) or memory: accepting again at once would spin; the
          // connection stays in the backlog meanwhile.
          accept_retry_.expires_after(std::chrono::milliseconds(50));
          accept_retry_.async_wait([this](beast::error_code wait) {
            if (!wait) Accept();
          });
          return;
        }
        if constexpr (std::is_same_v<Protocol, tcp>) socket.set_option(tcp::no_delay(true), ec);
        if (OpenConnections() >= options_.max_connections) {
          Refuse(socket);
        } else if (tls_) {
          if constexpr (std::is_same_v<Protocol, tcp>) {
            std::make_shared<Session<tcp, true>>(std::move(socket), *this)->Start();
          }
        } else {
          std::make_shared<Session<Protocol>>(std::move(socket), *this)->Start();
        }
        Accept();
      });
}

size_t Server::Impl::Drain(std::chrono::milliseconds deadline) {
  draining_ = true;
  net::post(accept_strand_, [this] { CloseAcceptor(); });
  std::vector<std::shared_ptr<SessionBase>> live;
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

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (impl_) impl_->Stop();
}

StatusOr<std::unique_ptr<Server>> Server::Create(Options options, Handler handler) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(handler));
  RETURN_IF_ERROR(impl->Listen());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::port() const { return impl_->port_; }

void Server::Start() { impl_->Start(); }

size_t Server::Drain(std::chrono::milliseconds deadline) { return impl_->Drain(deadline); }

size_t Server::open_connections() const { return impl_->OpenConnections(); }

uint64_t Server::refused_connections() const { return impl_->refused_.load(); }

}  // namespace tarn::http
