// Registry: the DNS records of every instance tarn runs, named as YARN's Registry DNS names
// them, and the lookups tarn's DNS server answers from.
//
//   worker-0.fmnist.alice.tarn              A (its address), TXT (its container id)
//   worker.fmnist.alice.tarn                A of every READY instance of the component
//   _grpc._tcp.worker.fmnist.alice.tarn     SRV of every READY instance (port "grpc")
//   _grpc._tcp.worker-0.fmnist.alice.tarn   SRV of the instance itself
//   3.0.42.127.in-addr.arpa                 PTR to the instance that has 127.42.0.3
//   tarn                                    SOA and NS (the zone apex)
//
// The zone is an immutable snapshot, rebuilt whole (O(records)) by the first lookup after a
// change, so a burst of changes costs one rebuild; lookups otherwise only copy the snapshot's
// pointer under a shared lock, then answer from it without locks or allocation. This class
// is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "registry/resource_record.h"

namespace tarn::registry {

// What the registry publishes about one instance. Labels must be lowercase RFC 1123 labels
// (common/dns_name.h); an instance whose labels are not publishes no names, an `ip` that is
// not dotted IPv4 publishes no address. CheckInstanceRecords says which.
struct InstanceRecords {
  std::string user, assembly, component, instance;  // DNS labels; instance = "worker-0"
  std::string ip;            // IPv4 dotted; empty = no address yet (no A record)
  bool ready = false;        // only READY instances are listed in the component's A and SRV
  std::string container_id;  // TXT
  std::vector<std::pair<std::string, int>> ports;  // named ports, e.g. {"grpc", 2222}

  friend bool operator==(const InstanceRecords&, const InstanceRecords&) = default;
};

// OK, or INVALID_ARGUMENT naming the field that will not publish: a label that is not a
// lowercase DNS label, an ip that is neither empty nor dotted IPv4, a port outside 1..65535
// or whose name is not a DNS label (such ports get no SRV record).
Status CheckInstanceRecords(const InstanceRecords& r);

// The answer to one (name, type) question. It keeps the zone snapshot its records live in,
// so it stays valid and unchanged after later updates. Cheap to copy (one shared pointer).
class LookupResult {
 public:
  const DnsAnswer& answer() const { return answer_; }
  Rcode rcode() const { return answer_.rcode; }
  bool authoritative() const { return answer_.authoritative; }
  std::span<const ResourceRecord> answers() const { return answer_.answers; }
  std::span<const ResourceRecord> authority() const { return answer_.authority; }

 private:
  friend class Registry;
  DnsAnswer answer_;
  std::shared_ptr<const void> snapshot_;
};

// The records, and the answers to DNS questions about them:
//  - names inside the domain: the records asked for (NOERROR, AA); a name that exists with
//    none of that type, including empty non-terminals such as "fmnist.alice.tarn", is
//    NODATA (NOERROR, no answers, the SOA in authority); a name that does not exist is
//    NXDOMAIN with the SOA. The SOA's minimum and TTL are the registry's TTL (RFC 2308).
//  - "<reversed ip>.in-addr.arpa" of an instance's address: its PTR records (AA).
//  - everything else, other in-addr.arpa names included: REFUSED (no recursion).
//  - ANY (type 255) answers every record the name has (not RFC 8482's minimal answer: the
//    zone is small and clients such as `dig ANY` expect the records).
// Names are matched ASCII case-insensitively, with or without the trailing dot.
class Registry {
 public:
  explicit Registry(std::string domain = "tarn", uint32_t ttl_seconds = 5);
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  ~Registry();

  // Adds or replaces the instance keyed by user/assembly/instance. An identical upsert is
  // not a change (the generation stays).
  void Upsert(const InstanceRecords& r);
  void Remove(const std::string& user, const std::string& assembly, const std::string& instance);
  void RemoveAssembly(const std::string& user, const std::string& assembly);

  // Bumped by every change.
  uint64_t generation() const;

  // The /etc/hosts lines ("IP<TAB>fqdn short\n") of every instance with an address in one
  // assembly, ordered by component and instance index.
  std::string HostsLines(const std::string& user, const std::string& assembly) const;

  // The answer to a question; `qname` in presentation form (as Query::qname() gives it).
  LookupResult Lookup(std::string_view qname, uint16_t qtype) const;

  const std::string& domain() const { return domain_; }
  uint32_t ttl_seconds() const { return ttl_; }

 private:
  struct Zone;
  // Builds the zone from instances_ and publishes it. Called with mu_ held exclusively.
  void PublishLocked() const;

  const std::string domain_;
  const uint32_t ttl_;
  mutable std::shared_mutex mu_;
  std::map<std::string, InstanceRecords>
      instances_;            // guarded by mu_; key "user/assembly/instance"
  uint64_t generation_ = 0;  // guarded by mu_
  // Guarded by mu_; built lazily (hence mutable): the snapshot, replaced and never changed,
  // and whether instances_ changed since it was built.
  mutable std::shared_ptr<const Zone> zone_;
  mutable bool stale_ = false;
};

}  // namespace tarn::registry
