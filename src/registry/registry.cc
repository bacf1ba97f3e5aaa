#include "registry/registry.h"

#include <arpa/inet.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <unordered_map>

#include "common/dns_name.h"
#include "registry/dns_message.h"

namespace tarn::registry {
namespace {

constexpr uint32_t kSoaRefresh = 3600;
constexpr uint32_t kSoaRetry = 600;
constexpr uint32_t kSoaExpire = 86400;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

bool ParseIpv4(const std::string& text, uint32_t* ip) {
  in_addr addr{};
  if (text.empty() || inet_pton(AF_INET, text.c_str(), &addr) != 1) return false;
  *ip = ntohl(addr.s_addr);
  return true;
}

std::string ReverseName(uint32_t ip) {
  return std::to_string(ip & 0xFF) + "." + std::to_string(ip >> 8 & 0xFF) + "." +
         std::to_string(ip >> 16 & 0xFF) + "." + std::to_string(ip >> 24) + ".in-addr.arpa";
}

bool PublishesNames(const InstanceRecords& r) {
  return IsDnsLabel(r.user) && IsDnsLabel(r.assembly) && IsDnsLabel(r.component) &&
         IsDnsLabel(r.instance);
}

bool PublishesPort(const std::pair<std::string, int>& port) {
  return IsDnsLabel(port.first) && port.second >= 1 && port.second <= 65535;
}

// "worker-10" sorts after "worker-9": by component, then the instance's trailing index.
auto NaturalKey(const InstanceRecords& r) {
  const size_t dash = r.instance.rfind('-');
  uint64_t index = 0;
  if (dash != std::string::npos && dash + 1 < r.instance.size() && r.instance.size() - dash < 12) {
    for (size_t i = dash + 1; i < r.instance.size(); ++i) {
      const char c = r.instance[i];
      if (c < '0' || c > '9') {
        index = 0;
        break;
      }
      index = index * 10 + static_cast<uint64_t>(c - '0');
    }
  }
  return std::tuple<const std::string&, const std::string&, const std::string&, uint64_t,
                    const std::string&>(r.user, r.assembly, r.component, index, r.instance);
}

bool NaturalLess(const InstanceRecords* a, const InstanceRecords* b) {
  return NaturalKey(*a) < NaturalKey(*b);
}

std::string Key(const std::string& user, const std::string& assembly, const std::string& inst) {
  return user + "/" + assembly + "/" + inst;
}

}  // namespace

Status CheckInstanceRecords(const InstanceRecords& r) {
  const std::pair<const char*, const std::string*> labels[] = {{"user", &r.user},
                                                               {"assembly", &r.assembly},
                                                               {"component", &r.component},
                                                               {"instance", &r.instance}};
  for (const auto& [field, value] : labels) {
    if (!IsDnsLabel(*value)) {
      return InvalidArgumentError(std::string(field) + " \"" + *value +
                                  "\" is not a lowercase DNS label");
    }
  }
  uint32_t ip = 0;
  if (!r.ip.empty() && !ParseIpv4(r.ip, &ip)) {
    return InvalidArgumentError("ip \"" + r.ip + "\" is not a dotted IPv4 address");
  }
  for (const auto& port : r.ports) {
    if (!PublishesPort(port)) {
      return InvalidArgumentError("port \"" + port.first + "\" = " + std::to_string(port.second) +
                                  " needs a DNS-label name and a number in 1..65535");
    }
  }
  return OkStatus();
}

struct Registry::Zone {
  struct Node {
    std::vector<ResourceRecord> records;  // sorted by type
    bool in_domain = true;  // negative answers carry the SOA; false for in-addr.arpa names
  };
  std::unordered_map<std::string, Node, StringHash, std::equal_to<>> nodes;
  std::vector<ResourceRecord> soa;  // the one SOA record
};

Registry::Registry(std::string domain, uint32_t ttl_seconds)
    : domain_([&] {
        std::string d = std::move(domain);
        for (char& c : d) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
        if (!d.empty() && d.back() == '.') d.pop_back();
        return d;
      }()),
      ttl_(ttl_seconds) {
  TARN_CHECK(IsDnsName(domain_));
  std::unique_lock lock(mu_);
  PublishLocked();
}

Registry::~Registry() = default;

void Registry::Upsert(const InstanceRecords& r) {
  std::unique_lock lock(mu_);
  auto [it, inserted] = instances_.try_emplace(Key(r.user, r.assembly, r.instance), r);
  if (!inserted) {
    if (it->second == r) return;
    it->second = r;
  }
  ++generation_;
  stale_ = true;
}

void Registry::Remove(const std::string& user, const std::string& assembly,
                      const std::string& instance) {
  std::unique_lock lock(mu_);
  if (instances_.erase(Key(user, assembly, instance)) == 0) return;
  ++generation_;
  stale_ = true;
}

void Registry::RemoveAssembly(const std::string& user, const std::string& assembly) {
  std::unique_lock lock(mu_);
  const std::string prefix = user + "/" + assembly + "/";
  auto first = instances_.lower_bound(prefix);
  auto last = first;
  while (last != instances_.end() && last->first.starts_with(prefix)) ++last;
  if (first == last) return;
  instances_.erase(first, last);
  ++generation_;
  stale_ = true;
}

uint64_t Registry::generation() const {
  std::shared_lock lock(mu_);
  return generation_;
}

std::string Registry::HostsLines(const std::string& user, const std::string& assembly) const {
  std::shared_lock lock(mu_);
  const std::string prefix = user + "/" + assembly + "/";
  std::vector<const InstanceRecords*> hosts;
  for (auto it = instances_.lower_bound(prefix);
       it != instances_.end() && it->first.starts_with(prefix); ++it) {
    uint32_t ip = 0;
    if (PublishesNames(it->second) && ParseIpv4(it->second.ip, &ip)) hosts.push_back(&it->second);
  }
  std::sort(hosts.begin(), hosts.end(), NaturalLess);
  std::string out;
  for (const InstanceRecords* r : hosts) {
    out += r->ip + "\t" + r->instance + "." + r->assembly + "." + r->user + "." + domain_ + " " +
           r->instance + "\n";
  }
  return out;
}

void Registry::PublishLocked() const {
  auto zone = std::make_shared<Zone>();
  auto& nodes = zone->nodes;

  ResourceRecord soa;
  soa.name = domain_;
  soa.type = kTypeSoa;
  soa.ttl = ttl_;
  soa.soa = {domain_,
             "hostmaster." + domain_,
             static_cast<uint32_t>(generation_),
             kSoaRefresh,
             kSoaRetry,
             kSoaExpire,
             ttl_};
  zone->soa.push_back(soa);
  // As YARN's Registry DNS: the apex names itself as its name server.
  ResourceRecord ns;
  ns.name = domain_;
  ns.type = kTypeNs;
  ns.ttl = ttl_;
  ns.target = domain_;
  nodes[domain_].records = {soa, ns};

  std::vector<const InstanceRecords*> sorted;
  for (const auto& [key, r] : instances_) {
    if (PublishesNames(r)) sorted.push_back(&r);
  }
  std::sort(sorted.begin(), sorted.end(), NaturalLess);

  auto add = [&](const std::string& owner, ResourceRecord rr) {
    rr.name = owner;
    rr.ttl = ttl_;
    nodes[owner].records.push_back(std::move(rr));
  };
  for (const InstanceRecords* r : sorted) {
    const std::string base = r->assembly + "." + r->user + "." + domain_;
    const std::string instance = r->instance + "." + base;
    const std::string component = r->component + "." + base;
    nodes.try_emplace(instance);
    nodes.try_emplace(component);
    uint32_t ip = 0;
    const bool has_ip = ParseIpv4(r->ip, &ip);
    const bool listed = has_ip && r->ready;
    if (has_ip) {
      ResourceRecord a;
      a.type = kTypeA;
      a.ipv4 = ip;
      add(instance, a);
      if (listed) add(component, a);
      ResourceRecord ptr;
      ptr.type = kTypePtr;
      ptr.target = instance;
      const std::string reverse = ReverseName(ip);
      add(reverse, ptr);
      nodes[reverse].in_domain = false;
    }
    if (!r->container_id.empty()) {
      ResourceRecord txt;
      txt.type = kTypeTxt;
      txt.text = r->container_id;
      add(instance, txt);
    }
    for (const auto& port : r->ports) {
      if (!PublishesPort(port)) continue;
      // The names exist while the instance does, so that "no instance ready yet" is NODATA
      // (retry soon) rather than NXDOMAIN.
      const std::string service = "_" + port.first + "._tcp.";
      nodes.try_emplace(service + instance);
      nodes.try_emplace(service + component);
      ResourceRecord srv;
      srv.type = kTypeSrv;
      srv.priority = 0;
      srv.weight = 1;  // equal weights: clients spread over the instances
      srv.port = static_cast<uint16_t>(port.second);
      srv.target = instance;
      if (has_ip) add(service + instance, srv);
      if (listed) add(service + component, srv);
    }
  }

  // Every ancestor of a name in the domain exists, as an empty non-terminal if nothing else.
  std::vector<std::string_view> names;
  for (const auto& [name, node] : nodes) {
    if (node.in_domain) names.push_back(name);
  }
  std::vector<std::string> ancestors;
  for (std::string_view name : names) {
    while (name.size() > domain_.size()) {
      name.remove_prefix(name.find('.') + 1);
      ancestors.emplace_back(name);
    }
  }
  for (std::string& name : ancestors) nodes.try_emplace(std::move(name));
  for (auto& [name, node] : nodes) {
    std::stable_sort(
        node.records.begin(), node.records.end(),
        [](const ResourceRecord& a, const ResourceRecord& b) { return a.type < b.type; });
  }
  zone_ = std::move(zone);
  stale_ = false;
}

LookupResult Registry::Lookup(std::string_view qname, uint16_t qtype) const {
  std::shared_ptr<const Zone> zone;
  {
    std::shared_lock lock(mu_);
    if (!stale_) zone = zone_;
  }
  if (zone == nullptr) {
    // The first lookup after changes builds the zone once for all of them.
    std::unique_lock lock(mu_);
    if (stale_) PublishLocked();
    zone = zone_;
  }
  LookupResult result;
  DnsAnswer& answer = result.answer_;
  answer.rcode = Rcode::kRefused;
  if (qname.size() > 1 && qname.back() == '.') qname.remove_suffix(1);
  char lower[kMaxTextName];
  if (qname.size() > sizeof(lower)) return result;  // longer than any name a query can hold
  for (size_t i = 0; i < qname.size(); ++i) {
    const char c = qname[i];
    lower[i] = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
  }
  const std::string_view name(lower, qname.size());

  const auto it = zone->nodes.find(name);
  if (it == zone->nodes.end()) {
    const bool in_domain =
        name == domain_ || (name.size() > domain_.size() && name.ends_with(domain_) &&
                            name[name.size() - domain_.size() - 1] == '.');
    if (in_domain) {
      answer.rcode = Rcode::kNxDomain;
      answer.authoritative = true;
      answer.authority = zone->soa;
    }
    result.snapshot_ = std::move(zone);
    return result;
  }
  const Zone::Node& node = it->second;
  std::span<const ResourceRecord> records = node.records;
  if (qtype != kTypeAny) {
    const auto [first, last] = std::equal_range(
        node.records.begin(), node.records.end(), qtype, [](const auto& a, const auto& b) {
          if constexpr (std::is_same_v<std::decay_t<decltype(a)>, uint16_t>) {
            return a < b.type;
          } else {
            return a.type < b;
          }
        });
    records = std::span<const ResourceRecord>(first, last);
  }
  answer.rcode = Rcode::kNoError;
  answer.authoritative = true;
  answer.answers = records;
  if (records.empty() && node.in_domain) answer.authority = zone->soa;
  result.snapshot_ = std::move(zone);
  return result;
}

}  // namespace tarn::registry
