#include "api/server_command.h"

#include <arpa/inet.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "api/api_server.h"
#include "api/openapi.h"
#include "api/server_config.h"
#include "api/service_loop.h"
#include "api/state_snapshot.h"
#include "auth/account.h"
#include "backend/local_backend.h"
#include "backend/slurm_backend.h"
#include "common/file.h"
#include "common/hmac_sha256.h"
#include "common/local_paths.h"
#include "metrics/collector.h"
#include "registry/dns_server.h"
#include "registry/registry.h"
#include "runtime/cgroup_dynmods.h"
#include "runtime/dispatch_runtime.h"
#include "runtime/docker_runtime.h"
#include "runtime/shim_runtime.h"
#include "scheduler/node_inventory.h"
#include "service/manager.h"
#include "store/store.h"

namespace tarn::api {
namespace {

// The directory of this executable: tarn-shim lives beside tarn, and instances find
// tarn's binaries (tarn-train, tarn-serve) there first on their PATH.
std::string BinDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// A listen address that only this machine reaches: 127.0.0.0/8, ::1, or "localhost".
bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  return ::inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

}  // namespace

struct Daemon::Parts {
  RealClock clock;
  std::string address;
  std::string socket_path;
  bool tls = false;  // the TCP listener speaks TLS
  // The dashboard's origin (`tarn ui`'s URL): the host is set before the API starts, the
  // port once its listener is bound (0 until then, or without a TCP listener).
  std::string ui_host;
  std::atomic<int> ui_port{0};
  std::string dns_address;
  std::string state_dir;
  std::unique_ptr<registry::Registry> registry;
  std::unique_ptr<registry::DnsServer> dns;
  // tarn's DNS for the containers, on port 53 of the address range's reserved address.
  std::unique_ptr<registry::DnsServer> container_dns;
  std::string container_dns_address;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<auth::AuthStore> auth_store;
  std::unique_ptr<auth::AuditLog> audit;
  std::unique_ptr<auth::Authenticator> authenticator;
  std::unique_ptr<auth::LoginCodes> login_codes;  // `tarn ui`'s, for the dashboard
  std::unique_ptr<runtime::ShimRuntime> runtime;
  // Processes through `runtime`, images through podman (made at the first image start).
  std::unique_ptr<runtime::DispatchRuntime> containers;
  std::unique_ptr<ServiceLoop> loop;
  std::unique_ptr<backend::NetWalls> walls;   // the local backend's; outlives it
  std::unique_ptr<service::Backend> backend;  // local or slurm
  service::PreemptionCounters preemption_counters;
  std::unique_ptr<service::Manager> manager;
  std::unique_ptr<metrics::Collector> collector;  // instances' metrics; none when not scraped
  std::unique_ptr<ApiServer> api;
  bool shut_down = false;
};

namespace {

// A training instance's last checkpoint, from what the collector read of its metrics
// (tarn_train_checkpoint_step and _timestamp_seconds; -1 and 0 mean none yet).
std::optional<service::Checkpoint> LastCheckpoint(const metrics::SeriesStore& store,
                                                  const std::string& key) {
  metrics::SeriesStore::InstanceSeries in =
      store.Query(key,
                  {"tarn_train_checkpoint_step", "tarn_train_checkpoint_timestamp_seconds",
                   "tarn_train_global_step"},
                  0, 1);
  std::optional<double> step, at, reached;
  for (const metrics::SeriesStore::Series& s : in.series) {
    if (s.points.empty()) continue;
    if (s.name == "tarn_train_checkpoint_step") step = s.points.back().v;
    if (s.name == "tarn_train_checkpoint_timestamp_seconds") at = s.points.back().v;
    if (s.name == "tarn_train_global_step") reached = s.points.back().v;
  }
  service::Checkpoint cp;
  cp.step = -1;
  if (step && at && *step >= 0 && *at > 0) {
    cp.step = static_cast<int64_t>(*step);
    cp.wall_ms = static_cast<int64_t>(*at * 1000);
  }
  if (reached && *reached >= 0) cp.reached_step = static_cast<int64_t>(*reached);
  if (cp.step < 0 && cp.reached_step < 0) return std::nullopt;
  return cp;
}

// The requests a serving instance had in flight on average between the collector's last two
// scrapes of it: the growth of tarn_serve_request_latency_seconds_sum (the seconds its
// inference requests, predict and infer, took) per second of wall clock, Little's law. None
// when it has fewer than two points, or none within three scrape intervals.
std::optional<double> InFlight(const metrics::Collector& collector, const std::string& key,
                               int64_t now_ms) {
  const int64_t interval_ms = collector.interval().count();
  metrics::SeriesStore::InstanceSeries in = collector.store().Query(
      key, {"tarn_serve_request_latency_seconds_sum"}, now_ms - 3 * interval_ms - 1000, 2);
  std::optional<double> total;
  for (const metrics::SeriesStore::Series& s : in.series) {
    bool inference = false;
    for (const auto& [name, value] : s.label_pairs) {
      inference |= name == "api" && (value == "predict" || value == "infer");
    }
    if (!inference || s.points.size() < 2) continue;
    const metrics::Point& a = s.points[s.points.size() - 2];
    const metrics::Point& b = s.points.back();
    if (b.t_ms <= a.t_ms || b.t_ms < now_ms - 3 * interval_ms) continue;
    total = total.value_or(0) + std::max(0.0, b.v - a.v) * 1000.0 / (b.t_ms - a.t_ms);
  }
  return total;
}

std::string PreemptionPrometheusText(const service::PreemptionCounters& c) {
  return "# HELP tarn_preemptions_total Preemptions carried out (docs/scheduling.md).\n"
         "# TYPE tarn_preemptions_total counter\ntarn_preemptions_total " +
         std::to_string(c.preemptions.load()) +
         "\n# HELP tarn_preempted_instances_total Instances stopped by preemptions.\n"
         "# TYPE tarn_preempted_instances_total counter\ntarn_preempted_instances_total " +
         std::to_string(c.preempted_instances.load()) +
         "\n# HELP tarn_preempted_gpu_seconds_at_risk_total GPUs the victims held times the "
         "time since their last checkpoint, when preempted.\n"
         "# TYPE tarn_preempted_gpu_seconds_at_risk_total counter\n"
         "tarn_preempted_gpu_seconds_at_risk_total " +
         std::to_string(static_cast<double>(c.gpu_milliseconds_at_risk.load()) / 1000) +
         "\n# HELP tarn_preempted_steps_redone_total Steps preempted gangs computed again: "
         "the step each had reached less the one it resumed from.\n"
         "# TYPE tarn_preempted_steps_redone_total counter\ntarn_preempted_steps_redone_total " +
         std::to_string(c.steps_redone.load()) + "\n";
}

// The server's key for the assemblies' secrets (STATE/assembly.key, 32 random bytes, 0600):
// made once and kept, so that a restarted server gives restarted instances the secret their
// running peers hold.
StatusOr<std::string> AssemblyKey(const std::string& state_dir) {
  const std::string path = state_dir + "/assembly.key";
  if (::access(path.c_str(), F_OK) != 0) {
    std::string key(32, '\0');
    if (::getrandom(key.data(), key.size(), 0) != static_cast<ssize_t>(key.size())) {
      return InternalError(std::string("getrandom: ") + std::strerror(errno));
    }
    RETURN_IF_ERROR(runtime::WriteFileAtomically(path, key, true, 0600));
  }
  ASSIGN_OR_RETURN(std::string key, ReadFileNoFollow(path, 64));
  if (key.size() != 32) {
    return DataLossError(path + ": " + std::to_string(key.size()) +
                         " bytes, not a key of 32; remove it to make a new one (then restart "
                         "the assemblies whose parameter servers hold the old secret)");
  }
  return key;
}

// Where the container-facing DNS server forwards names outside tarn's domain: the
// configured upstreams, else the machine's own nameservers (those outside tarn's range,
// which would be tarn itself).
std::vector<std::string> DnsUpstreams(const ServerConfig& config) {
  if (config.dns_upstream) return *config.dns_upstream;
  std::vector<std::string> out;
  auto range = config.address_range.empty()
                   ? StatusOr<std::pair<uint32_t, uint32_t>>(NotFoundError("no range"))
                   : backend::ParseLoopbackRange(config.address_range);
  for (const std::string& ns :
       backend::NameserversOf(ReadFileToString("/etc/resolv.conf", 1 << 16).value_or(""))) {
    in_addr a{};
    if (range.ok() && ::inet_pton(AF_INET, ns.c_str(), &a) == 1) {
      const uint32_t h = ntohl(a.s_addr);
      if (h >= range->first - 1 && h <= range->second + 1) continue;
    }
    if (registry::ParseUpstream(ns).ok()) out.push_back(ns);
  }
  return out;
}

// Decides how programs in containers resolve names (backend/name_files.h) and, for
// kResolvConf, starts the DNS server they use on port 53 of the range's reserved address.
// `config.container_names` unset (auto) takes the best this machine allows; a mode asked
// for that cannot be had is an error saying why.
StatusOr<backend::NameResolution> SetUpContainerNames(const ServerConfig& config,
                                                      runtime::ShimRuntime::Isolation isolation,
                                                      Daemon::Parts* p) {
  using Mode = backend::NameResolution::Mode;
  const std::optional<Mode> want = config.container_names;
  const std::string asked = want ? "container_names \"" + backend::ModeName(*want) + "\": " : "";
  const std::string ask_dns = p->dns_address.empty()
                                  ? "tarn's DNS server is off (--dns \"\")"
                                  : "programs must ask tarn's DNS server at " + p->dns_address;
  backend::NameResolution names;
  if (isolation == runtime::ShimRuntime::Isolation::kNone) {
    const std::string why =
        "containers get no mount namespace of their own here (tarn is not root and this "
        "kernel does not allow unprivileged user namespaces)";
    if (want && *want != Mode::kNone) return FailedPreconditionError(asked + why);
    names.description = "names do not resolve through the system resolver: " + why + "; " + ask_dns;
    return names;
  }
  if (want == Mode::kNone) {
    names.description =
        "names do not resolve through the system resolver (container_names "
        "is \"none\"); " +
        ask_dns;
    return names;
  }
  std::string why_not_dns;
  if (!want || *want == Mode::kResolvConf) {
    if (isolation != runtime::ShimRuntime::Isolation::kFull) {
      why_not_dns = "tarn is not root, so it cannot serve DNS on port 53";
    } else if (config.address_range.empty()) {
      why_not_dns = "address_range is empty, so no address is kept for tarn's DNS";
    } else {
      ASSIGN_OR_RETURN(std::string reserved, backend::ReservedDnsAddress(config.address_range));
      registry::DnsServer::Options o;
      o.host = reserved;
      o.port = 53;
      o.registry = p->registry.get();
      o.udp_threads = 1;
      o.upstreams = DnsUpstreams(config);
      auto server = std::make_unique<registry::DnsServer>(o);
      if (Status s = server->Start(); !s.ok()) {
        why_not_dns = "tarn's DNS cannot listen on " + reserved + ":53: " + s.message();
      } else {
        p->container_dns = std::move(server);
        p->container_dns_address = reserved + ":53";
        names.mode = Mode::kResolvConf;
        names.resolver_ip = reserved;
        std::string forwarded;
        for (const std::string& u : o.upstreams) forwarded += (forwarded.empty() ? "" : ", ") + u;
        names.description =
            "names resolve through the system resolver: each container's /etc/resolv.conf "
            "names tarn's DNS at " +
            p->container_dns_address + ", which " +
            (forwarded.empty() ? "refuses other names (no dns_upstream)"
                               : "forwards other names to " + forwarded);
        return names;
      }
    }
    if (want) return FailedPreconditionError(asked + why_not_dns);
  }
  names.mode = Mode::kHosts;
  names.description =
      "names resolve through each container's /etc/hosts, which tarn keeps "
      "current" +
      (why_not_dns.empty() ? "" : " (" + why_not_dns + ")");
  return names;
}

}  // namespace

Daemon::Daemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Daemon::~Daemon() { Shutdown(); }

const std::string& Daemon::address() const { return parts_->address; }
const std::string& Daemon::socket_path() const { return parts_->socket_path; }
bool Daemon::tls() const { return parts_->tls; }
const std::string& Daemon::state_dir() const { return parts_->state_dir; }
const std::string& Daemon::dns_address() const { return parts_->dns_address; }

void Daemon::Shutdown() {
  Parts& p = *parts_;
  if (p.shut_down) return;
  p.shut_down = true;
  if (p.api) p.api->Shutdown();
  if (p.collector) p.collector->Stop();
  if (p.loop) p.loop->Stop();
  if (p.dns) p.dns->Stop();
  if (p.container_dns) p.container_dns->Stop();
  p.backend.reset();  // its threads end; the containers go on
  p.api.reset();
  p.collector.reset();
  p.manager.reset();
  p.loop.reset();
  p.store.reset();
  p.authenticator.reset();
  p.audit.reset();
  p.auth_store.reset();
  p.dns.reset();
  p.container_dns.reset();
  p.registry.reset();
}

StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const ServerFlags& flags) {
  ::signal(SIGPIPE, SIG_IGN);
  auto p = std::make_unique<Parts>();
  std::optional<std::pair<std::string, int>> listen;
  if (!flags.listen.empty()) {
    ASSIGN_OR_RETURN(listen, ParseHostPort(flags.listen, "--listen"));
  }

  ServerConfig config;
  if (!flags.config.empty()) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(flags.config, 1 << 20));
    ASSIGN_OR_RETURN(config, ParseServerConfig(text, flags.config));
  } else {
    ASSIGN_OR_RETURN(config, ParseServerConfig("{}", "defaults"));
  }

  const bool tls = !config.tls.cert_file.empty();
  if (listen && !IsLoopbackHost(listen->first) && !tls) {
    return FailedPreconditionError(
        "--listen " + flags.listen +
        ": listening beyond loopback needs TLS, so that tokens never cross a network in clear; "
        "name a certificate and key in the config's \"tls\" ({\"cert\": PEM, \"key\": PEM}), "
        "or listen on 127.0.0.1");
  }

  p->state_dir = flags.state_dir.empty() ? DefaultStateDir() : flags.state_dir;
  RETURN_IF_ERROR(MakeDirectories(p->state_dir, 0711));
  // Containers run as unprivileged accounts and must reach their directories below it.
  ::chmod(p->state_dir.c_str(), 0711);

  // Who is asking: tenants and tokens, and the audit log, both the server's account's alone.
  ASSIGN_OR_RETURN(p->auth_store, auth::AuthStore::Open(p->state_dir + "/auth.db", &p->clock));
  ASSIGN_OR_RETURN(p->audit,
                   auth::AuditLog::Open({p->state_dir + "/audit.log", config.auth.audit_max_bytes,
                                         config.auth.audit_keep, &p->clock}));
  {
    auth::Authenticator::Options ao;
    ao.config = config.auth;
    ao.store = p->auth_store.get();
    ao.clock = &p->clock;
    p->authenticator = std::make_unique<auth::Authenticator>(std::move(ao));
  }
  if (config.auth.simple) {
    std::cerr << "tarn server: warning: auth.simple is on: any local account can act as any "
                 "other by naming it in ?user.name= (Hadoop simple authentication); use it only "
                 "on a machine with one user\n";
  }

  std::vector<scheduler::NodeSpec> nodes = config.nodes;
  if (nodes.empty()) {
    scheduler::InventoryOptions inv;
    inv.reserve_mib = config.reserve_mib;
    inv.fake_gpus = flags.fake_gpus;
    ASSIGN_OR_RETURN(scheduler::NodeSpec node, scheduler::DetectLocalNode(inv));
    nodes.push_back(std::move(node));
  } else if (flags.fake_gpus >= 0) {
    for (auto& n : nodes) n.gpus = scheduler::FakeGpus(flags.fake_gpus);
  }

  ASSIGN_OR_RETURN(p->store, store::Store::Open(p->state_dir + "/state.db"));

  const std::string bin_dir = BinDir();
  runtime::ShimRuntime::Options ro;
  ro.shim_binary = bin_dir + "/tarn-shim";
  if (::access(ro.shim_binary.c_str(), X_OK) != 0) {
    return FailedPreconditionError("tarn-shim not found beside tarn (" + ro.shim_binary +
                                   "); install both binaries in one directory");
  }
  p->runtime = std::make_unique<runtime::ShimRuntime>(ro);
  if (std::string w = p->runtime->Warning(); !w.empty()) {
    std::cerr << "tarn server: warning: " << w << "\n";
  }
  if (config.cgroup_favordynmods) {
    // Asked for, so never skipped quietly: a server that cannot do it does not start.
    if (config.backend.type != BackendConfig::Type::kLocal) {
      return InvalidArgumentError(
          "cgroup_favordynmods: only with the local backend (on Slurm, instances' cgroups are "
          "slurmd's, on its nodes)");
    }
    if (::geteuid() != 0) {
      return FailedPreconditionError(
          "cgroup_favordynmods: needs a server running as root (it reconfigures the "
          "machine's cgroup2 mount)");
    }
    StatusOr<std::string> favored = runtime::FavorDynmods();
    if (!favored.ok()) {
      return Status(favored.status().code(), "cgroup_favordynmods: " + favored.status().message());
    }
    std::cerr << "tarn server: " << *favored << "\n";
  }
  runtime::DockerRuntime::Options engine;
  engine.engine = config.container_engine;
  engine.oci_runtime = config.oci_runtime;
  engine.server_label = ToHex(DigestBytes(Sha256(p->state_dir))).substr(0, 16);
  p->containers = std::make_unique<runtime::DispatchRuntime>(
      p->runtime.get(), [engine]() -> StatusOr<std::unique_ptr<runtime::ContainerRuntime>> {
        ASSIGN_OR_RETURN(auto made, runtime::DockerRuntime::Create(engine));
        std::cerr << "tarn server: images run through " << made->engine()
                  << (made->oci_runtime().empty() ? ""
                                                  : " (OCI runtime " + made->oci_runtime() + ")")
                  << "\n";
        return std::unique_ptr<runtime::ContainerRuntime>(std::move(made));
      });

  p->registry = std::make_unique<registry::Registry>(config.domain);
  if (!flags.dns.empty()) {
    ASSIGN_OR_RETURN(auto dns_listen, ParseHostPort(flags.dns, "--dns"));
    registry::DnsServer::Options dso;
    dso.host = dns_listen.first;
    dso.port = static_cast<uint16_t>(dns_listen.second);
    dso.registry = p->registry.get();
    p->dns = std::make_unique<registry::DnsServer>(dso);
    if (Status s = p->dns->Start(); !s.ok()) {
      // 5353 is also mDNS's port: say how to choose another rather than just failing.
      return Status(s.code(), "--dns " + flags.dns + ": " + s.message() +
                                  " (choose another with --dns HOST:PORT, or --dns \"\" for none)");
    }
    p->dns_address = (dso.host.find(':') != std::string::npos ? "[" + dso.host + "]" : dso.host) +
                     ":" + std::to_string(p->dns->port());
  }

  ASSIGN_OR_RETURN(backend::NameResolution names,
                   SetUpContainerNames(config, p->runtime->isolation(), p.get()));
  std::cerr << "tarn server: in containers, " << names.description << "\n";

  // Walls between tenants: each local instance's own address is its tenant's alone. Held
  // until every instance is restored (below), so a restart never loads a partial table.
  if (config.backend.type != BackendConfig::Type::kSlurm && !config.address_range.empty()) {
    backend::NetWalls::Options wo;
    wo.table = backend::WallTableName(config.address_range, ServerConfig().address_range);
    p->walls = backend::NetWalls::Create(std::move(wo));
  }

  p->loop = std::make_unique<ServiceLoop>(p->clock);
  ServiceLoop* loop = p->loop.get();
  // Each assembly's secret (TARN_ASSEMBLY_SECRET), from the server's key.
  ASSIGN_OR_RETURN(std::string assembly_key, AssemblyKey(p->state_dir));
  backend::AssemblySecrets secrets = [key = std::move(assembly_key)](const std::string& user,
                                                                     const std::string& name) {
    return ToHex(DigestBytes(HmacSha256(key, "tarn-assembly-secret\n" + user + "/" + name)));
  };
  // Containers (and Slurm jobs) run as the tenant's own account, found by the uid its label
  // is bound to.
  runtime::AccountLookup tenant_accounts =
      [store = p->auth_store.get()](const std::string& name) -> std::optional<runtime::Account> {
    std::optional<auth::TenantRecord> tenant = store->Tenant(name);
    if (!tenant) return runtime::LookUpAccount(name);  // the local user, or an older tenant
    if (!tenant->uid) return std::nullopt;             // a remote tenant: the local user
    std::optional<auth::LocalAccount> a = auth::AccountByUid(*tenant->uid);
    if (!a) return std::nullopt;
    return runtime::Account{a->name, a->uid, a->gid};
  };
  if (config.backend.type == BackendConfig::Type::kSlurm) {
    backend::SlurmBackend::Options so;
    so.slurm_conf = config.backend.slurm_conf;
    so.partition = config.backend.partition;
    so.account = config.backend.account;
    so.qos = config.backend.qos;
    so.queues = config.queues;
    so.priority_qos = config.backend.priority_qos;
    so.sbatch_options = config.backend.sbatch_options;
    so.shared_dir = config.backend.shared_dir;
    so.poll_interval = config.backend.poll_interval;
    so.port_range = config.backend.port_range;
    so.domain = config.domain;
    so.bin_dir = bin_dir;
    so.names = names;
    so.clock = &p->clock;
    so.events = [loop](service::BackendEvent e) { loop->Post(std::move(e)); };
    so.accounts = tenant_accounts;
    so.secrets = secrets;
    auto slurm = backend::SlurmBackend::Create(std::move(so));
    if (!slurm.ok()) return slurm.status().WithContext(flags.config);
    p->backend = std::move(slurm).value();
  } else {
    backend::LocalBackend::Options bo;
    bo.nodes = nodes;
    bo.queues = config.queues;
    bo.clock = &p->clock;
    bo.reservation_after = config.reservation_after;
    bo.preemption = config.preemption;
    bo.launch.state_dir = p->state_dir;
    bo.launch.domain = config.domain;
    bo.launch.bin_dir = bin_dir;
    bo.ip = config.instance_ip;
    bo.address_range = config.address_range;
    bo.names = names;
    bo.runtime = p->containers.get();
    bo.walls = p->walls.get();
    bo.accounts = tenant_accounts;
    bo.secrets = secrets;
    bo.events = [loop](service::BackendEvent e) { loop->Post(std::move(e)); };
    bo.worker_threads = config.worker_threads;
    ASSIGN_OR_RETURN(p->backend, backend::LocalBackend::Create(std::move(bo)));
  }

  // Instances' metrics: every instance of every assembly, scraped while it runs at the port
  // the one rule names (metrics/collector.h). Made before the manager, which reads the
  // training instances' checkpoints from it; started once the loop runs.
  if (config.metrics.scrape_interval.count() > 0) {
    metrics::Collector::Options co;
    co.clock = &p->clock;
    co.interval = config.metrics.scrape_interval;
    co.timeout = config.metrics.scrape_timeout;
    co.store = config.metrics.store;
    co.targets = [loop] {
      std::vector<metrics::Target> targets;
      const std::shared_ptr<const StateSnapshot> snapshot = loop->Snapshot();
      for (const auto& view : snapshot->assemblies) {
        const service::AssemblyStatus& a = view->status();
        for (const service::ComponentStatus& c : a.components) {
          for (const service::InstanceStatus& i : c.instances) {
            metrics::Target t{a.user + "/" + a.name + "/" + i.name, "", 0};
            if (i.state == "READY" || i.state == "RUNNING_BUT_UNREADY") {
              t.ip = i.ip;
              t.port = metrics::MetricsPort(i.ports);
            }
            targets.push_back(std::move(t));
          }
        }
      }
      return targets;
    };
    p->collector = std::make_unique<metrics::Collector>(std::move(co));
  }

  service::Manager::Options mo;
  mo.clock = &p->clock;
  mo.store = p->store.get();
  mo.backend = p->backend.get();
  mo.domain = config.domain;
  mo.probe_interval = config.probe_interval;
  mo.restart = config.restart;
  mo.registry = p->registry.get();
  if (p->collector) {
    mo.last_checkpoint = [collector = p->collector.get()](const std::string& key) {
      return LastCheckpoint(collector->store(), key);
    };
    mo.in_flight = [collector = p->collector.get(), clock = &p->clock](const std::string& key) {
      return InFlight(*collector, key, clock->WallMillis());
    };
  }
  mo.counters = &p->preemption_counters;
  ASSIGN_OR_RETURN(p->manager, service::Manager::Create(mo));
  // Every instance is restored: the walls are loaded at once, replacing what the previous
  // server left in the kernel, before anything starts or any request is served.
  if (p->walls) {
    if (Status s = p->walls->Release(); !s.ok()) {
      std::cerr << "tarn server: warning: " << s.message() << "\n";
    }
  }
  const std::string walls = p->backend->DescribeNetworkWalls();
  if (!walls.empty()) {
    std::cerr << "tarn server: " << (walls.rfind("off", 0) == 0 ? "warning: " : "")
              << "network walls " << walls << "\n";
  }
  p->loop->Start(p->manager.get());

  if (p->collector) p->collector->Start();

  ApiServer::Options ao;
  ao.loop = p->loop.get();
  ao.collector = p->collector.get();
  p->login_codes = std::make_unique<auth::LoginCodes>(&p->clock);
  ao.login_codes = p->login_codes.get();
  ao.ui_dir = config.ui_dir.empty() ? std::string(TARN_UI_DIR) : config.ui_dir;
  ao.ui_origin = [parts = p.get()] {
    const int port = parts->ui_port.load();
    if (port == 0) return std::string();
    return std::string(parts->tls ? "https://" : "http://") + parts->ui_host + ":" +
           std::to_string(port);
  };
  ao.authenticator = p->authenticator.get();
  ao.auth_store = p->auth_store.get();
  ao.audit = p->audit.get();
  ao.clock = &p->clock;
  const HttpConfig& hc = config.http;
  if (hc.threads.value_or(0) > 0) ao.http.threads = *hc.threads;
  ao.http.max_connections = hc.max_connections.value_or(ao.http.max_connections);
  ao.http.max_body_bytes = hc.max_body_bytes.value_or(ao.http.max_body_bytes);
  ao.http.header_timeout = hc.header_timeout.value_or(ao.http.header_timeout);
  ao.http.body_timeout = hc.body_timeout.value_or(ao.http.body_timeout);
  ao.http.idle_timeout = hc.idle_timeout.value_or(ao.http.idle_timeout);
  ao.domain = config.domain;
  ao.version = TARN_VERSION;
  ao.openapi_yaml = OpenApiYaml();
  ao.server_metrics = [parts = p.get()] {
    std::vector<std::pair<std::string, registry::DnsServer::Counters>> listeners;
    if (parts->dns) listeners.emplace_back(parts->dns_address, parts->dns->counters());
    if (parts->container_dns) {
      listeners.emplace_back(parts->container_dns_address, parts->container_dns->counters());
    }
    std::string text = listeners.empty() ? std::string() : registry::DnsPrometheusText(listeners);
    text += PreemptionPrometheusText(parts->preemption_counters);
    if (parts->collector) {
      text +=
          "# HELP tarn_metrics_scrapes_total Scrapes of instances' /metrics.\n"
          "# TYPE tarn_metrics_scrapes_total counter\ntarn_metrics_scrapes_total " +
          std::to_string(parts->collector->scrapes()) +
          "\n# HELP tarn_metrics_scrape_failures_total Scrapes that read nothing.\n"
          "# TYPE tarn_metrics_scrape_failures_total counter\n"
          "tarn_metrics_scrape_failures_total " +
          std::to_string(parts->collector->failures()) +
          "\n# HELP tarn_metrics_series Series the server keeps of its instances.\n"
          "# TYPE tarn_metrics_series gauge\ntarn_metrics_series " +
          std::to_string(parts->collector->store().series_count()) + "\n";
    }
    return text;
  };
  // Each connection is a descriptor: make room for the cap, plus the server's own files.
  if (rlimit nofile{}; ::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    const rlim_t want = static_cast<rlim_t>(ao.http.max_connections) + 256;
    if (nofile.rlim_cur < want) {
      nofile.rlim_cur = std::min(want, nofile.rlim_max);
      ::setrlimit(RLIMIT_NOFILE, &nofile);
    }
    if (nofile.rlim_cur < want) {
      std::cerr << "tarn server: warning: the open-file limit (" << nofile.rlim_cur
                << ") is below http.max_connections (" << ao.http.max_connections
                << ") + 256; raise it (ulimit -Hn) or lower the cap\n";
    }
  }
  p->api = std::make_unique<ApiServer>(ao);
  p->socket_path = flags.socket.empty() ? DefaultSocketPath(p->state_dir) : flags.socket;
  if (const size_t slash = p->socket_path.rfind('/'); slash != std::string::npos && slash > 0) {
    // Every account must reach the socket (the kernel says who each one is).
    const std::string dir = p->socket_path.substr(0, slash);
    RETURN_IF_ERROR(MakeDirectories(dir, 0755).WithContext("--socket"));
  }
  std::vector<http::Listener> listeners = {http::Listener::Unix(p->socket_path, 0666)};
  if (listen) {
    http::Listener tcp;
    tcp.host = listen->first;
    tcp.port = listen->second;
    tcp.tls_cert_file = config.tls.cert_file;
    tcp.tls_key_file = config.tls.key_file;
    listeners.push_back(std::move(tcp));
    // A wildcard listener is reached by the machine's name; IPv6 literals go in brackets.
    std::string host = listen->first;
    if (host == "0.0.0.0" || host == "::" || host.empty()) {
      char name[256] = {};
      host = ::gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
    }
    p->ui_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  }
  p->tls = tls;  // before Start: the login-code route reads it
  auto ports = p->api->Start(listeners);
  if (!ports.ok()) {
    Daemon d(std::move(p));  // shuts the parts down in order
    const bool socket_failed = ports.status().message().find("unix:") != std::string::npos;
    return InvalidArgumentError((socket_failed ? "--socket: " : "--listen: ") +
                                ports.status().message());
  }
  if (listen) {
    p->address =
        (listen->first.find(':') != std::string::npos ? "[" + listen->first + "]" : listen->first) +
        ":" + std::to_string((*ports)[1]);
    p->ui_port.store((*ports)[1]);
  }
  return std::unique_ptr<Daemon>(new Daemon(std::move(p)));
}

int RunServerCommand(const ServerFlags& flags) {
  // Block the stop signals in every thread; this one waits for them.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  auto daemon = Daemon::Start(flags);
  if (!daemon.ok()) {
    std::cerr << "tarn server: " << daemon.status().message() << "\n";
    return 1;
  }
  const Daemon& d = **daemon;
  std::cout << "tarn server " << TARN_VERSION << " listening on ";
  if (!d.address().empty()) {
    std::cout << (d.tls() ? "https://" : "http://") << d.address() << " and ";
  }
  std::cout << "unix:" << d.socket_path() << " (DNS on "
            << ((*daemon)->dns_address().empty() ? "no address" : (*daemon)->dns_address())
            << ", state in " << (*daemon)->state_dir() << ")" << std::endl;
  int sig = 0;
  ::sigwait(&mask, &sig);
  std::cout << "tarn server: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << ": stopping (instances keep running; a restarted server finds them again)"
            << std::endl;
  (*daemon)->Shutdown();
  return 0;
}

}  // namespace tarn::api
