#include "registry/dns_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "registry/dns_message.h"
#include "registry/dns_responder.h"

namespace tarn::registry {
namespace {

constexpr size_t kUdpBatch = 32;
constexpr size_t kUdpReceiveSize = kMaxUdpLimit;  // larger datagrams are dropped as malformed
constexpr int kUdpSocketBuffer = 4 << 20;
constexpr size_t kTcpReadChunk = 64 << 10;
// A client that sends queries without reading the answers is not read from until it does.
constexpr size_t kTcpMaxPendingOut = 256 << 10;
constexpr int kTcpEpollEvents = 64;
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
constexpr size_t kRcodeSlots = 17;

using SteadyClock = std::chrono::steady_clock;

// Written only by the thread that owns the block, read by counters() from any thread: a
// relaxed load and store (no locked read-modify-write) is enough.
void Bump(std::atomic<uint64_t>& counter, uint64_t by = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

struct DnsServer::CounterBlock {
  alignas(64) std::array<std::atomic<uint64_t>, kRcodeSlots> by_rcode{};
  std::atomic<uint64_t> udp_queries{0};
  std::atomic<uint64_t> tcp_queries{0};
  std::atomic<uint64_t> malformed{0};
  std::atomic<uint64_t> truncated{0};
  std::atomic<uint64_t> tcp_connections{0};
  std::atomic<uint64_t> tcp_connections_open{0};
  std::atomic<uint64_t> tcp_connections_rejected{0};
  std::atomic<uint64_t> tcp_connections_idle_closed{0};

  void Count(const Response& r, Transport transport) {
    if (r.dropped) {
      Bump(malformed);
      return;
    }
    Bump(by_rcode[std::min<size_t>(static_cast<size_t>(r.rcode), kRcodeSlots - 1)]);
    Bump(transport == Transport::kUdp ? udp_queries : tcp_queries);
    if (r.truncated) Bump(truncated);
  }
};

struct DnsServer::TcpConnection {
  int fd = -1;
  std::vector<uint8_t> in;   // bytes received, not yet answered
  std::vector<uint8_t> out;  // framed answers not yet sent, from out_pos
  size_t out_pos = 0;
  SteadyClock::time_point last_active;
  bool peer_closed = false;
  uint32_t events = 0;  // the epoll interest registered now

  size_t pending() const { return out.size() - out_pos; }
};

// The TCP thread's state: the epoll set and the open connections.
class DnsServer::TcpLoop {
 public:
  TcpLoop(DnsServer& server, CounterBlock& counters)
      : server_(server),
        counters_(counters),
        query_(std::make_unique<Query>()),
        scratch_(kMaxMessage),
        read_buf_(kTcpReadChunk) {}

  void Run() {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return;
    Watch(server_.stop_fd_, EPOLLIN, EPOLL_CTL_ADD);
    Watch(server_.tcp_fd_, EPOLLIN, EPOLL_CTL_ADD);
    const auto idle = server_.options_.tcp_idle_timeout;
    const int tick_ms = static_cast<int>(std::clamp<int64_t>(idle.count() / 4, 10, 1000));
    SteadyClock::time_point last_sweep = SteadyClock::now();
    epoll_event events[kTcpEpollEvents];
    while (!server_.stopping_.load(std::memory_order_relaxed)) {
      const int n = epoll_wait(epoll_fd_, events, kTcpEpollEvents, tick_ms);
      now_ = SteadyClock::now();
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == server_.stop_fd_) continue;
        if (fd == server_.tcp_fd_) {
          Accept();
          continue;
        }
        const auto it = connections_.find(fd);
        if (it != connections_.end() && !Serve(*it->second, events[i].events)) Close(it);
      }
      if (now_ - last_sweep >= std::chrono::milliseconds(tick_ms)) {
        last_sweep = now_;
        SweepIdle(idle);
        if (!accepting_ && now_ >= resume_accept_) {
          accepting_ = true;
          Watch(server_.tcp_fd_, EPOLLIN, EPOLL_CTL_ADD);
        }
      }
    }
    for (auto& [fd, connection] : connections_) close(fd);
    connections_.clear();
    counters_.tcp_connections_open.store(0, std::memory_order_relaxed);
    close(epoll_fd_);
  }

 private:
  using Connections = std::unordered_map<int, std::unique_ptr<TcpConnection>>;

  void Watch(int fd, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, op, fd, &ev);
  }

