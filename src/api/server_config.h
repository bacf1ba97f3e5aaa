// The daemon's configuration file (`tarn server --config FILE`): JSON, every key optional.
//
//   {
//     "domain": "tarn",                       // DNS domain of instance names
//     "queues": [{"name": "research", "capacity": 60, "maximum-capacity": 100,
//                 "acl_submit_applications": "alice,bob"}],   // YARN capacity-scheduler names
//     "nodes": [{"name": "node-1", "vcores": 64, "memory_mb": 262144, "gpus": 0}],
//                                             // a node inventory instead of this machine
//     "reserve_mb": 1024,                     // memory kept back from this machine
//     "address_range": "127.42.0.0/16",       // each instance's own address (TARN_IP) comes
//                                             // from here; "" = all share "instance_ip"
//     "instance_ip": "127.0.0.1",
//     "probe_interval_ms": 1000,              // between readiness probes of an instance
//     "worker_threads": 4,                    // the backend's container workers
//     "restart": {"initial_backoff_ms": 1000, "max_backoff_ms": 300000,
//                 "healthy_reset_ms": 600000}, // defaults; components' yarn.service.* win
//     "container_names": "auto",              // how programs in containers resolve names:
//                                             // "resolv-conf", "hosts", "none" (name_files.h);
//                                             // auto: the first this machine allows
//     "ui_dir": "/usr/share/tarn/ui",         // the dashboard's files (absent: web/dist of
//                                             // this checkout, as scripts/web builds it)
//     "container_engine": "podman",           // runs DOCKER artifacts' images (path or name)
//     "oci_runtime": "runc",                  // podman --runtime; absent: runc where crun
//                                             // fails (cgroup v1/hybrid), else podman's own
//     "cgroup_favordynmods": false,           // true: turn the kernel's favordynmods on at
//                                             // start (machine-wide, until reboot): starts
//                                             // lose ~10 ms, forks and exits pay a little
//                                             // (runtime/cgroup_dynmods.h)
//     "dns_upstream": ["10.0.0.2", "10.0.0.3:53"] // where the DNS server forwards names
//                                             // outside its domain; absent: the machine's
//                                             // /etc/resolv.conf nameservers; []: none (REFUSED)
//     "http": {"max_connections": 1024,       // the API's HTTP server (http/server.h):
//              "header_timeout_ms": 10000,    // the request head, from the connection or
//                                             // its first byte
//              "body_timeout_ms": 30000,      // the body
//              "idle_timeout_ms": 60000,      // a kept-alive connection between requests
//              "max_body_bytes": 4194304,     // 413 above
//              "threads": 0},                 // I/O threads; 0: the cores, at most 4
//     "metrics": {"scrape_interval_ms": 5000, // instances' /metrics (metrics/collector.h);
//                 "scrape_timeout_ms": 2000,  // 0: not scraped
//                 "points_per_series": 720,   // kept per series: an hour at 5 s
//                 "series_per_instance": 64,
//                 "max_series": 5000},        // in all: memory <= max_series * points * 16 B
//     "auth": {"simple": false,               // who is asking (auth/authenticator.h):
//                                             // true honours ?user.name= from loopback
//                                             // peers (Hadoop simple auth; any local
//                                             // account can then act as any other)
//              "admins": " tarn-admins",      // Hadoop ACLs ("users groups") of the admin
//              "operators": "carol ops",      // and operator roles (root is always admin)
//              "audit_max_mb": 16, "audit_keep": 4}, // the audit log's rotation
//     "tls": {"cert": "/etc/tarn/cert.pem",   // TLS on the TCP listener; required for a
//             "key": "/etc/tarn/key.pem"},    // --listen beyond loopback
//     "backend": {"type": "local"}            // where instances run (the default), or
//     "backend": {"type": "slurm",            // a Slurm cluster (backend/slurm_backend.h):
//                 "shared_dir": "/shared/tarn", // required: a directory every node sees
//                 "slurm_conf": "",           // "" = $SLURM_CONF
//                 "partition": "", "account": "", "qos": "",
//                 "priority_qos": [{"priority": 10, "qos": "urgent"}], // a QOS by tarn.priority
//                 "sbatch_options": ["--time=1-0"], // added to every sbatch
//                 "port_range": "20000-29999", // instances' port numbers, unique in the cluster
//                 "poll_interval_ms": 500}    // how often squeue is read
//   }
//
// Unknown keys and wrong types are errors naming the key, so a typo is never ignored.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "auth/authenticator.h"
#include "backend/name_files.h"
#include "backend/port_book.h"
#include "backend/slurm_commands.h"
#include "common/status.h"
#include "metrics/series_store.h"
#include "scheduler/queue_config.h"
#include "scheduler/resources.h"
#include "service/restart_policy.h"

