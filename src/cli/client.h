// The CLI's client of tarn's REST API (docs/api.md): talks to the server over its Unix socket
// (the kernel tells the server who we are) or over TCP (plain on loopback, or TLS) with a
// bearer token, names whom an admin acts for, and turns every failure into one Status whose message is the line the CLI
// prints after "tarn: " (the server's diagnostics and the HTTP status, or why the server
// could not be reached). Create() -> any number of calls; one ApiClient is used by one
// thread at a time (it keeps an HTTP connection).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tarn::cli {

inline constexpr char kDefaultServerAddress[] = "127.0.0.1:8088";

struct ServerAddress {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;  // kTcp
  int port = 8088;
  bool tls = false;  // kTcp: https
  std::string path;  // kUnix: the socket file

  // "HOST:PORT" ("[::1]:8088" for an IPv6 address), "https://HOST:PORT", "unix:PATH", as
  // messages name the server.
  std::string ToString() const;
};

// Parses "HOST:PORT", "HOST" (port 8088), "http://HOST:PORT[/]", "https://HOST:PORT[/]" or
// "unix:PATH". Paths after the port are refused with a message that says so.
StatusOr<ServerAddress> ParseServerAddress(std::string_view text);

// Percent-encodes everything but RFC 3986's unreserved characters (A-Z a-z 0-9 - . _ ~), for
// a query value or a path segment.
std::string UrlEncode(std::string_view text);

// Query parameters besides tenant, in order.
using Query = std::vector<std::pair<std::string, std::string>>;

// The one-line message of an error answer: the "diagnostics" of its JSON body (or the body
// itself, or the reason phrase when it has neither), lines joined with "; ", then
// " (HTTP <status>)".
std::string FormatHttpError(int status, std::string_view body);

class ApiClient {
 public:
  struct Options {
    ServerAddress address;
    std::string token;    // sent as "Authorization: Bearer TOKEN" when not empty
    std::string act_as;   // sent as "Impersonate-User" when not empty (admins only)
    std::string ca_file;  // https: the CA that signed the server's certificate; empty: the system's
    std::string tenant;   // sent as ?tenant= when not empty: whose assemblies are addressed
    // To connect (to any of the host's addresses).
    int64_t connect_timeout_ms = 10000;
    // To send a request, and for its whole answer (Stream(): for each piece of it).
    int64_t read_timeout_ms = 120000;
  };

  static std::unique_ptr<ApiClient> Create(Options options);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // Each sends one request to `path` (already encoded, e.g. "/app/v1/services/sleeper") and
  // returns the JSON body of a 2xx answer. Statuses: kUnavailable when the server cannot be
  // reached, kNotFound / kInvalidArgument / kAlreadyExists / ... for 4xx and 5xx answers,
  // kDataLoss for a 2xx body that is not JSON.
  StatusOr<nlohmann::json> Get(std::string_view path, const Query& query = {});
  // A blocking GET (docs/api.md, "Watching an assembly"): with *index > 0, answered once
  // what `path` reads has changed past *index, or after about `wait_ms`; with 0, at once.
  // *index becomes the answer's X-Tarn-Index (0 when it had none: a server that cannot hold
  // reads, to be polled). read_timeout_ms must exceed `wait_ms`.
  StatusOr<nlohmann::json> Watch(std::string_view path, uint64_t* index, int64_t wait_ms);
  StatusOr<nlohmann::json> Post(std::string_view path, const nlohmann::json& body);
  StatusOr<nlohmann::json> Put(std::string_view path, const nlohmann::json& body);
  StatusOr<nlohmann::json> Delete(std::string_view path);

  // GETs `path` and hands the body of a 200 answer to `sink` piece by piece as it arrives
  // (a chunked log follows forever); `sink` returns false to stop. With `no_idle_timeout`
  // the connection may stay silent for days (a followed log that is quiet).
  Status Stream(std::string_view path, const Query& query,
                const std::function<bool(std::string_view)>& sink, bool no_idle_timeout);

  const ServerAddress& address() const { return options_.address; }

 private:
  explicit ApiClient(Options options);

  enum class Method { kGet, kPost, kPut, kDelete };
  // The kept HTTP connection (Boost.Beast; defined in client.cc).
  class Connection;

  // path?tenant=T&k=v...
  std::string Target(std::string_view path, const Query& query) const;
  // Sends one request (with a JSON body where `body` is not null) to `target`.
  // *index, when given: the answer's X-Tarn-Index (0 when absent or not a number).
  StatusOr<nlohmann::json> Call(Method method, const std::string& target,
                                const nlohmann::json* body, uint64_t* index = nullptr);

  Options options_;
  std::unique_ptr<Connection> connection_;
};

}  // namespace tarn::cli
