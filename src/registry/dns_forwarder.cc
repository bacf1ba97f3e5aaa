#include "registry/dns_forwarder.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tarn::registry {
namespace {

constexpr size_t kMaxAnswer = 65535;

uint16_t IdOf(std::span<const uint8_t> m) { return static_cast<uint16_t>(m[0] << 8 | m[1]); }
void SetId(std::span<uint8_t> m, uint16_t id) {
  m[0] = static_cast<uint8_t>(id >> 8);
  m[1] = static_cast<uint8_t>(id & 0xff);
}

bool SameAddress(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
  const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
  return x.sin6_port == y.sin6_port && std::memcmp(&x.sin6_addr, &y.sin6_addr, 16) == 0;
}

}  // namespace

StatusOr<UpstreamAddress> ParseUpstream(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("DNS upstream \"" + text + "\": " + why);
  };
  std::string host = text;
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) return bad("missing ]");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return bad("expected :PORT after ]");
      port_text = text.substr(close + 2);
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    host = text.substr(0, text.find(':'));
    port_text = text.substr(text.find(':') + 1);
  }
  int port = 53;
  if (!port_text.empty() || text.ends_with(":")) {
    if (port_text.empty() || port_text.size() > 5 ||
        !std::all_of(port_text.begin(), port_text.end(), ::isdigit)) {
      return bad("the port must be a number");
    }
    port = std::stoi(port_text);
    if (port < 1 || port > 65535) return bad("the port must be 1..65535");
  }
  UpstreamAddress u;
  u.text = text;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&u.address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&u.address);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    u.size = sizeof(sockaddr_in);
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    u.size = sizeof(sockaddr_in6);
  } else {
    return bad("expected a numeric IPv4 or IPv6 address, optionally with :PORT");
  }
  return u;
}

DnsForwarder::DnsForwarder(Options options)
    : options_(std::move(options)), ids_(std::random_device{}()) {}

DnsForwarder::~DnsForwarder() { Stop(); }

Status DnsForwarder::Start() {
  if (options_.upstreams.empty()) return InvalidArgumentError("DNS forwarder: no upstream");
  for (const std::string& text : options_.upstreams) {
    ASSIGN_OR_RETURN(UpstreamAddress u, ParseUpstream(text));
    upstreams_.push_back(std::move(u));
  }
  for (const UpstreamAddress& u : upstreams_) {
    int& fd = u.address.ss_family == AF_INET ? socket4_ : socket6_;
    if (fd >= 0) continue;
    fd = ::socket(u.address.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      return UnavailableError("DNS forwarder: socket: " + std::string(std::strerror(errno)));
    }
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) {
    return UnavailableError("DNS forwarder: eventfd: " + std::string(std::strerror(errno)));
  }
  thread_ = std::thread([this] { Run(); });
  return OkStatus();
}

void DnsForwarder::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof(one));
    thread_.join();
  }
  for (int* fd : {&socket4_, &socket6_, &stop_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

int DnsForwarder::SocketFor(const UpstreamAddress& u) const {
  return u.address.ss_family == AF_INET ? socket4_ : socket6_;
}

bool DnsForwarder::SendUpstream(const Pending& p) {
  const UpstreamAddress& u = upstreams_[p.upstream];
  const ssize_t n = ::sendto(SocketFor(u), p.query.data(), p.query.size(), 0,
                             reinterpret_cast<const sockaddr*>(&u.address), u.size);
  return n == static_cast<ssize_t>(p.query.size());
}

bool DnsForwarder::Forward(std::span<const uint8_t> query, const sockaddr_storage& client,
                           socklen_t client_size, int reply_fd) {
  if (query.size() < 12 || !thread_.joinable()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.size() >= options_.max_pending) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  uint16_t id;
  do {
    id = static_cast<uint16_t>(ids_());
  } while (pending_.contains(id));
  Pending p;
  p.query.assign(query.begin(), query.end());
  p.client_id = IdOf(query);
  SetId(p.query, id);
  p.client = client;
  p.client_size = client_size;
  p.reply_fd = reply_fd;
  p.deadline = std::chrono::steady_clock::now() + options_.timeout;
  // A send that fails at once (say, no route) is treated as a timeout: the next upstream
  // gets it when the deadline passes.
  SendUpstream(p);
  pending_.emplace(id, std::move(p));
  forwarded_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void DnsForwarder::Run() {
  while (true) {
    pollfd fds[3];
    nfds_t n = 0;
    fds[n++] = {stop_fd_, POLLIN, 0};
    if (socket4_ >= 0) fds[n++] = {socket4_, POLLIN, 0};
    if (socket6_ >= 0) fds[n++] = {socket6_, POLLIN, 0};
    // A tenth of the timeout: expiry is that late at most.
    const int wait = static_cast<int>(std::max<int64_t>(10, options_.timeout.count() / 10));
    if (::poll(fds, n, wait) < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) break;
    for (nfds_t i = 1; i < n; ++i) {
      if (fds[i].revents & POLLIN) Receive(fds[i].fd);
    }
    Expire();
  }
}

void DnsForwarder::Receive(int fd) {
  std::vector<uint8_t> buffer(kMaxAnswer);
  while (true) {
    sockaddr_storage from{};
    socklen_t from_size = sizeof(from);
    const ssize_t got = ::recvfrom(fd, buffer.data(), buffer.size(), 0,
                                   reinterpret_cast<sockaddr*>(&from), &from_size);
    if (got < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN, or an ICMP error an earlier send left
    }
    if (got < 12) {
      spoofed_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    std::span<uint8_t> answer(buffer.data(), static_cast<size_t>(got));
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(IdOf(answer));
      if (it == pending_.end() || !SameAddress(from, upstreams_[it->second.upstream].address)) {
        spoofed_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      p = std::move(it->second);
      pending_.erase(it);
    }
    SetId(answer, p.client_id);
    // Counted first: a client that got its answer finds it counted.
    answered_.fetch_add(1, std::memory_order_relaxed);
    ::sendto(p.reply_fd, answer.data(), answer.size(), 0,
             reinterpret_cast<const sockaddr*>(&p.client), p.client_size);
  }
}

void DnsForwarder::Expire() {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    if (p.deadline > now) {
      ++it;
      continue;
    }
    if (p.upstream + 1 < upstreams_.size()) {
      ++p.upstream;
      p.deadline = now + options_.timeout;
      SendUpstream(p);
      ++it;
    } else {
      timed_out_.fetch_add(1, std::memory_order_relaxed);
      it = pending_.erase(it);
    }
  }
}

DnsForwarder::Counters DnsForwarder::counters() const {
  Counters c;
  c.forwarded = forwarded_.load(std::memory_order_relaxed);
  c.answered = answered_.load(std::memory_order_relaxed);
  c.timed_out = timed_out_.load(std::memory_order_relaxed);
  c.rejected = rejected_.load(std::memory_order_relaxed);
  c.spoofed = spoofed_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace tarn::registry
