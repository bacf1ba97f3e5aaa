#include "api/api_server.h"

#include <fcntl.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "api/json_views.h"
#include "common/dns_name.h"
#include "common/number.h"
#include "spec/parser.h"

namespace tarn::api {
namespace {

using json = nlohmann::json;

int HttpStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAborted:
      return 409;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

void Reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void Error(httplib::Response& res, int status, const std::string& diagnostics) {
  Reply(res, status, json{{"diagnostics", diagnostics}});
}

void Error(httplib::Response& res, const Status& s) { Error(res, HttpStatus(s), s.message()); }

// The caller, from ?user.name= (Hadoop's simple auth), as a DNS label; replies and returns
// false when it is missing or unusable.
bool User(const httplib::Request& req, httplib::Response& res, std::string* user) {
  if (!req.has_param("user.name") || req.get_param_value("user.name").empty()) {
    Error(res, 401,
          "no user: add ?user.name=NAME to the request (Hadoop simple authentication); "
          "the tarn CLI sends it for you");
    return false;
  }
  *user = UserToDnsLabel(req.get_param_value("user.name"));
  if (!IsDnsLabel(*user)) {
    Error(res, 400,
          "user.name: \"" + req.get_param_value("user.name") +
              "\" does not map to a DNS label (letters, digits and '-', at most 63)");
    return false;
  }
  return true;
}

bool ParseBody(const httplib::Request& req, httplib::Response& res, json* body) {
  try {
    *body = json::parse(req.body);
  } catch (const json::parse_error& e) {
    Error(res, 400, std::string("request body is not valid JSON: ") + e.what());
    return false;
  }
  if (!body->is_object()) {
    Error(res, 400, "request body: expected a JSON object");
    return false;
  }
  return true;
}

// Rejects fields other than `allowed`, naming the first unknown one.
bool OnlyFields(const json& body, std::initializer_list<const char*> allowed,
                httplib::Response& res) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    bool ok = false;
    for (const char* a : allowed) ok |= it.key() == a;
    if (!ok) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      Error(res, 400, "request body: unknown field \"" + it.key() + "\" (expected " + list + ")");
      return false;
    }
  }
  return true;
}

constexpr double kLatencyBuckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                      0.05,   0.1,   0.25,   0.5,   1,    2.5};

}  // namespace

StatusOr<std::pair<std::string, int>> ParseHostPort(const std::string& text,
                                                    const std::string& what) {
  std::string s = text;
  if (s.rfind("http://", 0) == 0) s = s.substr(7);
  while (!s.empty() && s.back() == '/') s.pop_back();
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgumentError(what + ": \"" + text + "\" is not HOST:PORT");
  }
  std::string host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  auto port = ParseInt64(s.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) {
    return InvalidArgumentError(what + ": \"" + text + "\" has no valid port (0..65535)");
  }
  return std::make_pair(host, static_cast<int>(*port));
}

ApiServer::ApiServer(Options options)
    : options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  const int threads = options_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_tcp_nodelay(true);
  http_->set_keep_alive_max_count(100000);
  // An idle keep-alive connection holds a worker thread, and shutdown waits for it.
  http_->set_keep_alive_timeout(5);
  http_->set_read_timeout(5);
  http_->set_write_timeout(30);
  http_->set_payload_max_length(options_.max_body_bytes);
  Routes();
}

ApiServer::~ApiServer() = default;

StatusOr<int> ApiServer::Bind(const std::string& host, int port) {
  if (port == 0) {
    int p = http_->bind_to_any_port(host);
    if (p <= 0) return UnavailableError("cannot listen on " + host + ":0");
    return p;
  }
  if (!http_->bind_to_port(host, port)) {
    return UnavailableError("cannot listen on " + host + ":" + std::to_string(port) +
                            " (in use, or not an address of this machine)");
  }
  return port;
}

void ApiServer::Serve() { http_->listen_after_bind(); }

void ApiServer::Shutdown() { http_->stop(); }

void ApiServer::CountRequest(const std::string& method, int status, double seconds) {
  std::lock_guard lock(metrics_mu_);
  ++requests_[{method, status}];
  for (double le : kLatencyBuckets) {
    if (seconds <= le) {
      ++latency_buckets_[le];
      break;
    }
  }
  latency_sum_ += seconds;
  ++latency_count_;
}

