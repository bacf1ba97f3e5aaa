#include "cli/client.h"

#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "common/number.h"

namespace tarn::cli {
namespace {

using json = nlohmann::json;

constexpr int kProbeTimeoutMs = 2000;
// A followed log may be quiet for long; the limit must fit poll()'s int milliseconds.
constexpr int64_t kFollowIdleTimeoutMs = int64_t{7} * 24 * 3600 * 1000;

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

// httplib reports only "connection failed"; one more connect() of our own finds out why
// ("connection refused", "no route to host", ...), which is what the user needs to know.
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

StatusOr<json> ParseJsonBody(const httplib::Result& result) {
  const std::string& body = result->body;
  if (body.empty()) return json::object();
  json value = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return DataLossError("the server's answer is not JSON (HTTP " + std::to_string(result->status) +
                         ")");
  }
  return value;
}

StatusOr<json> Answer(const httplib::Result& result) {
  if (result->status < 200 || result->status > 299) {
    return Status(CodeForHttpStatus(result->status), FormatHttpError(result->status, result->body));
  }
  return ParseJsonBody(result);
}

}  // namespace

std::string ServerAddress::ToString() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

StatusOr<ServerAddress> ParseServerAddress(std::string_view text) {
  const std::string original(text);
  auto bad = [&original](const std::string& why) {
    return InvalidArgumentError("server address \"" + original + "\": " + why +
                                " (use HOST:PORT or http://HOST:PORT)");
  };
  if (text.substr(0, 8) == "https://") return bad("https is not supported");
  if (text.substr(0, 7) == "http://") text.remove_prefix(7);
  if (!text.empty() && text.back() == '/') text.remove_suffix(1);
  if (text.find('/') != std::string_view::npos) return bad("a path is not allowed");
  ServerAddress address;
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

std::unique_ptr<ApiClient> ApiClient::Create(Options options) {
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(options)));
}

ApiClient::ApiClient(Options options)
    : options_(std::move(options)),
      http_(std::make_unique<httplib::Client>(options_.address.host, options_.address.port)) {
  http_->set_connection_timeout(std::chrono::milliseconds(options_.connect_timeout_ms));
  http_->set_read_timeout(std::chrono::milliseconds(options_.read_timeout_ms));
  http_->set_write_timeout(std::chrono::milliseconds(options_.read_timeout_ms));
  http_->set_keep_alive(true);
  http_->set_url_encode(false);  // Target() encodes every part itself
}

ApiClient::~ApiClient() = default;

std::string ApiClient::Target(std::string_view path, const Query& query) const {
  std::string target(path);
  target += "?user.name=" + UrlEncode(options_.user);
  for (const auto& [key, value] : query) target += "&" + UrlEncode(key) + "=" + UrlEncode(value);
  return target;
}

Status ApiClient::ConnectionError(int httplib_error) const {
  const std::string where = "tarn server at " + options_.address.ToString();
  switch (static_cast<httplib::Error>(httplib_error)) {
    case httplib::Error::Connection:
      return UnavailableError("cannot reach " + where + " (" +
                              DescribeConnectFailure(options_.address) +
                              "); is `tarn server` running?");
    case httplib::Error::ConnectionTimeout:
      return UnavailableError("cannot reach " + where +
                              " (connection timed out); is `tarn server` running?");
    case httplib::Error::Read:
      return UnavailableError(where + " did not answer (the connection closed or timed out)");
    case httplib::Error::Write:
      return UnavailableError("lost the connection to " + where + " while sending the request");
    default:
      return UnavailableError("request to " + where + " failed: " +
                              httplib::to_string(static_cast<httplib::Error>(httplib_error)));
  }
}

StatusOr<json> ApiClient::Get(std::string_view path, const Query& query) {
  httplib::Result result = http_->Get(Target(path, query));
  if (!result) return ConnectionError(static_cast<int>(result.error()));
  return Answer(result);
}

StatusOr<json> ApiClient::Post(std::string_view path, const json& body) {
  httplib::Result result =
      http_->Post(Target(path, {}), body.dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
  if (!result) return ConnectionError(static_cast<int>(result.error()));
  return Answer(result);
}

StatusOr<json> ApiClient::Put(std::string_view path, const json& body) {
  httplib::Result result =
      http_->Put(Target(path, {}), body.dump(-1, ' ', false, json::error_handler_t::replace),
                 "application/json");
  if (!result) return ConnectionError(static_cast<int>(result.error()));
  return Answer(result);
}

StatusOr<json> ApiClient::Delete(std::string_view path) {
  httplib::Result result = http_->Delete(Target(path, {}));
  if (!result) return ConnectionError(static_cast<int>(result.error()));
  return Answer(result);
}

Status ApiClient::Stream(std::string_view path, const Query& query,
                         const std::function<bool(std::string_view)>& sink, bool no_idle_timeout) {
  if (no_idle_timeout) http_->set_read_timeout(std::chrono::milliseconds(kFollowIdleTimeoutMs));
  int status = 0;
  std::string error_body;
  bool stopped_by_sink = false;
  httplib::Result result = http_->Get(
      Target(path, query), httplib::Headers{},
      [&status](const httplib::Response& response) {
        status = response.status;
        return true;
      },
      [&](const char* data, size_t length) {
        if (status != 200) {
          if (error_body.size() < (64u << 10)) error_body.append(data, length);
          return true;
        }
        if (!sink(std::string_view(data, length))) {
          stopped_by_sink = true;
          return false;
        }
        return true;
      });
  if (no_idle_timeout) http_->set_read_timeout(std::chrono::milliseconds(options_.read_timeout_ms));
  if (stopped_by_sink) return OkStatus();
  if (!result) return ConnectionError(static_cast<int>(result.error()));
  if (result->status != 200) {
    return Status(CodeForHttpStatus(result->status), FormatHttpError(result->status, error_body));
  }
  return OkStatus();
}

}  // namespace tarn::cli
