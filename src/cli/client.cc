#include "cli/client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>

#include "common/number.h"

namespace tarn::cli {
namespace {

using json = nlohmann::json;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using generic_stream = boost::asio::generic::stream_protocol;
using ErrorCode = boost::system::error_code;

constexpr int kProbeTimeoutMs = 2000;
// What the error Status of a non-200 Stream() keeps of the answer's body.
constexpr size_t kMaxErrorBody = 64 << 10;
// A negative timeout: wait as long as it takes.
constexpr int64_t kNoTimeout = -1;

StatusCode CodeForHttpStatus(int status) {
  switch (status) {
    case 400:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 405:
      return StatusCode::kUnimplemented;
    case 409:
      return StatusCode::kAlreadyExists;
    case 413:
      return StatusCode::kResourceExhausted;
    case 503:
      return StatusCode::kUnavailable;
    default:
      return status >= 500 ? StatusCode::kInternal : StatusCode::kUnknown;
  }
}

// Lines joined with "; ", surrounding blanks dropped: the error must stay one line.
std::string OneLine(std::string_view text) {
  std::string out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    std::string_view line =
        text.substr(start, end == std::string_view::npos ? text.npos : end - start);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) {
      line.remove_prefix(1);
    }
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) {
      line.remove_suffix(1);
    }
    if (!line.empty()) {
      if (!out.empty()) out += "; ";
      for (char c : line) out += (c == '\r' || c == '\t') ? ' ' : c;
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

std::string LowerFirst(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

// Why connecting failed, in the words of getaddrinfo() and connect() ("cannot resolve H: ...",
// "connection refused", "no route to host", ...), which is what the user needs to know: one
// more connect() of our own, to the first address only, as the messages always said.
std::string DescribeConnectFailure(const ServerAddress& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* info = nullptr;
  const std::string port = std::to_string(address.port);
  int rc = ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &info);
  if (rc != 0) return "cannot resolve " + address.host + ": " + LowerFirst(::gai_strerror(rc));
  std::string reason = "connection failed";
  int fd = ::socket(info->ai_family, info->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    info->ai_protocol);
  if (fd >= 0) {
    int err = 0;
    if (::connect(fd, info->ai_addr, info->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int ready = ::poll(&p, 1, kProbeTimeoutMs);
        if (ready == 0) {
          err = ETIMEDOUT;
        } else {
          socklen_t len = sizeof err;
          if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
      }
    }
    if (err != 0) reason = LowerFirst(std::strerror(err));
    ::close(fd);
  }
  ::freeaddrinfo(info);
  return reason;
}

std::string ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "HTTP error";
  }
}

StatusOr<json> Answer(int status, const std::string& body) {
  if (status < 200 || status > 299) {
    return Status(CodeForHttpStatus(status), FormatHttpError(status, body));
  }
  if (body.empty()) return json::object();
  json value = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return DataLossError("the server's answer is not JSON (HTTP " + std::to_string(status) + ")");
  }
  return value;
}

// The step of an exchange that failed, and how.
struct Failure {
  enum Step { kConnect, kHandshake, kWrite, kRead } step;
  ErrorCode error;
};

// The Status of a request that got no (whole) answer.
Status FailureStatus(const Failure& failure, const ServerAddress& address) {
  const std::string where = "tarn server at " + address.ToString();
  const ErrorCode& ec = failure.error;
  switch (failure.step) {
    case Failure::kConnect:
      if (ec == asio::error::timed_out) {
        return UnavailableError("cannot reach " + where +
                                " (connection timed out); is `tarn server` running?");
      }
      if (address.kind == ServerAddress::Kind::kUnix) {
        std::string hint = "; is `tarn server` running?";
        if (ec == asio::error::access_denied) hint = "; the socket's mode does not let you in";
        return UnavailableError("cannot reach " + where + " (" + LowerFirst(ec.message()) + ")" +
                                hint);
      }
      return UnavailableError("cannot reach " + where + " (" + DescribeConnectFailure(address) +
                              "); is `tarn server` running?");
    case Failure::kHandshake:
      return UnavailableError("TLS handshake with " + where + " failed (" + ec.message() +
                              "); --cacert or $TARN_CACERT names the CA that signed the "
                              "server's certificate");
    case Failure::kWrite:
      return UnavailableError("lost the connection to " + where + " while sending the request");
    case Failure::kRead:
      // Beast's other HTTP errors say the bytes are not an HTTP answer (or one too large).
      if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
          ec != http::error::end_of_stream && ec != http::error::partial_message) {
        return UnavailableError("request to " + where + " failed: its answer is not valid HTTP (" +
                                ec.message() + ")");
      }
      return UnavailableError(where + " did not answer (the connection closed or timed out)");
  }
  return UnavailableError("request to " + where + " failed: " + ec.message());
}

