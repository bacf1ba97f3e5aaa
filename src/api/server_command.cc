#include "api/server_command.h"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <thread>

#include "api/api_server.h"
#include "api/openapi.h"
#include "api/server_config.h"
#include "api/service_loop.h"
#include "backend/local_backend.h"
#include "common/file.h"
#include "registry/dns_server.h"
#include "registry/registry.h"
#include "runtime/shim_runtime.h"
#include "scheduler/node_inventory.h"
#include "service/manager.h"
#include "store/store.h"

namespace tarn::api {
namespace {

std::string DefaultStateDir() {
  if (::geteuid() == 0) return "/var/lib/tarn";
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    struct passwd* pw = ::getpwuid(::geteuid());
    home = pw != nullptr ? pw->pw_dir : "/tmp";
  }
  return std::string(home) + "/.local/state/tarn";
}

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

}  // namespace

struct Daemon::Parts {
  RealClock clock;
  std::string address;
  std::string dns_address;
  std::string state_dir;
  std::unique_ptr<registry::Registry> registry;
  std::unique_ptr<registry::DnsServer> dns;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<runtime::ShimRuntime> runtime;
  std::unique_ptr<ServiceLoop> loop;
  std::unique_ptr<backend::LocalBackend> backend;
  std::unique_ptr<service::Manager> manager;
  std::unique_ptr<ApiServer> api;
  std::thread serve;
  bool shut_down = false;
};

Daemon::Daemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Daemon::~Daemon() { Shutdown(); }

const std::string& Daemon::address() const { return parts_->address; }
const std::string& Daemon::state_dir() const { return parts_->state_dir; }
const std::string& Daemon::dns_address() const { return parts_->dns_address; }

void Daemon::Shutdown() {
  Parts& p = *parts_;
  if (p.shut_down) return;
  p.shut_down = true;
  if (p.api) p.api->Shutdown();
  if (p.serve.joinable()) p.serve.join();
  if (p.loop) p.loop->Stop();
  if (p.dns) p.dns->Stop();
  p.backend.reset();  // its threads end; the containers go on
  p.api.reset();
  p.manager.reset();
  p.loop.reset();
  p.store.reset();
  p.dns.reset();
  p.registry.reset();
}

StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const ServerFlags& flags) {
  ::signal(SIGPIPE, SIG_IGN);
  auto p = std::make_unique<Parts>();
  ASSIGN_OR_RETURN(auto listen, ParseHostPort(flags.listen, "--listen"));

  ServerConfig config;
  if (!flags.config.empty()) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(flags.config, 1 << 20));
    ASSIGN_OR_RETURN(config, ParseServerConfig(text, flags.config));
  } else {
    ASSIGN_OR_RETURN(config, ParseServerConfig("{}", "defaults"));
  }

  p->state_dir = flags.state_dir.empty() ? DefaultStateDir() : flags.state_dir;
  RETURN_IF_ERROR(MakeDirectories(p->state_dir, 0711));
  // Containers run as unprivileged accounts and must reach their directories below it.
  ::chmod(p->state_dir.c_str(), 0711);

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

  p->loop = std::make_unique<ServiceLoop>(p->clock);
  backend::LocalBackend::Options bo;
  bo.nodes = nodes;
  bo.queues = config.queues;
  bo.clock = &p->clock;
  bo.launch.state_dir = p->state_dir;
  bo.launch.domain = config.domain;
  bo.launch.bin_dir = bin_dir;
  bo.ip = config.instance_ip;
  bo.address_range = config.address_range;
  bo.runtime = p->runtime.get();
  ServiceLoop* loop = p->loop.get();
  bo.events = [loop](service::BackendEvent e) { loop->Post(std::move(e)); };
  bo.worker_threads = config.worker_threads;
  ASSIGN_OR_RETURN(p->backend, backend::LocalBackend::Create(std::move(bo)));

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

  service::Manager::Options mo;
  mo.clock = &p->clock;
  mo.store = p->store.get();
  mo.backend = p->backend.get();
  mo.domain = config.domain;
  mo.probe_interval = config.probe_interval;
  mo.restart = config.restart;
  mo.registry = p->registry.get();
  ASSIGN_OR_RETURN(p->manager, service::Manager::Create(mo));
  p->loop->Start(p->manager.get());

  ApiServer::Options ao;
  ao.loop = p->loop.get();
  ao.domain = config.domain;
  ao.version = TARN_VERSION;
  ao.openapi_yaml = OpenApiYaml();
  registry::DnsServer* dns = p->dns.get();
  ao.server_metrics = [dns] { return dns != nullptr ? dns->PrometheusText() : std::string(); };
  p->api = std::make_unique<ApiServer>(ao);
  auto port = p->api->Bind(listen.first, listen.second);
  if (!port.ok()) {
    Daemon d(std::move(p));  // shuts the parts down in order
    return InvalidArgumentError("--listen: " + port.status().message());
  }
  p->address =
      (listen.first.find(':') != std::string::npos ? "[" + listen.first + "]" : listen.first) +
      ":" + std::to_string(*port);
  ApiServer* api = p->api.get();
  p->serve = std::thread([api] { api->Serve(); });
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
  std::cout << "tarn server " << TARN_VERSION << " listening on http://" << (*daemon)->address()
            << " (DNS on "
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
