// DnsForwarder: sends the UDP queries tarn's DNS server is not authoritative for to upstream
// resolvers and relays their answers, as a cluster DNS forwards what is outside its zone
// (CoreDNS's `forward`, dnsmasq's `server=`). Containers whose resolv.conf names only tarn's
// server still resolve the rest of the world this way.
//
// Each forwarded query gets a fresh random 16-bit ID (unique among those pending), and an
// answer is accepted only from the upstream the query went to with that ID; the client's
// own ID is put back before the answer is relayed. An upstream that does not answer within
// `timeout` gets the query passed to the next one; after the last, the query is forgotten
// and the client's own retry starts over. At most `max_pending` queries wait at a time.
//
// REQUIRES: Start() before Forward(); Stop() (or the destructor) after the last Forward().
// Forward() and counters() may be called from any thread; answers are sent by the
// forwarder's own thread on the socket the query came in on.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace tarn::registry {

struct UpstreamAddress {
  sockaddr_storage address{};
  socklen_t size = 0;
  std::string text;  // as given, for messages
};

// "10.0.0.2", "10.0.0.2:5353", "::1", "[::1]:53": numeric addresses only (a resolver must
// not need a resolver). Port 53 when none is given.
StatusOr<UpstreamAddress> ParseUpstream(const std::string& text);

class DnsForwarder {
 public:
  struct Options {
    std::vector<std::string> upstreams;  // ParseUpstream's forms; tried in order
    std::chrono::milliseconds timeout{2000};
    size_t max_pending = 4096;
  };
  struct Counters {
    uint64_t forwarded = 0;  // queries sent upstream (first tries)
    uint64_t answered = 0;   // answers relayed to clients
    uint64_t timed_out = 0;  // queries no upstream answered
    uint64_t rejected = 0;   // not forwarded: max_pending were waiting
    uint64_t spoofed = 0;    // datagrams dropped: unknown ID or wrong sender
  };

  explicit DnsForwarder(Options options);
  DnsForwarder(const DnsForwarder&) = delete;
  DnsForwarder& operator=(const DnsForwarder&) = delete;
  ~DnsForwarder();

  // Parses the upstreams and opens a socket per address family. INVALID_ARGUMENT names a
  // bad upstream; an empty list is an error too (do not make a forwarder then).
  Status Start();
  void Stop();

  // Sends `query` (a whole DNS message from `client`, which reached us on `reply_fd`)
  // upstream; the answer goes back from the forwarder's thread. False when it was not
  // forwarded (too many pending, or shorter than a header): answer it yourself.
  bool Forward(std::span<const uint8_t> query, const sockaddr_storage& client,
               socklen_t client_size, int reply_fd);

  Counters counters() const;
  const std::vector<UpstreamAddress>& upstreams() const { return upstreams_; }

 private:
  struct Pending {
    std::vector<uint8_t> query;  // with our ID, for passing to the next upstream
    uint16_t client_id = 0;
    sockaddr_storage client{};
    socklen_t client_size = 0;
    int reply_fd = -1;
    size_t upstream = 0;  // index of the upstream asked now
    std::chrono::steady_clock::time_point deadline;
  };

  int SocketFor(const UpstreamAddress& u) const;
  bool SendUpstream(const Pending& p);  // REQUIRES: mu_ held
  void Run();
  void Receive(int fd);
  void Expire();

  Options options_;
  std::vector<UpstreamAddress> upstreams_;
  int socket4_ = -1, socket6_ = -1;
  int stop_fd_ = -1;
  std::thread thread_;

  mutable std::mutex mu_;
  std::unordered_map<uint16_t, Pending> pending_;  // by our ID; guarded by mu_
  std::mt19937 ids_;                               // guarded by mu_

  std::atomic<uint64_t> forwarded_{0}, answered_{0}, timed_out_{0}, rejected_{0}, spoofed_{0};
};

}  // namespace tarn::registry
