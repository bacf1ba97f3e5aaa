#include "train/ps_wire.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "common/hmac_sha256.h"

namespace tarn::train {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire format is the host's little-endian layout");

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// writev/readv until every byte of `parts` moved; adjusts a private copy of the iovecs.
template <typename Op>
Status MoveAll(int fd, std::span<const iovec> parts, Op op, const char* what) {
  std::vector<iovec> rest(parts.begin(), parts.end());
  size_t first = 0;
  while (first < rest.size()) {
    if (rest[first].iov_len == 0) {
      ++first;
      continue;
    }
    const int count = static_cast<int>(std::min<size_t>(rest.size() - first, IOV_MAX));
    const ssize_t n = op(fd, rest.data() + first, count);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return DeadlineExceededError(std::string(what) + ": timed out");
      return UnavailableError(Errno(what));
    }
    if (n == 0) return UnavailableError(std::string(what) + ": connection closed by the peer");
    size_t done = static_cast<size_t>(n);
    while (done > 0 && first < rest.size()) {
      const size_t take = std::min(done, rest[first].iov_len);
      rest[first].iov_base = static_cast<char*>(rest[first].iov_base) + take;
      rest[first].iov_len -= take;
      done -= take;
      if (rest[first].iov_len == 0) ++first;
    }
  }
  return OkStatus();
}

}  // namespace

void TuneSocket(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const int buffer = 4 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
}

StatusOr<Connection> Connection::Dial(const std::string& host, int port,
                                      std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    return UnavailableError("cannot resolve " + host + ": " + ::gai_strerror(rc));
  }
  Status last = UnavailableError("no address for " + host);
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    const std::string where = host + ":" + std::to_string(port);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = UnavailableError(Errno("connect " + where));
      ::close(fd);
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
    int error = 0;
    socklen_t size = sizeof error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    if (ready <= 0 || error != 0) {
      last = UnavailableError("connect " + where + ": " +
                              (ready <= 0 ? std::string("timed out") : std::strerror(error)));
      ::close(fd);
      continue;
    }
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    TuneSocket(fd);
    ::freeaddrinfo(found);
    return Connection(fd);
  }
  ::freeaddrinfo(found);
  return last;
}

Connection::Connection(int fd) : fd_(fd) {}
Connection::Connection(Connection&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}
Connection::~Connection() { Close(); }

void Connection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Connection::SetTimeout(std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = timeout.count() / 1000;
  tv.tv_usec = (timeout.count() % 1000) * 1000;
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

Status Connection::Send(MessageType type, uint64_t request, std::span<const iovec> parts) {
  FrameHeader h;
  h.magic = kFrameMagic;
  h.version = kFrameVersion;
  h.type = static_cast<uint16_t>(type);
  h.request = request;
  for (const iovec& p : parts) h.length += p.iov_len;
  std::vector<iovec> all;
  all.reserve(parts.size() + 1);
  all.push_back({&h, sizeof h});
  all.insert(all.end(), parts.begin(), parts.end());
  return MoveAll(
      fd_, all,
      [](int fd, iovec* v, int n) {
        msghdr m{};
        m.msg_iov = v;
        m.msg_iovlen = static_cast<size_t>(n);
        return ::sendmsg(fd, &m, MSG_NOSIGNAL);
      },
      "send");
}

Status Connection::Send(MessageType type, uint64_t request, std::string_view body) {
  iovec part{const_cast<char*>(body.data()), body.size()};
  return Send(type, request, std::span<const iovec>(&part, body.empty() ? 0 : 1));
}

StatusOr<FrameHeader> Connection::ReadHeader() {
  FrameHeader h;
  RETURN_IF_ERROR(Read(&h, sizeof h));
  if (h.magic != kFrameMagic) return InvalidArgumentError("not a tarn-train frame (bad magic)");
  if (h.version != kFrameVersion) {
    return InvalidArgumentError("frame version " + std::to_string(h.version) + ", expected " +
                                std::to_string(kFrameVersion));
  }
  if (h.length > kMaxFrameBody) {
    return InvalidArgumentError("frame body of " + std::to_string(h.length) + " bytes is too big");
  }
  return h;
}

Status Connection::Read(std::span<const iovec> parts) {
  return MoveAll(
      fd_, parts, [](int fd, iovec* v, int n) { return ::readv(fd, v, n); }, "receive");
}

Status Connection::Read(void* data, size_t size) {
  iovec part{data, size};
  return Read(std::span<const iovec>(&part, 1));
}

StatusOr<std::string> Connection::ReadString(size_t size) {
  std::string s(size, '\0');
  RETURN_IF_ERROR(Read(s.data(), size));
  return s;
}

Status Connection::Skip(uint64_t size) {
  char buffer[65536];
  while (size > 0) {
    const size_t n = std::min<uint64_t>(size, sizeof buffer);
    RETURN_IF_ERROR(Read(buffer, n));
    size -= n;
  }
  return OkStatus();
}

namespace {

constexpr size_t kNonceBytes = 32;
constexpr std::string_view kProofContext = "tarn-ps-v2";

std::string Proof(std::string_view secret, std::string_view nonce) {
  std::string message(kProofContext);
  message.append(nonce);
  return DigestBytes(HmacSha256(secret, message));
}

}  // namespace

std::string PeerAddress(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      ::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "an unknown peer";
  }
  return std::string(host) + ":" + port;
}