std::string ApiServer::Metrics() const {
  std::string out;
  {
    std::lock_guard lock(metrics_mu_);
    out += "# HELP tarn_http_requests_total HTTP requests to the API, by method and status.\n";
    out += "# TYPE tarn_http_requests_total counter\n";
    for (const auto& [key, n] : requests_) {
      out += "tarn_http_requests_total{method=\"" + key.first + "\",code=\"" +
             std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
    }
    out += "# HELP tarn_http_request_duration_seconds Time to answer an API request.\n";
    out += "# TYPE tarn_http_request_duration_seconds histogram\n";
    uint64_t cumulative = 0;
    for (double le : kLatencyBuckets) {
      auto it = latency_buckets_.find(le);
      if (it != latency_buckets_.end()) cumulative += it->second;
      char buf[128];
      std::snprintf(buf, sizeof buf, "tarn_http_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                    le, static_cast<unsigned long long>(cumulative));
      out += buf;
    }
    out += "tarn_http_request_duration_seconds_bucket{le=\"+Inf\"} " +
           std::to_string(latency_count_) + "\n";
    char buf[96];
    std::snprintf(buf, sizeof buf, "tarn_http_request_duration_seconds_sum %.6f\n", latency_sum_);
    out += buf;
    out += "tarn_http_request_duration_seconds_count " + std::to_string(latency_count_) + "\n";
  }
  std::map<std::string, int64_t> assemblies, instances;
  int64_t restarts = 0;
  options_.loop->Call([&](service::Manager& m) {
    for (const auto& a : m.List("")) {
      ++assemblies[a.state];
      for (const auto& c : a.components) {
        for (const auto& i : c.instances) {
          ++instances[i.state];
          restarts += i.restarts;
        }
      }
    }
  });
  out +=
      "# HELP tarn_assemblies Assemblies of every user, by state.\n# TYPE tarn_assemblies gauge\n";
  for (const auto& [state, n] : assemblies) {
    out += "tarn_assemblies{state=\"" + state + "\"} " + std::to_string(n) + "\n";
  }
  out +=
      "# HELP tarn_instances Instances of every assembly, by state.\n# TYPE tarn_instances gauge\n";
  for (const auto& [state, n] : instances) {
    out += "tarn_instances{state=\"" + state + "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP tarn_instance_restarts Restarts of the instances that exist now.\n";
  out += "# TYPE tarn_instance_restarts gauge\ntarn_instance_restarts " + std::to_string(restarts) +
         "\n";
  out += "# HELP tarn_loop_events_total Backend events the service loop handled.\n";
  out += "# TYPE tarn_loop_events_total counter\ntarn_loop_events_total " +
         std::to_string(options_.loop->events_handled()) + "\n";
  out += "# HELP tarn_loop_calls_total API calls the service loop ran.\n";
  out += "# TYPE tarn_loop_calls_total counter\ntarn_loop_calls_total " +
         std::to_string(options_.loop->calls_handled()) + "\n";
  if (options_.server_metrics) out += options_.server_metrics();
  return out;
}

void ApiServer::Routes() {
  // Every route is registered through Timed(), which counts it for /metrics.
  struct Router {
    ApiServer* self;
    httplib::Server& http;
    httplib::Server::Handler Timed(httplib::Server::Handler handler) {
      return [self = self, handler](const httplib::Request& req, httplib::Response& res) {
        auto t0 = std::chrono::steady_clock::now();
        handler(req, res);
        // A handler that sets no status (a streamed body, the logs) is sent as httplib
        // sends it: 200, or 206 for a range; count what the client gets.
        const int sent = res.status != -1 ? res.status : req.ranges.empty() ? 200 : 206;
        self->CountRequest(
            req.method, sent,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      };
    }
    void Get(const std::string& p, httplib::Server::Handler f) {
      Note("GET", p);
      http.Get(p, Timed(f));
    }
    void Post(const std::string& p, httplib::Server::Handler f) {
      Note("POST", p);
      http.Post(p, Timed(f));
    }
    void Put(const std::string& p, httplib::Server::Handler f) {
      Note("PUT", p);
      http.Put(p, Timed(f));
    }
    void Delete(const std::string& p, httplib::Server::Handler f) {
      Note("DELETE", p);
      http.Delete(p, Timed(f));
    }
    // Remembered so that a known path asked with another method gets 405, not 404.
    void Note(const std::string& method, const std::string& pattern) {
      self->routes_.push_back({std::regex(pattern), method});
    }
  };
  Router h{this, *http_};
  ServiceLoop& loop = *options_.loop;
  const std::string domain = options_.domain;

  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string allowed;
    if (res.status == 404) {
      for (const auto& [pattern, method] : routes_) {
        if (std::regex_match(req.path, pattern) && allowed.find(method) == std::string::npos) {
          allowed += (allowed.empty() ? "" : ", ") + method;
        }
      }
    }
    if (!allowed.empty()) {
      res.set_header("Allow", allowed);
      Error(res, 405,
            req.method + " is not allowed on " + req.path + " (allowed: " + allowed + ")");
    } else if (res.status == 404) {
      Error(res, 404, "no such path: " + req.method + " " + req.path + " (see docs/api.md)");
    } else if (res.status == 413) {
      Error(res, 413, "request body too large");
    } else if (res.status == 400) {
      Error(res, 400, "malformed HTTP request");
    } else {
      Error(res, res.status, "HTTP " + std::to_string(res.status));
    }
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        Error(res, 500, "internal error: " + what);
      });

  h.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Metrics(), "text/plain; version=0.0.4");
  });
  h.Get("/tarn/v1/openapi.yaml", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(options_.openapi_yaml, "application/yaml");
  });
  h.Get("/app/v1/services/version", [this](const httplib::Request&, httplib::Response& res) {
    Reply(res, 200, json{{"tarn_version", options_.version}, {"api", "v1"}});
  });

  h.Post("/app/v1/services", [&loop, domain](const httplib::Request& req, httplib::Response& res) {
    std::string user;
    if (!User(req, res, &user)) return;
    json body;
    if (!ParseBody(req, res, &body)) return;
    spec::ParseOptions po;
    po.user = user;
    po.domain = domain;
    spec::ParseResult parsed = spec::ParseAssemblyJson(body, po);
    if (!parsed.ok()) {
      std::string msg;
      for (const auto& d : parsed.diagnostics) {
        if (d.severity != spec::Severity::kError) continue;
        if (!msg.empty()) msg += "; ";
        msg += spec::FormatDiagnostic("request body", d);
      }
      Error(res, 400, msg);
      return;
    }
    Status st;
    bool ran =
        loop.Call([&](service::Manager& m) { st = m.Launch(user, *parsed.assembly, body.dump()); });
    if (!ran) return Error(res, 503, "tarn server is shutting down");
    if (!st.ok()) return Error(res, st);
    const std::string& name = parsed.assembly->name;
    Reply(res, 202,
          json{{"uri", "/app/v1/services/" + name},
               {"diagnostics", "Application " + name + " accepted for user " + user},
               {"state", parsed.assembly->desired_state == spec::DesiredState::kStopped
                             ? "STOPPED"
                             : "ACCEPTED"}});
  });

  h.Get("/app/v1/services", [&loop](const httplib::Request& req, httplib::Response& res) {
    std::string user;
    if (!User(req, res, &user)) return;
    std::vector<service::AssemblyStatus> list;
    if (!loop.Call([&](service::Manager& m) { list = m.List(user); })) {
      return Error(res, 503, "tarn server is shutting down");
    }
    json out = json::array();
    for (const auto& a : list) out.push_back(ServiceSummaryJson(a));
    Reply(res, 200, out);
  });

  h.Get(R"(/app/v1/services/([^/]+))",
        [&loop](const httplib::Request& req, httplib::Response& res) {
          std::string user;
          if (!User(req, res, &user)) return;
          const std::string name = req.matches[1];
          StatusOr<service::AssemblyStatus> st = NotFoundError("");
          if (!loop.Call([&](service::Manager& m) { st = m.Get(user, name); })) {
            return Error(res, 503, "tarn server is shutting down");
          }
          if (!st.ok()) return Error(res, st.status());
          Reply(res, 200, ServiceJson(*st));
        });

  h.Put(
      R"(/app/v1/services/([^/]+))", [&loop](const httplib::Request& req, httplib::Response& res) {
        std::string user;
        if (!User(req, res, &user)) return;
        const std::string name = req.matches[1];
        json body;
        if (!ParseBody(req, res, &body)) return;
        if (!OnlyFields(body, {"state", "lifetime", "name"}, res)) return;
        if (body.contains("name") && body["name"] != name) {
          return Error(res, 400,
                       "name: the body names " + body["name"].dump() + " but the path names \"" +
                           name + "\"");
        }
        std::string diagnostics;
        Status st;
        if (body.contains("state")) {
          if (body.contains("lifetime")) {
            return Error(res, 400, "request body: give either state or lifetime, not both");
          }
          const json& s = body["state"];
          if (!s.is_string() || (s != "STOPPED" && s != "STARTED")) {
            return Error(res, 400, "state: expected \"STOPPED\" or \"STARTED\", got " + s.dump());
          }
          bool stop = s == "STOPPED";
          if (!loop.Call([&](service::Manager& m) {
                st = stop ? m.Stop(user, name) : m.Start(user, name);
              })) {
            return Error(res, 503, "tarn server is shutting down");
          }
          diagnostics = "Service " + name + " is successfully " + (stop ? "stopped." : "started.");
        } else if (body.contains("lifetime")) {
          const json& l = body["lifetime"];
          if (!l.is_number_integer()) {
            return Error(res, 400, "lifetime: expected whole seconds (or -1), got " + l.dump());
          }
          int64_t seconds = l.get<int64_t>();
          if (!loop.Call([&](service::Manager& m) { st = m.SetLifetime(user, name, seconds); })) {
            return Error(res, 503, "tarn server is shutting down");
          }
          diagnostics = "Service " + name + "'s lifetime is " +
                        (seconds < 0 ? "unlimited" : std::to_string(seconds) + " s from now");
        } else {
          return Error(res, 400,
                       "request body: expected {\"state\": \"STOPPED\"|\"STARTED\"} or "
                       "{\"lifetime\": SECONDS}");
        }
        if (!st.ok()) return Error(res, st);
        Reply(res, 200, json{{"diagnostics", diagnostics}});
      });

  h.Put(R"(/app/v1/services/([^/]+)/components/([^/]+))", [&loop](const httplib::Request& req,
                                                                  httplib::Response& res) {
    std::string user;
    if (!User(req, res, &user)) return;
    const std::string name = req.matches[1];
    const std::string comp = req.matches[2];
    json body;
    if (!ParseBody(req, res, &body)) return;
    if (!OnlyFields(body, {"number_of_containers", "name"}, res)) return;
    if (body.contains("name") && body["name"] != comp) {
      return Error(res, 400,
                   "name: the body names " + body["name"].dump() +
                       " but the path names component \"" + comp + "\"");
    }
    if (!body.contains("number_of_containers")) {
      return Error(res, 400, "number_of_containers: missing");
    }
    const json& n = body["number_of_containers"];
    if (!n.is_number_integer()) {
      return Error(res, 400, "number_of_containers: expected a whole number, got " + n.dump());
    }
    StatusOr<int64_t> before = int64_t{0};
    if (!loop.Call(
            [&](service::Manager& m) { before = m.Flex(user, name, comp, n.get<int64_t>()); })) {
      return Error(res, 503, "tarn server is shutting down");
    }
    if (!before.ok()) return Error(res, before.status());
    Reply(res, 200,
          json{{"diagnostics", "Updating component (" + comp + ") size from " +
                                   std::to_string(*before) + " to " +
                                   std::to_string(n.get<int64_t>())}});
  });

  h.Delete(R"(/app/v1/services/([^/]+))",
           [&loop](const httplib::Request& req, httplib::Response& res) {
             std::string user;
             if (!User(req, res, &user)) return;
             const std::string name = req.matches[1];
             Status st;
             if (!loop.Call([&](service::Manager& m) { st = m.Destroy(user, name); })) {
               return Error(res, 503, "tarn server is shutting down");
             }
             if (!st.ok()) return Error(res, st);
             Reply(res, 200, json{{"diagnostics", "Successfully destroyed service " + name}});
           });

  h.Get("/tarn/v1/nodes", [&loop](const httplib::Request& req, httplib::Response& res) {
    std::string user;
    if (!User(req, res, &user)) return;
    json out;
    if (!loop.Call([&](service::Manager& m) { out = NodesJson(m.backend().Nodes()); })) {
      return Error(res, 503, "tarn server is shutting down");
    }
    Reply(res, 200, out);
  });

  h.Get("/tarn/v1/queues", [&loop](const httplib::Request& req, httplib::Response& res) {
    std::string user;
    if (!User(req, res, &user)) return;
    json out;
    if (!loop.Call([&](service::Manager& m) { out = QueuesJson(m.backend().Queues()); })) {
      return Error(res, 503, "tarn server is shutting down");
    }
    Reply(res, 200, out);
  });

  h.Get(R"(/tarn/v1/services/([^/]+)/events)",
        [&loop](const httplib::Request& req, httplib::Response& res) {
          std::string user;
          if (!User(req, res, &user)) return;
          const std::string name = req.matches[1];
          StatusOr<std::vector<service::Event>> events = NotFoundError("");
          if (!loop.Call([&](service::Manager& m) { events = m.Events(user, name); })) {
            return Error(res, 503, "tarn server is shutting down");
          }
          if (!events.ok()) return Error(res, events.status());
          Reply(res, 200, EventsJson(*events));
        });

  h.Get(R"(/tarn/v1/services/([^/]+)/instances/([^/]+)/logs)", [&loop](const httplib::Request& req,
                                                                       httplib::Response& res) {
    std::string user;
    if (!User(req, res, &user)) return;
    const std::string name = req.matches[1];
    const std::string instance = req.matches[2];
    std::string stream = req.has_param("stream") ? req.get_param_value("stream") : "stdout";
    if (stream != "stdout" && stream != "stderr") {
      return Error(res, 400, "stream: expected stdout or stderr, got \"" + stream + "\"");
    }
    bool follow = req.has_param("follow") && req.get_param_value("follow") != "false" &&
                  req.get_param_value("follow") != "0";
    int64_t tail = -1;
    if (req.has_param("tail")) {
      auto t = ParseInt64(req.get_param_value("tail"));
      if (!t || *t < 0) {
        return Error(
            res, 400,
            "tail: expected a number of bytes, got \"" + req.get_param_value("tail") + "\"");
      }
      tail = *t;
    }
    Status st;
    std::string path, container;
    if (!loop.Call([&](service::Manager& m) {
          auto ref = m.FindInstance(user, name, instance);
          if (!ref.ok()) {
            st = ref.status();
            return;
          }
          path = m.backend().LogFile(*ref, stream == "stderr");
          container = m.InstanceContainer(user, name, instance);
        })) {
      return Error(res, 503, "tarn server is shutting down");
    }
    if (!st.ok()) return Error(res, st);
    if (path.empty()) {
      return Error(res, 404, "instance " + instance + " has no " + stream + " log yet");
    }
    struct Follow {
      std::string path;
      int64_t offset = 0;
      bool follow = false;
    };
    auto f = std::make_shared<Follow>();
    f->path = path;
    f->follow = follow;
    struct stat sb {};
    if (::stat(path.c_str(), &sb) == 0 && tail >= 0 && sb.st_size > tail) {
      f->offset = sb.st_size - tail;
    }
    res.set_chunked_content_provider(
        "text/plain", [f, &loop, user, name, instance, container](size_t, httplib::DataSink& sink) {
          for (;;) {
            int fd = ::open(f->path.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
              struct stat now {};
              if (::fstat(fd, &now) == 0 && now.st_size < f->offset) f->offset = 0;
              char buf[64 << 10];
              ssize_t n = ::pread(fd, buf, sizeof buf, f->offset);
              ::close(fd);
              if (n > 0) {
                f->offset += n;
                if (!sink.write(buf, static_cast<size_t>(n))) return false;
                return true;
              }
            }
            if (!f->follow) {
              sink.done();
              return true;
            }
            // Nothing new: go on while the same run of the instance is running.
            bool running = false;
            bool ok = loop.Call([&](service::Manager& m) {
              running = m.InstanceContainer(user, name, instance) == container &&
                        m.InstanceRunning(user, name, instance);
            });
            if (!ok || !running) {
              sink.done();
              return true;
            }
            if (!sink.is_writable()) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
          }
        });
  });
}

}  // namespace tarn::api