  void Accept() {
    for (;;) {
      const int fd = accept4(server_.tcp_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: the listening socket would stay readable and spin the loop.
          accepting_ = false;
          resume_accept_ = now_ + kAcceptPause;
          epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, server_.tcp_fd_, nullptr);
        }
        return;
      }
      if (connections_.size() >= static_cast<size_t>(server_.options_.max_tcp_connections)) {
        Bump(counters_.tcp_connections_rejected);  // before the client can see the close
        close(fd);
        continue;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      auto connection = std::make_unique<TcpConnection>();
      connection->fd = fd;
      connection->last_active = now_;
      connection->events = EPOLLIN;
      Watch(fd, EPOLLIN, EPOLL_CTL_ADD);
      connections_.emplace(fd, std::move(connection));
      Bump(counters_.tcp_connections);
      counters_.tcp_connections_open.store(connections_.size(), std::memory_order_relaxed);
    }
  }

  // Reads, answers and writes what the events allow; false when the connection is done.
  bool Serve(TcpConnection& c, uint32_t events) {
    if (events & EPOLLERR) return false;
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) && !c.peer_closed) {
      const ssize_t n = recv(c.fd, read_buf_.data(), read_buf_.size(), 0);
      if (n > 0) {
        c.in.insert(c.in.end(), read_buf_.begin(), read_buf_.begin() + n);
        c.last_active = now_;
      } else if (n == 0) {
        c.peer_closed = true;  // it may still read the answers to what it sent
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return false;
      }
    }
    // Answering stops at kTcpMaxPendingOut; go on while the socket takes everything.
    do {
      AnswerFrames(c);
      if (!Flush(c)) return false;
    } while (c.pending() == 0 && HasCompleteFrame(c));
    if (c.peer_closed && c.pending() == 0) return false;
    uint32_t want = 0;
    if (!c.peer_closed && c.pending() < kTcpMaxPendingOut) want |= EPOLLIN;
    if (c.pending() > 0) want |= EPOLLOUT;
    if (want != c.events) {
      c.events = want;
      Watch(c.fd, want, EPOLL_CTL_MOD);
    }
    return true;
  }

  static bool HasCompleteFrame(const TcpConnection& c) {
    return c.in.size() >= 2 && c.in.size() - 2 >= (static_cast<size_t>(c.in[0]) << 8 | c.in[1]);
  }

  void AnswerFrames(TcpConnection& c) {
    size_t p = 0;
    while (c.in.size() - p >= 2 && c.pending() < kTcpMaxPendingOut) {
      const size_t length = static_cast<size_t>(c.in[p]) << 8 | c.in[p + 1];
      if (c.in.size() - p - 2 < length) break;
      const Response r = Respond(*server_.options_.registry, {c.in.data() + p + 2, length},
                                 Transport::kTcp, query_.get(), scratch_);
      p += 2 + length;
      counters_.Count(r, Transport::kTcp);
      if (r.dropped) continue;
      c.out.push_back(static_cast<uint8_t>(r.size >> 8));
      c.out.push_back(static_cast<uint8_t>(r.size));
      c.out.insert(c.out.end(), scratch_.begin(), scratch_.begin() + r.size);
    }
    c.in.erase(c.in.begin(), c.in.begin() + p);
  }

  bool Flush(TcpConnection& c) {
    while (c.pending() > 0) {
      const ssize_t n = send(c.fd, c.out.data() + c.out_pos, c.pending(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out_pos += n;
        c.last_active = now_;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        return false;
      }
    }
    if (c.pending() == 0) {
      c.out.clear();
      c.out_pos = 0;
    }
    return true;
  }

  void SweepIdle(std::chrono::milliseconds idle) {
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (now_ - it->second->last_active > idle) {
        Bump(counters_.tcp_connections_idle_closed);
        it = Close(it);
      } else {
        ++it;
      }
    }
  }

  Connections::iterator Close(Connections::iterator it) {
    close(it->first);  // also leaves the epoll set
    auto next = connections_.erase(it);
    counters_.tcp_connections_open.store(connections_.size(), std::memory_order_relaxed);
    return next;
  }

  DnsServer& server_;
  CounterBlock& counters_;
  std::unique_ptr<Query> query_;
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> read_buf_;
  int epoll_fd_ = -1;
  Connections connections_;
  SteadyClock::time_point now_;
  bool accepting_ = true;
  SteadyClock::time_point resume_accept_;
};