namespace tarn::api {

// The "backend" object: which backend runs instances, and the Slurm backend's settings.
struct BackendConfig {
  enum class Type { kLocal, kSlurm };
  Type type = Type::kLocal;
  // kSlurm only (backend/slurm_backend.h says what each does).
  std::string slurm_conf;  // "" = $SLURM_CONF
  std::string partition, account, qos;
  std::vector<backend::PriorityQos> priority_qos;  // "priority_qos": [{"priority", "qos"}]
  std::vector<std::string> sbatch_options;
  std::string shared_dir;  // absolute; required for kSlurm
  backend::PortRange port_range{20000, 29999};
  std::chrono::milliseconds poll_interval{500};
};

// The "http" object: the API's limits; those not given keep ApiServer::DefaultHttpOptions.
struct HttpConfig {
  std::optional<int> threads;  // 0: the machine's cores, at most 4
  std::optional<size_t> max_connections, max_body_bytes;
  std::optional<std::chrono::milliseconds> header_timeout, body_timeout, idle_timeout;
};

// The "tls" object: the TCP listener's certificate chain and key (PEM).
// The "metrics" object: how the collector reads instances' metrics.
struct MetricsConfig {
  std::chrono::milliseconds scrape_interval{5000};  // 0: not scraped
  std::chrono::milliseconds scrape_timeout{2000};
  metrics::SeriesStore::Options store;
};

struct TlsConfig {
  std::string cert_file, key_file;  // both empty: no TLS
};

struct ServerConfig {
  std::string domain = "tarn";
  std::vector<scheduler::QueueConfig> queues;  // ParseQueues'd; includes "default"
  std::vector<scheduler::NodeSpec> nodes;      // empty: this machine
  int64_t reserve_mib = 1024;
  std::string address_range = "127.42.0.0/16";
  std::string instance_ip = "127.0.0.1";
  std::chrono::milliseconds probe_interval{1000};
  int worker_threads = 4;
  service::RestartOptions restart;
  std::optional<backend::NameResolution::Mode> container_names;  // none: auto
  std::optional<std::vector<std::string>> dns_upstream;          // none: the machine's
  std::string container_engine;                                  // "": podman
  std::string oci_runtime;  // "": auto (runtime::DockerRuntime::Options)
  bool cgroup_favordynmods = false;
  std::string ui_dir;       // the dashboard's files; "": this checkout's web/dist
  BackendConfig backend;
  HttpConfig http;
  MetricsConfig metrics;
  // "scheduler": {"reservation_after_secs": N}: how long the oldest pending request of the
  // highest priority waits before it holds a reservation (scheduler/scheduler.h).
  std::chrono::seconds reservation_after{60};
  // "scheduler": {"preemption": false}: pending work never stops running work (Slurm's
  // PreemptType=preempt/none); default true (docs/scheduling.md, "Preemption").
  bool preemption = true;
  auth::AuthConfig auth;
  TlsConfig tls;
};

// `source` names the file in errors.
StatusOr<ServerConfig> ParseServerConfig(const std::string& text, const std::string& source);

}  // namespace tarn::api