// The server closed a kept connection before answering (its keep-alive timeout, or a restart).
bool ClosedByPeer(const ErrorCode& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

}  // namespace

std::string ServerAddress::ToString() const {
  if (kind == Kind::kUnix) return "unix:" + path;
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return (tls ? "https://" : "") + h + ":" + std::to_string(port);
}

StatusOr<ServerAddress> ParseServerAddress(std::string_view text) {
  const std::string original(text);
  auto bad = [&original](const std::string& why) {
    return InvalidArgumentError("server address \"" + original + "\": " + why +
                                " (use HOST:PORT, http://HOST:PORT, https://HOST:PORT or "
                                "unix:PATH)");
  };
  ServerAddress address;
  if (text.substr(0, 5) == "unix:") {
    address.kind = ServerAddress::Kind::kUnix;
    address.path = std::string(text.substr(5));
    if (address.path.empty()) return bad("missing socket path");
    if (address.path.size() >= sizeof(sockaddr_un::sun_path)) {
      return bad("a socket path has at most " + std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                 " bytes");
    }
    return address;
  }
  if (text.substr(0, 8) == "https://") {
    address.tls = true;
    text.remove_prefix(8);
  } else if (text.substr(0, 7) == "http://") {
    text.remove_prefix(7);
  }
  if (!text.empty() && text.back() == '/') text.remove_suffix(1);
  if (text.find('/') != std::string_view::npos) return bad("a path is not allowed");
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return bad("missing ']'");
    address.host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("expected ':' after ']'");
      port = rest.substr(1);
      if (port.empty()) return bad("missing port");
    }
  } else {
    size_t colon = text.rfind(':');
    address.host = std::string(text.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = text.substr(colon + 1);
      if (port.empty()) return bad("missing port");
    }
  }
  if (address.host.empty()) return bad("missing host");
  if (!port.empty()) {
    auto n = ParseInt64(port);
    if (!n || *n < 1 || *n > 65535) return bad("port must be a number from 1 to 65535");
    address.port = static_cast<int>(*n);
  }
  return address;
}

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string FormatHttpError(int status, std::string_view body) {
  std::string message;
  json value = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!value.is_discarded() && value.is_object()) {
    auto it = value.find("diagnostics");
    if (it != value.end() && it->is_string()) message = OneLine(it->get<std::string>());
  } else if (value.is_discarded()) {
    message = OneLine(body.substr(0, 500));
  }
  if (message.empty()) message = ReasonPhrase(status);
  return message + " (HTTP " + std::to_string(status) + ")";
}

// The kept connection and the event loop its operations run on. Each operation is started
// asynchronously and run by Run() until it completes or the deadline passes; then the
// socket is closed, which ends the operation (Asio's blocking calls have no timeout, and
// run_until() waits in epoll_wait() itself, with no timer to arm per operation). Sending
// cannot raise SIGPIPE: on Linux Asio sends with MSG_NOSIGNAL.
//
// The socket is a generic stream socket, a TCP or a Unix-domain one as the address says;
// for https a TLS stream over it is made anew for each connection.
class ApiClient::Connection {
 public:
  explicit Connection(const Options& options) : options_(options), ioc_(1), socket_(ioc_) {
    // Beast reads as much as the buffer has room for, 512 bytes at least: room for a whole
    // answer of the API saves a read() per 512 bytes.
    buffer_.reserve(64 << 10);
  }

