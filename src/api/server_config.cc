#include "api/server_config.h"

#include <arpa/inet.h>

#include <nlohmann/json.hpp>

#include "backend/local_backend.h"
#include "common/dns_name.h"
#include "registry/dns_forwarder.h"

namespace tarn::api {
namespace {

using json = nlohmann::json;

Status Bad(const std::string& source, const std::string& key, const std::string& what) {
  return InvalidArgumentError(source + ": " + key + ": " + what);
}

StatusOr<int64_t> PositiveInt(const json& v, const std::string& source, const std::string& key,
                              int64_t min) {
  if (!v.is_number_integer() || v.get<int64_t>() < min) {
    return Bad(source, key,
               "expected a whole number >= " + std::to_string(min) + ", got " + v.dump());
  }
  return v.get<int64_t>();
}

StatusOr<std::string> String(const json& v, const std::string& source, const std::string& key) {
  if (!v.is_string()) return Bad(source, key, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

StatusOr<BackendConfig> ParseBackend(const json& v, const std::string& source) {
  BackendConfig b;
  if (!v.is_object())
    return Bad(source, "backend", "expected an object such as {\"type\": \"local\"}");
  auto type = v.find("type");
  if (type == v.end() || !type->is_string() || (*type != "local" && *type != "slurm")) {
    return Bad(
        source, "backend.type",
        "expected \"local\" or \"slurm\", got " + (type == v.end() ? "nothing" : type->dump()));
  }
  b.type = *type == "slurm" ? BackendConfig::Type::kSlurm : BackendConfig::Type::kLocal;
  for (auto f = v.begin(); f != v.end(); ++f) {
    const std::string& k = f.key();
    const std::string at = "backend." + k;
    if (k == "type") continue;
    if (b.type == BackendConfig::Type::kLocal) {
      return Bad(source, at, "unknown field (the local backend has no settings but \"type\")");
    }
    if (k == "slurm_conf") {
      ASSIGN_OR_RETURN(b.slurm_conf, String(*f, source, at));
    } else if (k == "partition") {
      ASSIGN_OR_RETURN(b.partition, String(*f, source, at));
    } else if (k == "account") {
      ASSIGN_OR_RETURN(b.account, String(*f, source, at));
    } else if (k == "qos") {
      ASSIGN_OR_RETURN(b.qos, String(*f, source, at));
    } else if (k == "priority_qos") {
      // [{"priority": P, "qos": "NAME"}]: a job of priority p takes the QOS of the entry
      // with the highest priority <= p (backend::MapPriority).
      if (!f->is_array()) return Bad(source, at, "expected a list of {\"priority\", \"qos\"}");
      for (size_t n = 0; n < f->size(); ++n) {
        const std::string an = at + "[" + std::to_string(n) + "]";
        const json& e = (*f)[n];
        if (!e.is_object()) return Bad(source, an, "expected {\"priority\": P, \"qos\": NAME}");
        backend::PriorityQos pq;
        bool has_priority = false;
        for (auto g = e.begin(); g != e.end(); ++g) {
          const std::string gk = an + "." + g.key();
          if (g.key() == "priority") {
            if (!g->is_number_integer() || g->get<int64_t>() < kMinPriority ||
                g->get<int64_t>() > kMaxPriority) {
              return Bad(source, gk,
                         "expected an integer from " + std::to_string(kMinPriority) + " to " +
                             std::to_string(kMaxPriority) + ", got " + g->dump());
            }
            pq.priority = g->get<int>();
            has_priority = true;
          } else if (g.key() == "qos") {
            ASSIGN_OR_RETURN(pq.qos, String(*g, source, gk));
            if (pq.qos.empty() || pq.qos.find_first_of(" ,=\t\n") != std::string::npos) {
              return Bad(source, gk, "expected a QOS name, got " + g->dump());
            }
          } else {
            return Bad(source, gk, "unknown field (expected priority, qos)");
          }
        }
        if (!has_priority) return Bad(source, an + ".priority", "required");
        if (pq.qos.empty()) return Bad(source, an + ".qos", "required");
        for (const backend::PriorityQos& other : b.priority_qos) {
          if (other.priority == pq.priority) {
            return Bad(source, an + ".priority",
                       "priority " + std::to_string(pq.priority) + " is listed twice");
          }
        }
        b.priority_qos.push_back(std::move(pq));
      }
    } else if (k == "shared_dir") {
      ASSIGN_OR_RETURN(b.shared_dir, String(*f, source, at));
      if (b.shared_dir.empty() || b.shared_dir[0] != '/') {
        return Bad(source, at, "expected an absolute path, got " + f->dump());
      }
    } else if (k == "sbatch_options") {
      if (!f->is_array()) return Bad(source, at, "expected a list of strings");
      for (size_t n = 0; n < f->size(); ++n) {
        const std::string an = at + "[" + std::to_string(n) + "]";
        ASSIGN_OR_RETURN(std::string o, String((*f)[n], source, an));
        if (o.rfind("-", 0) != 0) {
          return Bad(source, an, "expected an option such as \"--time=60\", got " + (*f)[n].dump());
        }
        b.sbatch_options.push_back(std::move(o));
      }
    } else if (k == "port_range") {
      ASSIGN_OR_RETURN(std::string text, String(*f, source, at));
      StatusOr<backend::PortRange> range = backend::ParsePortRange(text);
      if (!range.ok()) return Bad(source, at, range.status().message());
      b.port_range = *range;
    } else if (k == "poll_interval_ms") {
      ASSIGN_OR_RETURN(int64_t ms, PositiveInt(*f, source, at, 50));
      b.poll_interval = std::chrono::milliseconds(ms);
    } else {
      return Bad(source, at,
                 "unknown field (expected type, slurm_conf, partition, account, qos, "
                 "priority_qos, sbatch_options, shared_dir, port_range, poll_interval_ms)");
    }
  }
  if (b.type == BackendConfig::Type::kSlurm && b.shared_dir.empty()) {
    return Bad(source, "backend.shared_dir",
               "required for the slurm backend: a directory every node sees at the same path");
  }
  return b;
}

StatusOr<auth::AuthConfig> ParseAuth(const json& v, const std::string& source) {
  auth::AuthConfig a;
  if (!v.is_object()) return Bad(source, "auth", "expected an object");
  for (auto f = v.begin(); f != v.end(); ++f) {
    const std::string fk = "auth." + f.key();
    if (f.key() == "simple") {
      if (!f->is_boolean()) return Bad(source, fk, "expected true or false, got " + f->dump());
      a.simple = f->get<bool>();
    } else if (f.key() == "admins" || f.key() == "operators") {
      ASSIGN_OR_RETURN(std::string text, String(*f, source, fk));
      StatusOr<Acl> acl = ParseAcl(text, fk);
      if (!acl.ok()) return InvalidArgumentError(source + ": " + acl.status().message());
      (f.key() == "admins" ? a.admins : a.operators) = std::move(*acl);
    } else if (f.key() == "audit_max_mb") {
      ASSIGN_OR_RETURN(int64_t mb, PositiveInt(*f, source, fk, 1));
      a.audit_max_bytes = mb << 20;
    } else if (f.key() == "audit_keep") {
      ASSIGN_OR_RETURN(int64_t n, PositiveInt(*f, source, fk, 0));
      if (n > 100) return Bad(source, fk, "at most 100");
      a.audit_keep = static_cast<int>(n);
    } else {
      return Bad(source, fk,
                 "unknown field (expected simple, admins, operators, audit_max_mb, audit_keep)");
    }
  }
  return a;
}

}  // namespace

StatusOr<ServerConfig> ParseServerConfig(const std::string& text, const std::string& source) {
  ServerConfig c;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return InvalidArgumentError(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return InvalidArgumentError(source + ": expected a JSON object");
  json queues = json::array();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k == "domain") {
      if (!v.is_string() || !IsDnsName(v.get<std::string>())) {
        return Bad(source, k, "expected a DNS name such as \"tarn\", got " + v.dump());
      }
      c.domain = v.get<std::string>();
    } else if (k == "queues") {
      if (!v.is_array()) return Bad(source, k, "expected a list of queues");
      queues = v;
    } else if (k == "nodes") {
      if (!v.is_array() || v.empty()) return Bad(source, k, "expected a non-empty list of nodes");
      for (size_t n = 0; n < v.size(); ++n) {
        const std::string at = k + "[" + std::to_string(n) + "]";
        const json& node = v[n];
        if (!node.is_object()) return Bad(source, at, "expected an object");
        scheduler::NodeSpec spec;
        for (auto f = node.begin(); f != node.end(); ++f) {
          const std::string fk = at + "." + f.key();
          if (f.key() == "name") {
            if (!f->is_string() || !IsDnsLabel(f->get<std::string>())) {
              return Bad(source, fk, "expected a DNS label, got " + f->dump());
            }
            spec.name = f->get<std::string>();
          } else if (f.key() == "vcores") {
            ASSIGN_OR_RETURN(spec.vcores, PositiveInt(*f, source, fk, 1));
          } else if (f.key() == "memory_mb") {
            ASSIGN_OR_RETURN(spec.memory_mib, PositiveInt(*f, source, fk, 1));
          } else if (f.key() == "gpus") {
            ASSIGN_OR_RETURN(int64_t g, PositiveInt(*f, source, fk, 0));
            if (g > 64) return Bad(source, fk, "at most 64 GPUs per node");
            for (int64_t i = 0; i < g; ++i) {
              spec.gpus.push_back({static_cast<int>(i), "fake GPU", 0});
            }
          } else {
            return Bad(source, fk, "unknown field (expected name, vcores, memory_mb, gpus)");
          }
        }
        if (spec.name.empty() || spec.vcores == 0 || spec.memory_mib == 0) {
          return Bad(source, at, "name, vcores and memory_mb are required");
        }
        for (const auto& other : c.nodes) {
          if (other.name == spec.name)
            return Bad(source, at + ".name", "duplicate node " + spec.name);
        }
        c.nodes.push_back(std::move(spec));
      }
    } else if (k == "reserve_mb") {
      ASSIGN_OR_RETURN(c.reserve_mib, PositiveInt(v, source, k, 0));
    } else if (k == "address_range") {
      if (!v.is_string())
        return Bad(source, k, "expected a CIDR such as \"127.42.0.0/16\" or \"\"");
      if (!v.get<std::string>().empty()) {
        auto range = backend::ParseLoopbackRange(v.get<std::string>());
        if (!range.ok()) return Bad(source, k, range.status().message());
      }
      c.address_range = v.get<std::string>();
    } else if (k == "instance_ip") {
      in_addr addr{};
      if (!v.is_string() || ::inet_pton(AF_INET, v.get<std::string>().c_str(), &addr) != 1) {
        return Bad(source, k, "expected an IPv4 address, got " + v.dump());
      }
      c.instance_ip = v.get<std::string>();
    } else if (k == "probe_interval_ms") {
      ASSIGN_OR_RETURN(int64_t ms, PositiveInt(v, source, k, 10));
      c.probe_interval = std::chrono::milliseconds(ms);
    } else if (k == "worker_threads") {
      ASSIGN_OR_RETURN(int64_t n, PositiveInt(v, source, k, 1));
      if (n > 256) return Bad(source, k, "at most 256");
      c.worker_threads = static_cast<int>(n);
    } else if (k == "restart") {
      if (!v.is_object()) return Bad(source, k, "expected an object");
      for (auto f = v.begin(); f != v.end(); ++f) {
        const std::string fk = k + "." + f.key();
        ASSIGN_OR_RETURN(int64_t ms, PositiveInt(*f, source, fk, 1));
        auto d = std::chrono::milliseconds(ms);
        if (f.key() == "initial_backoff_ms") {
          c.restart.initial_backoff = d;
        } else if (f.key() == "max_backoff_ms") {
          c.restart.max_backoff = d;
        } else if (f.key() == "healthy_reset_ms") {
          c.restart.healthy_reset = d;
        } else {
          return Bad(source, fk,
                     "unknown field (expected initial_backoff_ms, max_backoff_ms, "
                     "healthy_reset_ms)");
        }
      }
      if (c.restart.max_backoff < c.restart.initial_backoff) {
        return Bad(source, k, "max_backoff_ms is below initial_backoff_ms");
      }
    } else if (k == "container_names") {
      const std::string mode = v.is_string() ? v.get<std::string>() : "";
      if (mode == "auto") {
        c.container_names.reset();
      } else if (mode == "resolv-conf") {
        c.container_names = backend::NameResolution::Mode::kResolvConf;
      } else if (mode == "hosts") {
        c.container_names = backend::NameResolution::Mode::kHosts;
      } else if (mode == "none") {
        c.container_names = backend::NameResolution::Mode::kNone;
      } else {
        return Bad(source, k,
                   "expected \"auto\", \"resolv-conf\", \"hosts\" or \"none\", got " + v.dump());
      }
    } else if (k == "container_engine" || k == "oci_runtime") {
      if (!v.is_string() || v.get<std::string>().find_first_of(" \t\n") != std::string::npos) {
        return Bad(source, k,
                   "expected a command name or path (\"podman\", \"runc\"), got " + v.dump());
      }
      (k == "container_engine" ? c.container_engine : c.oci_runtime) = v.get<std::string>();
    } else if (k == "cgroup_favordynmods") {
      if (!v.is_boolean()) return Bad(source, k, "expected true or false, got " + v.dump());
      c.cgroup_favordynmods = v.get<bool>();
    } else if (k == "ui_dir") {
      ASSIGN_OR_RETURN(c.ui_dir, String(v, source, k));
      if (c.ui_dir.empty() || c.ui_dir[0] != '/') {
        return Bad(source, k, "expected an absolute directory, got " + v.dump());
      }
    } else if (k == "dns_upstream") {
      if (!v.is_array()) return Bad(source, k, "expected a list of \"IP\" or \"IP:PORT\"");
      std::vector<std::string> upstream;
      for (size_t n = 0; n < v.size(); ++n) {
        const std::string at = k + "[" + std::to_string(n) + "]";
        if (!v[n].is_string()) return Bad(source, at, "expected \"IP\" or \"IP:PORT\"");
        if (Status ok = registry::ParseUpstream(v[n].get<std::string>()).status(); !ok.ok()) {
          return Bad(source, at, ok.message());
        }
        upstream.push_back(v[n].get<std::string>());
      }
      c.dns_upstream = std::move(upstream);
    } else if (k == "backend") {
      ASSIGN_OR_RETURN(c.backend, ParseBackend(v, source));
    } else if (k == "http") {
      if (!v.is_object()) return Bad(source, k, "expected an object");
      for (auto f = v.begin(); f != v.end(); ++f) {
        const std::string fk = k + "." + f.key();
        if (f.key() == "threads") {
          ASSIGN_OR_RETURN(int64_t n, PositiveInt(*f, source, fk, 0));
          if (n > 64) return Bad(source, fk, "at most 64");
          c.http.threads = static_cast<int>(n);
        } else if (f.key() == "max_connections") {
          ASSIGN_OR_RETURN(int64_t n, PositiveInt(*f, source, fk, 1));
          c.http.max_connections = static_cast<size_t>(n);
        } else if (f.key() == "max_body_bytes") {
          ASSIGN_OR_RETURN(int64_t n, PositiveInt(*f, source, fk, 1024));
          c.http.max_body_bytes = static_cast<size_t>(n);
        } else if (f.key() == "header_timeout_ms") {
          ASSIGN_OR_RETURN(int64_t ms, PositiveInt(*f, source, fk, 100));
          c.http.header_timeout = std::chrono::milliseconds(ms);
        } else if (f.key() == "body_timeout_ms") {
          ASSIGN_OR_RETURN(int64_t ms, PositiveInt(*f, source, fk, 100));
          c.http.body_timeout = std::chrono::milliseconds(ms);
        } else if (f.key() == "idle_timeout_ms") {
          ASSIGN_OR_RETURN(int64_t ms, PositiveInt(*f, source, fk, 100));
          c.http.idle_timeout = std::chrono::milliseconds(ms);
        } else {
          return Bad(source, fk,
                     "unknown field (expected threads, max_connections, max_body_bytes, "
                     "header_timeout_ms, body_timeout_ms, idle_timeout_ms)");
        }
      }
    } else if (k == "metrics") {
      if (!v.is_object()) return Bad(source, k, "expected an object");
      for (auto f = v.begin(); f != v.end(); ++f) {
        const std::string fk = k + "." + f.key();
        if (f.key() == "scrape_interval_ms") {
          ASSIGN_OR_RETURN(int64_t ms, PositiveInt(*f, source, fk, 0));
          if (ms > 0 && ms < 100) return Bad(source, fk, "0 (no scraping) or at least 100");
          c.metrics.scrape_interval = std::chrono::milliseconds(ms);
        } else if (f.key() == "scrape_timeout_ms") {
          ASSIGN_OR_RETURN(int64_t ms, PositiveInt(*f, source, fk, 10));
          c.metrics.scrape_timeout = std::chrono::milliseconds(ms);
        } else if (f.key() == "points_per_series") {
          ASSIGN_OR_RETURN(int64_t n, PositiveInt(*f, source, fk, 2));
          if (n > 100000) return Bad(source, fk, "at most 100000");
          c.metrics.store.points_per_series = static_cast<size_t>(n);
        } else if (f.key() == "series_per_instance") {
          ASSIGN_OR_RETURN(int64_t n, PositiveInt(*f, source, fk, 1));
          c.metrics.store.series_per_instance = static_cast<size_t>(n);
        } else if (f.key() == "max_series") {
          ASSIGN_OR_RETURN(int64_t n, PositiveInt(*f, source, fk, 1));
          c.metrics.store.max_series = static_cast<size_t>(n);
        } else {
          return Bad(source, fk,
                     "unknown field (expected scrape_interval_ms, scrape_timeout_ms, "
                     "points_per_series, series_per_instance, max_series)");
        }
      }
      if (c.metrics.scrape_timeout > c.metrics.scrape_interval &&
          c.metrics.scrape_interval.count() > 0) {
        return Bad(source, k, "scrape_timeout_ms is above scrape_interval_ms");
      }
    } else if (k == "scheduler") {
      if (!v.is_object()) {
        return Bad(source, k, "expected {\"reservation_after_secs\": N, \"preemption\": BOOL}");
      }
      for (auto f = v.begin(); f != v.end(); ++f) {
        const std::string fk = k + "." + f.key();
        if (f.key() == "preemption") {
          if (!f->is_boolean()) return Bad(source, fk, "expected true or false, got " + f->dump());
          c.preemption = f->get<bool>();
          continue;
        }
        if (f.key() != "reservation_after_secs") {
          return Bad(source, fk, "unknown field (expected reservation_after_secs, preemption)");
        }
        ASSIGN_OR_RETURN(int64_t secs, PositiveInt(*f, source, fk, 0));
        if (secs > 31536000) return Bad(source, fk, "at most 31536000 (a year)");
        c.reservation_after = std::chrono::seconds(secs);
      }
    } else if (k == "auth") {
      ASSIGN_OR_RETURN(c.auth, ParseAuth(v, source));
    } else if (k == "tls") {
      if (!v.is_object()) return Bad(source, k, "expected {\"cert\": PEM_FILE, \"key\": PEM_FILE}");
      for (auto f = v.begin(); f != v.end(); ++f) {
        const std::string fk = k + "." + f.key();
        if (f.key() != "cert" && f.key() != "key") {
          return Bad(source, fk, "unknown field (expected cert, key)");
        }
        ASSIGN_OR_RETURN(std::string file, String(*f, source, fk));
        if (file.empty() || file[0] != '/') {
          return Bad(source, fk, "expected an absolute path to a PEM file, got " + f->dump());
        }
        (f.key() == "cert" ? c.tls.cert_file : c.tls.key_file) = file;
      }
      if (c.tls.cert_file.empty() || c.tls.key_file.empty()) {
        return Bad(source, k, "needs both cert and key");
      }
    } else {
      return Bad(
          source, k,
          "unknown key (expected domain, queues, nodes, reserve_mb, address_range, "
          "instance_ip, probe_interval_ms, worker_threads, restart, container_names, "
          "container_engine, oci_runtime, cgroup_favordynmods, ui_dir, dns_upstream, backend, "
          "http, metrics, "
          "scheduler, auth, tls)");
    }
  }
  auto parsed = scheduler::ParseQueues(queues);
  if (!parsed.ok()) return InvalidArgumentError(source + ": " + parsed.status().message());
  c.queues = std::move(*parsed);
  return c;
}

}  // namespace tarn::api