Status OfferChallenge(Connection& c, std::string_view secret) {
  std::string nonce;
  if (!secret.empty()) {
    nonce.resize(kNonceBytes);
    if (::getrandom(nonce.data(), nonce.size(), 0) != static_cast<ssize_t>(nonce.size())) {
      return InternalError(Errno("getrandom"));
    }
  }
  RETURN_IF_ERROR(c.Send(MessageType::kChallenge, 0, nonce));
  if (secret.empty()) return OkStatus();
  StatusOr<FrameHeader> h = c.ReadHeader();
  if (!h.ok()) return PermissionDeniedError("no answer to the challenge: " + h.status().message());
  if (h->type != static_cast<uint16_t>(MessageType::kProof) || h->length != 32) {
    return PermissionDeniedError("its first frame (type " + std::to_string(h->type) +
                                 ") is no answer to the challenge: it does not speak for the "
                                 "assembly");
  }
  ASSIGN_OR_RETURN(std::string proof, c.ReadString(32));
  if (!ConstantTimeEquals(proof, Proof(secret, nonce))) {
    return PermissionDeniedError("its answer to the challenge is wrong: it does not hold the "
                                 "assembly's secret");
  }
  return OkStatus();
}

Status AnswerChallenge(Connection& c, std::string_view secret) {
  ASSIGN_OR_RETURN(FrameHeader h, c.ReadHeader());
  if (h.type != static_cast<uint16_t>(MessageType::kChallenge) || h.length > 1024) {
    return InvalidArgumentError("the parameter server did not open with its challenge (type " +
                                std::to_string(h.type) + ")");
  }
  ASSIGN_OR_RETURN(std::string nonce, c.ReadString(h.length));
  if (nonce.empty()) return OkStatus();  // a ps without a secret admits anyone
  if (secret.empty()) {
    return FailedPreconditionError(
        "the parameter server admits only the processes of its assembly, and this one has no "
        "secret ($TARN_ASSEMBLY_SECRET is unset: run it in the assembly, or give it the same "
        "secret)");
  }
  return c.Send(MessageType::kProof, 0, Proof(secret, nonce));
}

StatusOr<int> Listen(const std::string& host, int port, int* bound_port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(),
                               &hints, &found);
  if (rc != 0) return InvalidArgumentError("cannot resolve " + host + ": " + ::gai_strerror(rc));
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ::freeaddrinfo(found);
    return UnavailableError(Errno("socket"));
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const std::string where = host + ":" + std::to_string(port);
  if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
    Status s = UnavailableError(Errno("listen on " + where));
    ::freeaddrinfo(found);
    ::close(fd);
    return s;
  }
  ::freeaddrinfo(found);
  sockaddr_storage bound{};
  socklen_t size = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &size);
  *bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return fd;
}

}  // namespace tarn::train