  // Sends `request` and reads the answer's head into `parser` (made anew for each attempt),
  // and leaves the deadline of `read_timeout_ms` running for reading the rest. A connection
  // kept from an earlier call may have been closed by the server meanwhile: where nothing of
  // the answer came back on it, the request (unless a POST) goes once more on a new
  // connection.
  template <class Body>
  std::optional<Failure> Begin(http::request<http::string_body>& request,
                               std::optional<http::response_parser<Body>>& parser,
                               int64_t read_timeout_ms) {
    for (int attempt = 0;; ++attempt) {
      if (socket_.is_open() && !IdleAndOpen()) Close();
      const bool reused = socket_.is_open();
      if (!reused) {
        if (ErrorCode ec = Connect()) return Failure{Failure::kConnect, ec};
        if (ErrorCode ec = Handshake()) {
          Close();
          return Failure{Failure::kHandshake, ec};
        }
      }
      parser.emplace();
      // The API's lists have no size limit. Not boost::none: Beast 1.74 then refuses every
      // body with a Content-Length (it compares the length with the empty optional).
      parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      SetDeadline(options_.read_timeout_ms);
      Failure failure{Failure::kWrite, Run([&](auto handler) {
                        OnStream([&](auto& s) { http::async_write(s, request, std::move(handler)); });
                      })};
      if (!failure.error) {
        failure.step = Failure::kRead;
        SetDeadline(read_timeout_ms);
        failure.error = Run([&](auto handler) {
          OnStream([&](auto& s) {
            http::async_read_header(s, buffer_, *parser, std::move(handler));
          });
        });
      }
      if (!failure.error) return std::nullopt;
      Close();
      // Not a POST: the server may have acted on it before closing (RFC 9110 retries only
      // idempotent methods); a launch sent twice would answer 409 to the user.
      if (!(reused && attempt == 0 && ClosedByPeer(failure.error) && !parser->got_some() &&
            request.method() != http::verb::post)) {
        return failure;
      }
    }
  }

  // The rest of the answer, within the deadline that is running.
  template <class Parser>
  ErrorCode Read(Parser& parser) {
    return Run([&](auto handler) {
      OnStream([&](auto& s) { http::async_read(s, buffer_, parser, std::move(handler)); });
    });
  }

  // What arrives next of the answer (at least one byte of it), within a new deadline.
  template <class Parser>
  ErrorCode ReadSome(Parser& parser, int64_t timeout_ms) {
    SetDeadline(timeout_ms);
    return Run([&](auto handler) {
      OnStream([&](auto& s) { http::async_read_some(s, buffer_, parser, std::move(handler)); });
    });
  }

  void Close() {
    ErrorCode ignored;
    tls_.reset();
    socket_.close(ignored);
    buffer_.clear();
  }

 private:
  // `op` on the stream requests go over: the TLS one where there is one, else the socket.
  template <class Op>
  void OnStream(Op op) {
    if (tls_) {
      op(*tls_);
    } else {
      op(socket_);
    }
  }

  ErrorCode Connect() {
    const ServerAddress& address = options_.address;
    SetDeadline(options_.connect_timeout_ms);
    if (address.kind == ServerAddress::Kind::kUnix) {
      return Run([&](auto handler) {
        socket_.async_connect(
            generic_stream::endpoint(asio::local::stream_protocol::endpoint(address.path)),
            std::move(handler));
      });
    }
    // No AI_ADDRCONFIG (Asio's default): "::1" and "localhost" resolve on hosts without IPv6
    // routes too, as getaddrinfo() does for DescribeConnectFailure().
    ErrorCode ec;
    tcp::resolver resolver(ioc_);
    auto endpoints = resolver.resolve(address.host, std::to_string(address.port),
                                      tcp::resolver::numeric_service, ec);
    if (ec) return ec;
    // Each of the host's addresses in turn, within the one deadline.
    for (const auto& entry : endpoints) {
      ec = Run([&](auto handler) {
        socket_.async_connect(generic_stream::endpoint(entry.endpoint()), std::move(handler));
      });
      if (!ec) {
        socket_.set_option(tcp::no_delay(true), ec);
        return ec;
      }
      ErrorCode ignored;
      socket_.close(ignored);
      if (ec == asio::error::timed_out) break;
    }
    return ec ? ec : asio::error::host_not_found;
  }