uint64_t DnsServer::Counters::queries() const {
  uint64_t total = 0;
  for (uint64_t n : queries_by_rcode) total += n;
  return total;
}

DnsServer::DnsServer(Options options) : options_(std::move(options)) {
  if (options_.udp_threads <= 0) {
    options_.udp_threads =
        static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  }
  for (int i = 0; i < options_.udp_threads + 1; ++i) {
    counters_.push_back(std::make_unique<CounterBlock>());
  }
}

DnsServer::~DnsServer() { Stop(); }

Status DnsServer::Start() {
  if (started_) return FailedPreconditionError("dns server: Start() called twice");
  if (options_.registry == nullptr) return InvalidArgumentError("dns server: no registry");
  addrinfo hints{};
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(options_.host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return InvalidArgumentError("dns server: \"" + options_.host + "\" is not an IP address");
  }
  sockaddr_storage address{};
  const socklen_t address_size = found->ai_addrlen;
  std::memcpy(&address, found->ai_addr, found->ai_addrlen);
  const int family = found->ai_family;
  freeaddrinfo(found);
  auto set_port = [&](uint16_t port) {
    if (family == AF_INET6) {
      reinterpret_cast<sockaddr_in6*>(&address)->sin6_port = htons(port);
    } else {
      reinterpret_cast<sockaddr_in*>(&address)->sin_port = htons(port);
    }
  };
  const std::string where = "dns server: bind " + options_.host + ":";

  // With port 0, the kernel's free TCP port may be taken for UDP: try a few.
  const int attempts = options_.port == 0 ? 16 : 1;
  Status failure;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    set_port(options_.port);
    const int tcp = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (tcp < 0) return UnavailableError("dns server: socket: " + ErrnoText(errno));
    const int one = 1;
    setsockopt(tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(tcp, reinterpret_cast<sockaddr*>(&address), address_size) != 0 ||
        listen(tcp, SOMAXCONN) != 0) {
      failure =
          UnavailableError(where + std::to_string(options_.port) + " (tcp): " + ErrnoText(errno));
      close(tcp);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t bound_size = sizeof(bound);
    getsockname(tcp, reinterpret_cast<sockaddr*>(&bound), &bound_size);
    const uint16_t port =
        ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                 : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    set_port(port);
    const int udp = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (udp < 0) {
      close(tcp);
      return UnavailableError("dns server: socket: " + ErrnoText(errno));
    }
    if (bind(udp, reinterpret_cast<sockaddr*>(&address), address_size) != 0) {
      failure = UnavailableError(where + std::to_string(port) + " (udp): " + ErrnoText(errno));
      close(udp);
      close(tcp);
      continue;
    }
    // Best effort: bursts from a load generator outrun one thread's batch.
    setsockopt(udp, SOL_SOCKET, SO_RCVBUF, &kUdpSocketBuffer, sizeof(kUdpSocketBuffer));
    setsockopt(udp, SOL_SOCKET, SO_SNDBUF, &kUdpSocketBuffer, sizeof(kUdpSocketBuffer));
    tcp_fd_ = tcp;
    udp_fd_ = udp;
    port_ = port;
    break;
  }
  if (tcp_fd_ < 0) return failure;
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) {
    Status error = UnavailableError("dns server: eventfd: " + ErrnoText(errno));
    close(tcp_fd_);
    close(udp_fd_);
    tcp_fd_ = udp_fd_ = -1;
    return error;
  }
  if (!options_.upstreams.empty()) {
    forwarder_ = std::make_unique<DnsForwarder>(DnsForwarder::Options{options_.upstreams});
    if (Status s = forwarder_->Start(); !s.ok()) {
      forwarder_.reset();
      close(tcp_fd_);
      close(udp_fd_);
      close(stop_fd_);
      tcp_fd_ = udp_fd_ = stop_fd_ = -1;
      return s;
    }
  }
  started_ = true;
  for (int i = 0; i < options_.udp_threads; ++i) {
    threads_.emplace_back([this, i] { ServeUdp(counters_[i].get()); });
  }
  threads_.emplace_back([this] {
    TcpLoop loop(*this, *counters_.back());
    loop.Run();
  });
  return OkStatus();
}

