// http::Server: the one HTTP/1.1 server of tarn's binaries (the API of `tarn server`, and
// tarn-serve), event-driven on Boost.Beast/Asio: a connection costs a socket, a buffer and
// a timer, never a thread, so idle or slow clients cannot starve the others.
//
// Per connection: the request head must arrive within header_timeout (counted from the
// accept, or on a kept-alive connection from the head's first byte; between requests the
// connection may idle for idle_timeout), the body within body_timeout; heads over
// max_header_bytes get 431, bodies over max_body_bytes 413 (before the body is read when
// Content-Length says so), malformed requests 400. Such an error answer is followed by a
// lingering close, as nginx's: the server stops sending, then reads and drops what the
// client still sends for up to linger_timeout, so that a client busy sending a large body
// reads the answer instead of a reset. "Expect: 100-continue" is answered. At most
// max_connections are open at once; one more is answered 503 and closed.
//
// Each I/O thread runs an event loop of its own, and connections are dealt to them in turn:
// a connection's handlers always run on one thread, and no lock is shared between them.
// The handler runs on an I/O thread and must not block: work that waits (a batch, the
// service loop) goes elsewhere and calls the Responder later, from any thread, exactly
// once. A response may be streamed (chunked), pulled from a BodyStream on the I/O thread.
// Drain() is the graceful stop of SIGTERM: no new connections, idle ones closed, requests
// in flight answered (with "Connection: close"), streams ended, then the threads end.
//
// Listeners: TCP (plain, or TLS when the listener names a certificate and key: the handshake
// must end within header_timeout), or a Unix-domain socket whose peers' credentials
// (SO_PEERCRED, taken once at accept) come with each request. One Server has one listener.
// The session code is one template over the stream.
//
// REQUIRES: Create() -> Start() -> Drain() -> destruction (destruction alone also stops).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "common/status.h"

namespace tarn::http {

// Who is at the other end of a Unix-domain socket, as the kernel says (never the client).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

struct Request {
  std::string method;  // "GET", "HEAD", "POST", ... as sent
  std::string target;  // path and query, as sent (not decoded)
  std::string content_type;
  std::string body;
  std::string peer;  // the client's address, "127.0.0.1:40312", or "unix" on a Unix socket
  std::optional<PeerCredentials> credentials;  // a Unix-socket peer's
  bool tls = false;                            // it came over TLS
  // The headers a server that authenticates needs, as sent ("" when absent): who the
  // client is ("Bearer TOKEN"), and whom it asks to act for (Kubernetes' Impersonate-User).
  std::string authorization;
  std::string impersonate_user;
  // The Cookie header (the dashboard's session) and X-Tarn-CSRF, which a page of another
  // site cannot send without the server's leave (CORS, which tarn never gives).
  std::string cookie;
  std::string csrf;
  // A slot the connection keeps for its handler from one request to the next (what it
  // learned of the connection: who authenticated on it). Valid while the handler is called
  // (on the connection's I/O thread), never after; the handler alone decides its type.
  std::shared_ptr<void>* connection_memo = nullptr;
};

// The body of a streamed (chunked) response, pulled on the connection's I/O thread.
class BodyStream {
 public:
  enum class Next { kData, kWait, kEnd };
  virtual ~BodyStream() = default;
  // kData: `chunk` holds the next bytes (not empty). kWait: nothing yet; asked again after
  // poll_interval(). kEnd: the body is complete. Must not block for long.
  virtual Next Pull(std::string* chunk) = 0;
  virtual std::chrono::milliseconds poll_interval() const { return std::chrono::milliseconds(200); }
};

struct Response {
  Response() = default;
  Response(int s, std::string type, std::string text)
      : status(s), content_type(std::move(type)), body(std::move(text)) {}

  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // besides the ones the server sets
  std::shared_ptr<BodyStream> stream;  // when set: a chunked body from it; `body` is unused
};

using Responder = std::function<void(Response)>;
using Handler = std::function<void(Request request, Responder respond)>;
// The answer the server itself gives (400, 408, 413, 431, 503) with its reason.
using ErrorRenderer = std::function<Response(int status, const std::string& message)>;

struct Listener {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  // kTcp
  std::string host = "0.0.0.0";
  int port = 0;  // 0: any free port (Server::port() tells which)
  // Both set: TLS (1.2 or later) with this certificate chain and private key (PEM files).
  std::string tls_cert_file;
  std::string tls_key_file;
  // kUnix: the socket file. A file left by a server that is gone is replaced; one a live
  // server listens on is an error. The file gets `mode` (who may connect) and is removed
  // when the Server is destroyed.
  std::string path;
  mode_t mode = 0666;

  static Listener Unix(std::string path, mode_t mode = 0666);
  bool tls() const { return kind == Kind::kTcp && !tls_cert_file.empty(); }
  // "127.0.0.1:8088", "[::1]:8088", "https://127.0.0.1:8443", "unix:/run/tarn.sock"
  std::string ToString() const;
};

class Server {
 public:
  struct Options {
    Listener listen;
    std::string server_header = "tarn";
    int threads = 1;  // I/O threads
    size_t max_header_bytes = 16 << 10;
    size_t max_body_bytes = 16u << 20;
    std::chrono::milliseconds header_timeout{10000};
    std::chrono::milliseconds body_timeout{30000};
    std::chrono::milliseconds idle_timeout{60000};
    std::chrono::milliseconds write_timeout{30000};
    std::chrono::milliseconds linger_timeout{5000};
    size_t max_connections = 1024;
    ErrorRenderer render_error;  // empty: {"error": MESSAGE}
  };

  // Binds and listens (the port is known then); serves from Start().
  static StatusOr<std::unique_ptr<Server>> Create(Options options, Handler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;  // 0 for a Unix socket
  void Start();
  // Returns once every connection is closed, or after `deadline`: then the ones left are cut,
  // and their number returned (0: every request was answered).
  size_t Drain(std::chrono::milliseconds deadline);

  // Connections open now; for /metrics.
  size_t open_connections() const;
  // Connections refused at max_connections since Create().
  uint64_t refused_connections() const;

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "%41b+c" -> "Ab c" with `plus_is_space` (a query), "Ab+c" without (a path).
std::string PercentDecode(std::string_view text, bool plus_is_space);

}  // namespace tarn::http