  // https: the server's certificate must chain to the CA file (or the system's CAs) and
  // name the host.
  ErrorCode Handshake() {
    const ServerAddress& address = options_.address;
    if (address.kind != ServerAddress::Kind::kTcp || !address.tls) return {};
    if (!tls_context_) {
      tls_context_.emplace(asio::ssl::context::tls_client);
      ErrorCode ec;
      tls_context_->set_options(asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                                    asio::ssl::context::no_tlsv1 |
                                    asio::ssl::context::no_tlsv1_1,
                                ec);
      if (options_.ca_file.empty()) {
        tls_context_->set_default_verify_paths(ec);
      } else {
        tls_context_->load_verify_file(options_.ca_file, ec);
      }
      if (ec) {
        tls_context_.reset();
        return ec;
      }
      tls_context_->set_verify_mode(asio::ssl::verify_peer);
    }
    tls_.emplace(socket_, *tls_context_);
    tls_->set_verify_callback(asio::ssl::host_name_verification(address.host));
    ErrorCode not_an_address;
    asio::ip::make_address(address.host, not_an_address);
    if (not_an_address) {
      // A name: sent as SNI.
      ::SSL_set_tlsext_host_name(tls_->native_handle(), address.host.c_str());
    }
    SetDeadline(options_.connect_timeout_ms);
    return Run([&](auto handler) {
      tls_->async_handshake(asio::ssl::stream_base::client, std::move(handler));
    });
  }

  // A kept connection has nothing to read while idle; when it has, the server closed it (or
  // sent bytes no request asked for), and it is no use.
  bool IdleAndOpen() {
    pollfd p{socket_.native_handle(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }

  // A negative timeout: none.
  void SetDeadline(int64_t timeout_ms) {
    deadline_ = timeout_ms < 0 ? std::nullopt
                               : std::optional(std::chrono::steady_clock::now() +
                                               std::chrono::milliseconds(timeout_ms));
  }

  // Starts one operation, `start(handler)`, and runs the loop until the operation has
  // completed (the loop then has no work left), or else until the deadline: then closing the
  // socket cancels the operation, and the loop runs its handler.
  template <class Start>
  ErrorCode Run(Start start) {
    std::optional<ErrorCode> result;
    start([&result](ErrorCode ec, auto&&...) { result = ec; });
    ioc_.restart();
    if (deadline_) {
      ioc_.run_until(*deadline_);
    } else {
      ioc_.run();
    }
    if (result) return *result;
    ErrorCode ignored;
    socket_.close(ignored);
    ioc_.restart();
    ioc_.run();
    Close();
    return asio::error::timed_out;
  }

  const Options& options_;
  asio::io_context ioc_;  // concurrency hint 1: only the caller's thread runs it
  generic_stream::socket socket_;
  std::optional<asio::ssl::context> tls_context_;
  std::optional<asio::ssl::stream<generic_stream::socket&>> tls_;
  beast::flat_buffer buffer_;  // bytes read past the parser's need, kept for the next read
  std::optional<std::chrono::steady_clock::time_point> deadline_;
};

std::unique_ptr<ApiClient> ApiClient::Create(Options options) {
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(options)));
}

ApiClient::ApiClient(Options options)
    : options_(std::move(options)), connection_(std::make_unique<Connection>(options_)) {}

ApiClient::~ApiClient() = default;

std::string ApiClient::Target(std::string_view path, const Query& query) const {
  std::string target(path);
  char separator = '?';
  auto add = [&](std::string_view key, std::string_view value) {
    target += separator;
    target += UrlEncode(key) + "=" + UrlEncode(value);
    separator = '&';
  };
  if (!options_.tenant.empty()) add("tenant", options_.tenant);
  for (const auto& [key, value] : query) add(key, value);
  return target;
}

