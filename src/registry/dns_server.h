// DnsServer: tarn's authoritative DNS server. It answers the registry's names (see
// registry.h) on UDP and TCP of one port: UDP per RFC 1035 with EDNS0 sizes and truncation,
// TCP per RFC 7766 (2-byte length framing, several queries per connection, answered in
// order, idle connections closed). Malformed packets are dropped and counted.
//
// REQUIRES: Start() at most once, then Stop() (the destructor stops too). counters() and
// PrometheusText() may be called from any thread at any time. Serving runs on the server's
// own threads: `udp_threads` threads share the UDP socket and answer batches of datagrams
// (recvmmsg/sendmmsg); one thread multiplexes every TCP connection with epoll. Each thread
// keeps its own counters; no lock is held while sending.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "registry/dns_forwarder.h"
#include "registry/registry.h"
#include "registry/resource_record.h"

namespace tarn::registry {

class DnsServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";      // numeric IPv4 or IPv6 address to bind
    uint16_t port = 0;                   // 0: any free port, the same for UDP and TCP; see port()
    const Registry* registry = nullptr;  // not owned; must outlive the server
    int udp_threads = 0;                 // 0: one per core, at most 4
    int max_tcp_connections = 256;       // beyond it, new connections are closed at once
    std::chrono::milliseconds tcp_idle_timeout{10000};  // RFC 7766 6.2.3: seconds, not minutes
    // Where UDP queries for names outside the registry's domain go (dns_forwarder.h);
    // empty: they are REFUSED. Over TCP they are always REFUSED.
    std::vector<std::string> upstreams;
  };

  // Totals since Start(), summed over the serving threads.
  struct Counters {
    std::array<uint64_t, 17> queries_by_rcode{};  // answered queries, indexed by Rcode value
    uint64_t udp_queries = 0;                     // answered over UDP
    uint64_t tcp_queries = 0;                     // answered over TCP
    uint64_t malformed = 0;        // dropped unanswered: under 12 bytes, a response, a cut datagram
    uint64_t truncated = 0;        // UDP answers sent with TC (the client retries over TCP)
    uint64_t tcp_connections = 0;  // accepted
    uint64_t tcp_connections_open = 0;      // open now
    uint64_t tcp_connections_rejected = 0;  // closed at once: max_tcp_connections were open
    uint64_t tcp_connections_idle_closed = 0;
    DnsForwarder::Counters forwarder;  // zero without upstreams

    uint64_t queries() const;  // answered, every rcode
    uint64_t QueriesWith(Rcode rcode) const { return queries_by_rcode[static_cast<size_t>(rcode)]; }
  };

  explicit DnsServer(Options options);
  DnsServer(const DnsServer&) = delete;
  DnsServer& operator=(const DnsServer&) = delete;
  ~DnsServer();

  // Binds UDP and TCP on host:port and starts serving. INVALID_ARGUMENT for a null registry
  // or a host that is not an address, UNAVAILABLE when the port cannot be bound.
  Status Start();
  // Stops the threads, closes every socket and connection. Idempotent.
  void Stop();

  // The bound port, once Start() succeeded.
  uint16_t port() const { return port_; }

  Counters counters() const;
  // The counters in Prometheus text format: tarn_dns_queries_total{rcode="NOERROR"} and
  // friends, with HELP and TYPE lines.
  std::string PrometheusText() const;

 private:
  struct CounterBlock;
  struct TcpConnection;
  class TcpLoop;

  void ServeUdp(CounterBlock* counters);

  Options options_;
  uint16_t port_ = 0;
  int udp_fd_ = -1;
  int tcp_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd, readable once Stop() begins
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  std::vector<std::unique_ptr<CounterBlock>> counters_;  // one per thread, made by the ctor
  std::vector<std::thread> threads_;
  std::unique_ptr<DnsForwarder> forwarder_;  // with upstreams; stopped before the sockets close
};

// Several servers' counters as one Prometheus text: each family once, one sample per
// server labelled listener="<label>" (no label for ""), e.g.
// tarn_dns_queries_total{rcode="NOERROR",listener="127.42.0.1:53"}.
std::string DnsPrometheusText(
    const std::vector<std::pair<std::string, DnsServer::Counters>>& listeners);

}  // namespace tarn::registry