void DnsServer::Stop() {
  if (!started_ || stopping_.exchange(true)) return;
  const uint64_t one = 1;
  // The eventfd stays readable (nobody reads it), waking every thread's poll.
  [[maybe_unused]] const ssize_t n = write(stop_fd_, &one, sizeof(one));
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  if (forwarder_) forwarder_->Stop();  // it answers on udp_fd_
  close(udp_fd_);
  close(tcp_fd_);
  close(stop_fd_);
  udp_fd_ = tcp_fd_ = stop_fd_ = -1;
}

void DnsServer::ServeUdp(CounterBlock* counters) {
  struct Slot {
    std::array<uint8_t, kUdpReceiveSize> in;
    std::array<uint8_t, kMaxUdpLimit> out;
    sockaddr_storage peer;
    iovec in_iov;
    iovec out_iov;
  };
  auto slots = std::make_unique<Slot[]>(kUdpBatch);
  auto query = std::make_unique<Query>();
  std::array<mmsghdr, kUdpBatch> rx{};
  std::array<mmsghdr, kUdpBatch> tx{};
  for (size_t i = 0; i < kUdpBatch; ++i) {
    slots[i].in_iov = {slots[i].in.data(), slots[i].in.size()};
    rx[i].msg_hdr.msg_iov = &slots[i].in_iov;
    rx[i].msg_hdr.msg_iovlen = 1;
    rx[i].msg_hdr.msg_name = &slots[i].peer;
  }
  while (!stopping_.load(std::memory_order_relaxed)) {
    for (size_t i = 0; i < kUdpBatch; ++i) {
      rx[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
      rx[i].msg_hdr.msg_flags = 0;
    }
    const int n = recvmmsg(udp_fd_, rx.data(), kUdpBatch, MSG_DONTWAIT, nullptr);
    if (n <= 0) {
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd fds[2] = {{udp_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
        poll(fds, 2, -1);
      }
      continue;  // EINTR, or an ICMP error left by an earlier send: nothing to answer
    }
    size_t replies = 0;
    for (int i = 0; i < n; ++i) {
      Slot& slot = slots[i];
      if (rx[i].msg_hdr.msg_flags & MSG_TRUNC) {
        Bump(counters->malformed);
        continue;
      }
      const Response r = Respond(*options_.registry, {slot.in.data(), rx[i].msg_len},
                                 Transport::kUdp, query.get(), slot.out);
      if (r.outside_zone && forwarder_ != nullptr &&
          forwarder_->Forward({slot.in.data(), rx[i].msg_len}, slot.peer, rx[i].msg_hdr.msg_namelen,
                              udp_fd_)) {
        continue;  // the forwarder relays the upstream's answer
      }
      counters->Count(r, Transport::kUdp);
      if (r.dropped) continue;
      slot.out_iov = {slot.out.data(), r.size};
      msghdr& h = tx[replies++].msg_hdr;
      h = msghdr{};
      h.msg_name = &slot.peer;
      h.msg_namelen = rx[i].msg_hdr.msg_namelen;
      h.msg_iov = &slot.out_iov;
      h.msg_iovlen = 1;
    }
    for (size_t sent = 0; sent < replies;) {
      const int k = sendmmsg(udp_fd_, tx.data() + sent, static_cast<unsigned>(replies - sent), 0);
      if (k > 0) {
        sent += static_cast<size_t>(k);
      } else if (k < 0 && errno == EINTR) {
        continue;
      } else {
        ++sent;  // this peer cannot be sent to (e.g. unreachable): skip it, not the rest
      }
    }
  }
}

DnsServer::Counters DnsServer::counters() const {
  Counters c;
  for (const auto& block : counters_) {
    for (size_t i = 0; i < kRcodeSlots; ++i) {
      c.queries_by_rcode[i] += block->by_rcode[i].load(std::memory_order_relaxed);
    }
    c.udp_queries += block->udp_queries.load(std::memory_order_relaxed);
    c.tcp_queries += block->tcp_queries.load(std::memory_order_relaxed);
    c.malformed += block->malformed.load(std::memory_order_relaxed);
    c.truncated += block->truncated.load(std::memory_order_relaxed);
    c.tcp_connections += block->tcp_connections.load(std::memory_order_relaxed);
    c.tcp_connections_open += block->tcp_connections_open.load(std::memory_order_relaxed);
    c.tcp_connections_rejected += block->tcp_connections_rejected.load(std::memory_order_relaxed);
    c.tcp_connections_idle_closed +=
        block->tcp_connections_idle_closed.load(std::memory_order_relaxed);
  }
  if (forwarder_) c.forwarder = forwarder_->counters();
  return c;
}

std::string DnsServer::PrometheusText() const { return DnsPrometheusText({{"", counters()}}); }

std::string DnsPrometheusText(
    const std::vector<std::pair<std::string, DnsServer::Counters>>& listeners) {
  std::string out;
  // One family at a time (HELP and TYPE once), one sample per listener.
  auto family =
      [&](const char* name, const char* type, const char* help,
          const std::function<void(const std::string& labels, const DnsServer::Counters&)>&
              samples) {
        out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
        for (const auto& [listener, c] : listeners) {
          samples(listener.empty() ? "" : "listener=\"" + listener + "\"", c);
        }
      };
  // A family with one unlabelled sample per listener, read by `value`.
  using Getter = std::function<uint64_t(const DnsServer::Counters&)>;
  auto simple = [&](const char* name, const char* type, const char* help, const Getter& value) {
    family(name, type, help, [&](const std::string& labels, const DnsServer::Counters& c) {
      out += std::string(name) + (labels.empty() ? "" : "{" + labels + "}") + " " +
             std::to_string(value(c)) + "\n";
    });
  };
  auto field = [](uint64_t DnsServer::Counters::*f) -> Getter {
    return [f](const DnsServer::Counters& c) { return c.*f; };
  };
  auto forwarder = [](uint64_t DnsForwarder::Counters::*f) -> Getter {
    return [f](const DnsServer::Counters& c) { return c.forwarder.*f; };
  };
  family("tarn_dns_queries_total", "counter", "DNS queries answered, by response code.",
         [&](const std::string& labels, const DnsServer::Counters& c) {
           for (Rcode rcode : kAllRcodes) {
             out += "tarn_dns_queries_total{rcode=\"" + RcodeName(rcode) + "\"" +
                    (labels.empty() ? "" : "," + labels) + "} " +
                    std::to_string(c.QueriesWith(rcode)) + "\n";
           }
         });
  family("tarn_dns_transport_queries_total", "counter", "DNS queries answered, by transport.",
         [&](const std::string& labels, const DnsServer::Counters& c) {
           const std::string more = labels.empty() ? "" : "," + labels;
           out += "tarn_dns_transport_queries_total{transport=\"udp\"" + more + "} " +
                  std::to_string(c.udp_queries) + "\n";
           out += "tarn_dns_transport_queries_total{transport=\"tcp\"" + more + "} " +
                  std::to_string(c.tcp_queries) + "\n";
         });
  simple("tarn_dns_malformed_total", "counter",
         "Packets dropped unanswered: shorter than a header, a response, or a cut datagram.",
         field(&DnsServer::Counters::malformed));
  simple("tarn_dns_truncated_total", "counter",
         "UDP answers sent truncated (TC) for the client to retry over TCP.",
         field(&DnsServer::Counters::truncated));
  simple("tarn_dns_tcp_connections_total", "counter", "TCP connections accepted.",
         field(&DnsServer::Counters::tcp_connections));
  simple("tarn_dns_tcp_connections_rejected_total", "counter",
         "TCP connections closed at once because the maximum were open.",
         field(&DnsServer::Counters::tcp_connections_rejected));
  simple("tarn_dns_tcp_connections_idle_closed_total", "counter",
         "TCP connections closed after the idle timeout.",
         field(&DnsServer::Counters::tcp_connections_idle_closed));
  simple("tarn_dns_tcp_connections_open", "gauge", "TCP connections open now.",
         field(&DnsServer::Counters::tcp_connections_open));
  simple("tarn_dns_forwarded_total", "counter",
         "UDP queries for names outside the domain sent to an upstream.",
         forwarder(&DnsForwarder::Counters::forwarded));
  simple("tarn_dns_forward_answers_total", "counter", "Upstream answers relayed to clients.",
         forwarder(&DnsForwarder::Counters::answered));
  simple("tarn_dns_forward_timeouts_total", "counter",
         "Forwarded queries no upstream answered in time.",
         forwarder(&DnsForwarder::Counters::timed_out));
  simple("tarn_dns_forward_rejected_total", "counter",
         "Queries not forwarded because too many were waiting (answered REFUSED).",
         forwarder(&DnsForwarder::Counters::rejected));
  return out;
}

}  // namespace tarn::registry