namespace {

http::request<http::string_body> NewRequest(http::verb verb, const std::string& target,
                                            const ApiClient::Options& options,
                                            const char* accept) {
  http::request<http::string_body> request(verb, target, 11);
  const ServerAddress& address = options.address;
  if (address.kind == ServerAddress::Kind::kUnix) {
    request.set(http::field::host, "localhost");
  } else {
    const std::string& h = address.host;
    request.set(http::field::host, (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" +
                                       std::to_string(address.port));
  }
  request.set(http::field::accept, accept);
  request.set(http::field::user_agent, "tarn");
  if (!options.token.empty()) request.set(http::field::authorization, "Bearer " + options.token);
  if (!options.act_as.empty()) request.set("Impersonate-User", options.act_as);
  return request;
}

}  // namespace

StatusOr<json> ApiClient::Call(Method method, const std::string& target, const json* body,
                               uint64_t* index) {
  static constexpr http::verb kVerbs[] = {http::verb::get, http::verb::post, http::verb::put,
                                          http::verb::delete_};
  http::request<http::string_body> request =
      NewRequest(kVerbs[static_cast<int>(method)], target, options_, "application/json");
  if (body != nullptr) {
    request.set(http::field::content_type, "application/json");
    request.body() = body->dump(-1, ' ', false, json::error_handler_t::replace);
  }
  request.prepare_payload();
  std::optional<http::response_parser<http::string_body>> parser;
  if (auto failure = connection_->Begin(request, parser, options_.read_timeout_ms)) {
    return FailureStatus(*failure, options_.address);
  }
  if (ErrorCode ec = connection_->Read(*parser)) {
    connection_->Close();
    return FailureStatus({Failure::kRead, ec}, options_.address);
  }
  if (!parser->keep_alive()) connection_->Close();  // "Connection: close"
  if (index != nullptr) {
    const auto field = parser->get()["X-Tarn-Index"];
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), n);
    *index = ec == std::errc() && end == field.data() + field.size() ? n : 0;
  }
  return Answer(parser->get().result_int(), parser->get().body());
}

StatusOr<json> ApiClient::Get(std::string_view path, const Query& query) {
  return Call(Method::kGet, Target(path, query), nullptr);
}

StatusOr<json> ApiClient::Watch(std::string_view path, uint64_t* index, int64_t wait_ms) {
  Query query;
  if (*index > 0) {
    query = {{"index", std::to_string(*index)}, {"wait", std::to_string(wait_ms) + "ms"}};
  }
  return Call(Method::kGet, Target(path, query), nullptr, index);
}

StatusOr<json> ApiClient::Post(std::string_view path, const json& body) {
  return Call(Method::kPost, Target(path, {}), &body);
}

StatusOr<json> ApiClient::Put(std::string_view path, const json& body) {
  return Call(Method::kPut, Target(path, {}), &body);
}

StatusOr<json> ApiClient::Delete(std::string_view path) {
  return Call(Method::kDelete, Target(path, {}), nullptr);
}

Status ApiClient::Stream(std::string_view path, const Query& query,
                         const std::function<bool(std::string_view)>& sink, bool no_idle_timeout) {
  http::request<http::string_body> request =
      NewRequest(http::verb::get, Target(path, query), options_, "*/*");
  // Each wait for the next piece has its own deadline: a log may flow for long.
  const int64_t idle_timeout_ms = no_idle_timeout ? kNoTimeout : options_.read_timeout_ms;
  std::optional<http::response_parser<http::buffer_body>> parser;
  if (auto failure = connection_->Begin(request, parser, idle_timeout_ms)) {
    return FailureStatus(*failure, options_.address);
  }
  const int status = parser->get().result_int();
  std::string error_body;
  char piece[16 << 10];
  while (!parser->is_done()) {
    // buffer_body: the parser writes the body into `piece`, and read_some returns as soon as
    // some of it came, so each piece reaches `sink` when it arrives.
    parser->get().body().data = piece;
    parser->get().body().size = sizeof piece;
    ErrorCode ec = connection_->ReadSome(*parser, idle_timeout_ms);
    if (ec == http::error::need_buffer) ec = {};  // `piece` is full
    if (ec) {
      connection_->Close();
      return FailureStatus({Failure::kRead, ec}, options_.address);
    }
    std::string_view got(piece, sizeof piece - parser->get().body().size);
    if (got.empty()) continue;  // a chunk's head, no data yet
    if (status != 200) {
      error_body.append(got);
      if (error_body.size() >= kMaxErrorBody) break;  // enough for the message
    } else if (!sink(got)) {
      break;
    }
  }
  // Closed where the answer was left unread (the sink stopped) or the server said so.
  if (!parser->is_done() || !parser->keep_alive()) connection_->Close();
  if (status != 200) {
    return Status(CodeForHttpStatus(status), FormatHttpError(status, error_body));
  }
  return OkStatus();
}

}  // namespace tarn::cli
