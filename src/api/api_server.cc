#include "api/api_server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "api/access.h"
#include "api/json_views.h"
#include "api/routes.h"
#include "api/ui_files.h"
#include "api/watches.h"
#include "auth/audit_log.h"
#include "common/number.h"
#include "spec/parser.h"

namespace tarn::api {
namespace {

// The most instances of a component one GET of a service lists when it is paged.
constexpr int64_t kMaxContainersPage = 500;

using json = nlohmann::json;

ApiRequest ParseRequest(http::Request&& r) {
  ApiRequest req;
  req.tls = r.tls;
  req.method = std::move(r.method);
  req.body = std::move(r.body);
  const std::string_view target = r.target;
  const size_t q = target.find('?');
  req.path = http::PercentDecode(target.substr(0, q), /*plus_is_space=*/false);
  if (q != std::string_view::npos) {
    std::string_view query = target.substr(q + 1);
    while (!query.empty()) {
      const size_t amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      if (!pair.empty()) {
        const size_t eq = pair.find('=');
        req.params.emplace(http::PercentDecode(pair.substr(0, eq), true),
                           eq == std::string_view::npos
                               ? std::string()
                               : http::PercentDecode(pair.substr(eq + 1), true));
      }
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }
  return req;
}

// An instance's log as a chunked body: what the file holds from `offset`, then, when
// following, what is appended while the same run of the instance goes on (as the newest
// snapshot tells).
class LogStream : public http::BodyStream {
 public:
  LogStream(const ServiceLoop& loop, std::string path, int64_t offset, bool follow,
            std::string user, std::string name, std::string instance, std::string container)
      : loop_(loop),
        path_(std::move(path)),
        offset_(offset),
        follow_(follow),
        user_(std::move(user)),
        name_(std::move(name)),
        instance_(std::move(instance)),
        container_(std::move(container)) {}

  Next Pull(std::string* chunk) override {
    if (Read(chunk)) return Next::kData;
    if (!follow_ || ended_) return Next::kEnd;
    const std::shared_ptr<const StateSnapshot> snapshot = loop_.Snapshot();
    const InstanceRun* run = snapshot->Run(user_, name_, instance_);
    if (run != nullptr && run->container_id == container_ && run->running) return Next::kWait;
    // The run ended: what it wrote before it did is in the file now.
    ended_ = true;
    return Read(chunk) ? Next::kData : Next::kEnd;
  }

 private:
  bool Read(std::string* chunk) {
    // A Slurm job writes its logs in a directory of its tenant's: a link or a FIFO put at
    // the log's name is never followed or waited on (it would show the tenant a file of
    // the server's, or block this thread).
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return false;
    struct stat now {};
    if (::fstat(fd, &now) != 0 || !S_ISREG(now.st_mode)) {
      ::close(fd);
      return false;
    }
    if (now.st_size < offset_) offset_ = 0;  // rotated or truncated
    chunk->resize(64 << 10);
    const ssize_t n = ::pread(fd, chunk->data(), chunk->size(), offset_);
    ::close(fd);
    if (n <= 0) return false;
    chunk->resize(static_cast<size_t>(n));
    offset_ += n;
    return true;
  }

  const ServiceLoop& loop_;
  const std::string path_;
  int64_t offset_;
  const bool follow_;
  const std::string user_, name_, instance_, container_;
  bool ended_ = false;
};

}  // namespace

struct ApiServer::Pool {
  explicit Pool(int threads) : pool(static_cast<size_t>(std::max(1, threads))), woken(1) {}
  boost::asio::thread_pool pool;
  // Held reads, once woken, are answered here: one thread, so that rendering a large
  // assembly's status for its watchers takes one malloc arena, not one per pool thread
  // (a 1,000-instance launch watched from 8 threads peaked 17 MiB higher).
  boost::asio::thread_pool woken;
};

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

http::Server::Options ApiServer::DefaultHttpOptions() {
  http::Server::Options o;
  o.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  o.max_body_bytes = 4 << 20;
  o.header_timeout = std::chrono::seconds(10);
  o.body_timeout = std::chrono::seconds(30);
  o.idle_timeout = std::chrono::seconds(60);
  o.write_timeout = std::chrono::seconds(30);
  o.linger_timeout = std::chrono::seconds(5);
  o.max_connections = 1024;
  return o;
}

ApiServer::ApiServer(Options options)
    : options_(std::move(options)), routes_(std::make_unique<Routes>()) {
  Register();
}

ApiServer::~ApiServer() { Shutdown(); }

StatusOr<std::vector<int>> ApiServer::Start(const std::vector<http::Listener>& listeners) {
  std::vector<int> ports;
  for (const http::Listener& listener : listeners) {
    http::Server::Options o = options_.http;
    o.listen = listener;
    o.server_header = "tarn";
    o.render_error = [](int status, const std::string& message) {
      return http::Response(status, "application/json", json{{"diagnostics", message}}.dump());
    };
    auto server = http::Server::Create(std::move(o), [this](http::Request r, http::Responder done) {
      Handle(std::move(r), std::move(done));
    });
    if (!server.ok()) {
      http_.clear();
      return server.status();
    }
    ports.push_back((*server)->port());
    http_.push_back(std::move(server).value());
  }
  pool_ = std::make_unique<Pool>(options_.blocking_threads);
  watches_ = std::make_unique<Watches>([loop = options_.loop] { return loop->Snapshot(); },
                                       options_.max_watches);
  options_.loop->OnPublish([w = watches_.get()](const StateSnapshot& s) { w->Published(s); });
  for (auto& server : http_) server->Start();
  return ports;
}

void ApiServer::Shutdown() {
  if (http_.empty()) return;
  // Held reads are answered now; streams end at their next poll; commands in the pool finish
  // (the loop still runs). The listeners drain side by side: each waits for its own
  // connections.
  options_.loop->OnPublish({});
  watches_->Close();
  std::vector<std::thread> drains;
  for (auto& server : http_) {
    drains.emplace_back([s = server.get()] { s->Drain(std::chrono::seconds(5)); });
  }
  for (std::thread& t : drains) t.join();
  pool_->pool.join();
  pool_->woken.join();
  http_.clear();
  pool_.reset();
  watches_.reset();
}

namespace {

// A TCP peer on 127.0.0.0/8 or ::1 ("127.0.0.1:40312", "[::1]:40312").
bool IsLoopbackPeer(std::string_view peer) {
  return peer.rfind("127.", 0) == 0 || peer.rfind("[::1]:", 0) == 0 ||
         peer.rfind("[::ffff:127.", 0) == 0;
}

}  // namespace

// A request whose caller is known, and how it is answered; shared, as a held request (a
// blocking read) runs again when woken.
struct ApiServer::Pending {
  const Routes::Route* route;
  ApiRequest req;
  std::shared_ptr<const auth::Caller> caller;
  std::function<void(ApiResponse, const auth::Caller*, auth::AuthFailure)> done;
  bool held = false;  // it waited for a change (a blocking read)
};

void ApiServer::Handle(http::Request request, http::Responder respond) {
  const auto t0 = std::chrono::steady_clock::now();
  // What says who is asking, taken before the request is parsed (and its strings moved).
  auth::Credentials credentials;
  if (request.credentials) {
    credentials.unix_socket = true;
    credentials.uid = request.credentials->uid;
    credentials.pid = request.credentials->pid;
  }
  std::string authorization = std::move(request.authorization);
  // The dashboard's session cookie stands for a token (session_routes.cc), over TCP and when
  // no Authorization header is sent.
  if (!request.credentials && authorization.empty()) {
    if (std::string session = CookieValue(request.cookie, kSessionCookie); !session.empty()) {
      authorization = "Bearer " + session;
      credentials.session_cookie = true;
    }
  }
  const std::string csrf = std::move(request.csrf);
  const std::string impersonate = std::move(request.impersonate_user);
  credentials.authorization = authorization;
  credentials.impersonate = impersonate;
  credentials.peer = request.peer;
  credentials.loopback = !request.credentials && IsLoopbackPeer(request.peer);
  std::shared_ptr<void>* const memo_slot = request.connection_memo;

  ApiRequest req = ParseRequest(std::move(request));
  std::shared_ptr<const auth::Caller> caller;
  // Runs where the answer is made: on this thread, or later on the pool's.
  auto finish = [this, t0, method = req.method, path = req.path, peer = credentials.peer,
                 respond = std::move(respond)](ApiResponse res, const auth::Caller* who,
                                               auth::AuthFailure failure) {
    // A held read's time is the wait it asked for, not the server's: counted, not timed.
    CountRequest(
        method, res.status,
        res.held ? -1
                 : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    Audit(method, path, peer, who, failure, res.status, res.audit_object, res.denied);
    http::Response out(res.status, std::move(res.content_type), std::move(res.body));
    out.headers = std::move(res.headers);
    out.stream = std::move(res.stream);
    respond(std::move(out));
  };
  if ((req.method == "GET" || req.method == "HEAD") && IsUiPath(req.path) &&
      !options_.ui_dir.empty()) {
    return finish(UiFile(options_.ui_dir, req.path), nullptr, auth::AuthFailure::kNone);
  }
  std::string allowed;
  const Routes::Route* route = routes_->Find(req.method, req.path, &req.matches, &allowed);
  if (route == nullptr) {
    ApiResponse res;
    if (!allowed.empty()) {
      res.set_header("Allow", allowed);
      Error(res, 405,
            req.method + " is not allowed on " + req.path + " (allowed: " + allowed + ")");
    } else {
      Error(res, 404, "no such path: " + req.method + " " + req.path + " (see docs/api.md)");
    }
    return finish(std::move(res), nullptr, auth::AuthFailure::kNone);
  }
  if (!route->open) {
    // A change a cookie authenticates must say X-Tarn-CSRF: 1, which a page of another site
    // cannot send (a custom header needs CORS, which tarn never grants); the cookie is
    // SameSite=Strict besides. GET and HEAD change nothing.
    if (credentials.session_cookie && req.method != "GET" && req.method != "HEAD" && csrf != "1") {
      ApiResponse res;
      res.denied = "a change with the session cookie but without X-Tarn-CSRF";
      Reply(res, 403,
            json{{"diagnostics",
                  "a change authenticated by the dashboard's session cookie must send the header "
                  "X-Tarn-CSRF: 1 (pages of other sites cannot)"}});
      return finish(std::move(res), nullptr, auth::AuthFailure::kNone);
    }
    auto simple = req.params.find("user.name");
    if (simple != req.params.end()) credentials.simple_user = &simple->second;
    auth::AuthFailure failure = auth::AuthFailure::kNone;
    // The connection remembers who it authenticated as (Authenticator::Remembered).
    std::shared_ptr<auth::Authenticator::Remembered> memo;
    if (memo_slot != nullptr) {
      memo = std::static_pointer_cast<auth::Authenticator::Remembered>(*memo_slot);
    }
    StatusOr<std::shared_ptr<const auth::Caller>> who =
        options_.authenticator->AuthenticateRemembered(credentials, memo_slot ? &memo : nullptr,
                                                       &failure);
    if (memo_slot != nullptr) *memo_slot = std::move(memo);
    if (!who.ok()) {
      ApiResponse res;
      const bool unauthenticated = who.status().code() == StatusCode::kUnauthenticated;
      json body = {{"diagnostics", who.status().message()}};
      if (unauthenticated) {
        body["reason"] = std::string(auth::AuthFailureName(failure));
        res.set_header("WWW-Authenticate", "Bearer realm=\"tarn\"");
      }
      Reply(res, unauthenticated ? 401 : 403, body);
      res.denied = who.status().message();
      return finish(std::move(res), nullptr, failure);
    }
    caller = std::move(who).value();
    req.caller = caller.get();
  }
  auto pending = std::make_shared<Pending>(
      Pending{route, std::move(req), std::move(caller), std::move(finish)});
  if (route->runs == Routes::Runs::kInline) return Serve(pending);
  boost::asio::post(pool_->pool, [this, pending] { Serve(pending); });
}

void ApiServer::Serve(const std::shared_ptr<Pending>& pending) {
  ApiResponse res;
  try {
    pending->route->handler(pending->req, res);
  } catch (const std::exception& e) {
    res = ApiResponse();
    Error(res, 500, std::string("internal error: ") + e.what());
  }
  if (res.hold && !pending->req.woken) {
    pending->req.woken = true;
    // Woken exactly once, and then answered on Pool::woken; when it need not or cannot
    // wait, answered now.
    pending->held = true;  // before Wait: a wake may come on another thread at once
    if (watches_->Wait(res.hold->key, res.hold->index, res.hold->wait, [this, pending] {
          boost::asio::post(pool_->woken, [this, pending] { Serve(pending); });
        })) {
      return;
    }
    pending->held = false;
    return Serve(pending);
  }
  res.held = pending->held;
  pending->done(std::move(res), pending->caller.get(), auth::AuthFailure::kNone);
}

void ApiServer::Audit(const std::string& method, const std::string& path, const std::string& source,
                      const auth::Caller* caller, auth::AuthFailure failure, int status,
                      const std::string& object, const std::string& denied) {
  if (options_.audit == nullptr) return;
  // State-changing requests, denied ones, and whatever an admin does acting as someone else.
  const bool reads = method == "GET" || method == "HEAD";
  if (reads && denied.empty() && status != 401 && status != 403 &&
      (caller == nullptr || !caller->actor)) {
    return;
  }
  AuditFacts facts;
  facts.caller = caller;
  facts.failure = failure;
  facts.source = source;
  facts.method = method;
  facts.path = path;
  facts.object = object;
  facts.status = status;
  facts.denied = denied;
  if (facts.denied.empty() && (status == 401 || status == 403)) facts.denied = "refused";
  options_.audit->Record(AuditEvent(facts));
}

void ApiServer::Register() {
  Router h{*routes_};
  ServiceLoop& loop = *options_.loop;
  const Clock& clock = *options_.clock;
  const std::string domain = options_.domain;

  h.OpenGet("/healthz",
            [](const ApiRequest&, ApiResponse& res) { res.set_content("ok\n", "text/plain"); });
  h.OpenGet("/metrics", [this](const ApiRequest&, ApiResponse& res) {
    res.set_content(Metrics(), "text/plain; version=0.0.4");
  });
  h.OpenGet("/tarn/v1/openapi.yaml", [this](const ApiRequest&, ApiResponse& res) {
    res.set_content(options_.openapi_yaml, "application/yaml");
  });
  h.OpenGet("/app/v1/services/version", [this](const ApiRequest&, ApiResponse& res) {
    Reply(res, 200, json{{"tarn_version", options_.version}, {"api", "v1"}});
  });

  h.Post("/app/v1/services", [&loop, domain](const ApiRequest& req, ApiResponse& res) {
    const std::string user = req.caller->who.tenant;
    if (!ForOwnTenant(req, res, "launching for another tenant", "tarn launch --as NAME")) return;
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
    res.audit_object = user + "/" + parsed.assembly->name;
    if (Status allowed = MaySubmit(*req.caller, parsed.assembly->queue, loop.Snapshot()->queues);
        !allowed.ok()) {
      res.denied = allowed.message();
      return Error(res, allowed);
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

  h.Get("/app/v1/services", [&loop, &clock](const ApiRequest& req, ApiResponse& res) {
    // ?tenant=NAME: that tenant's assemblies; ?tenant=*: every tenant's; in both, only those
    // the caller may read.
    const std::string tenant = OwnerOf(req);
    const int64_t now = clock.WallMillis();
    // Held for the loop: a range-for over loop.Snapshot()->assemblies would free the
    // snapshot under it as soon as a newer one is published.
    const std::shared_ptr<const StateSnapshot> snapshot = loop.Snapshot();
    json out = json::array();
    for (const auto& view : snapshot->assemblies) {
      const service::AssemblyStatus& a = view->status();
      if ((tenant == "*" || a.user == tenant) &&
          MayAccess(*req.caller, a.user, a.queue, snapshot->queues)) {
        out.push_back(ServiceSummaryJson(view->Status(now)));
      }
    }
    Reply(res, 200, out);
  });

  h.Get(R"(/app/v1/services/([^/]+))", [&loop, &clock](const ApiRequest& req, ApiResponse& res) {
    std::string user;
    const std::string name = req.matches[1];
    if (!Addressed(req, res, loop, name, &user)) return;
    // A blocking read (watches.h): ?index=N[&wait=DURATION] holds the answer until the
    // status changes past N.
    uint64_t index = 0;
    std::chrono::milliseconds wait{0};
    if (!WatchParams(req, res, &index, &wait)) return;
    const std::shared_ptr<const StateSnapshot> snapshot = loop.Snapshot();
    const AssemblyView* view = snapshot->Find(user, name);
    if (view == nullptr) return Error(res, service::AssemblyNotFoundError(name));
    if (index > 0 && !req.woken && view->modify_index() <= index && index <= snapshot->generation) {
      res.hold = ApiResponse::Hold{user + "/" + name, index, wait};
      return;
    }
    res.set_header("X-Tarn-Index", std::to_string(view->modify_index()));
    if (!req.has_param("containers_limit") && !req.has_param("containers_offset")) {
      res.set_content(*view->Json(clock.WallMillis()), "application/json");
      return;
    }
    // tarn's paging of the instances (YARN's clients send none of these): each component's
    // first containers_limit instances, or, for ?component=C, C's from containers_offset;
    // containers_total says how many there are.
    int64_t offset = 0, limit = 0;
    if (!QueryNumber(req, res, "containers_offset", 0, &offset) ||
        !QueryNumber(req, res, "containers_limit", kMaxContainersPage, &limit)) {
      return;
    }
    if (limit < 1 || limit > kMaxContainersPage) {
      return Error(res, 400,
                   "containers_limit: from 1 to " + std::to_string(kMaxContainersPage) + ", got " +
                       std::to_string(limit));
    }
    const std::string paged = req.get_param_value("component");
    service::AssemblyStatus status = view->Status(clock.WallMillis());
    if (!paged.empty() && std::none_of(status.components.begin(), status.components.end(),
                                       [&](const auto& c) { return c.name == paged; })) {
      return Error(res, 404, "component " + paged + " not found in " + name);
    }
    std::vector<std::pair<size_t, int64_t>> pages;  // each component's total and offset
    for (service::ComponentStatus& c : status.components) {
      const int64_t from = c.name == paged ? offset : 0;
      const size_t total = c.instances.size();
      const size_t first = std::min(total, static_cast<size_t>(from));
      const size_t last = std::min(total, first + static_cast<size_t>(limit));
      c.instances = std::vector<service::InstanceStatus>(c.instances.begin() + first,
                                                         c.instances.begin() + last);
      pages.emplace_back(total, from);
    }
    json out = ServiceJson(status);
    for (size_t i = 0; i < pages.size() && i < out["components"].size(); ++i) {
      out["components"][i]["containers_total"] = pages[i].first;
      out["components"][i]["containers_offset"] = pages[i].second;
    }
    Reply(res, 200, out);
  });

  h.Put(R"(/app/v1/services/([^/]+))", [&loop, domain](const ApiRequest& req, ApiResponse& res) {
    std::string user;
    const std::string name = req.matches[1];
    if (!Addressed(req, res, loop, name, &user)) return;
    json body;
    if (!ParseBody(req, res, &body)) return;
    if (IsUpgradeState(body)) return UpgradeService(res, loop, domain, user, name, body);
    if (!OnlyFields(body, {"state", "lifetime", "name"}, res)) return;
    if (body.contains("name") && body["name"] != name) {
      return Error(
          res, 400,
          "name: the body names " + body["name"].dump() + " but the path names \"" + name + "\"");
    }
    std::string diagnostics;
    Status st;
    if (body.contains("state")) {
      if (body.contains("lifetime")) {
        return Error(res, 400, "request body: give either state or lifetime, not both");
      }
      const json& s = body["state"];
      if (!s.is_string() || (s != "STOPPED" && s != "STARTED")) {
        return Error(res, 400,
                     "state: expected \"STOPPED\", \"STARTED\" or an upgrade's (UPGRADING, "
                     "UPGRADING_AUTO_FINALIZE, EXPRESS_UPGRADING, CANCEL_UPGRADING, STABLE), got " +
                         s.dump());
      }
      bool stop = s == "STOPPED";
      if (!loop.Call(
              [&](service::Manager& m) { st = stop ? m.Stop(user, name) : m.Start(user, name); })) {
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

  h.Put(R"(/app/v1/services/([^/]+)/components/([^/]+))", [&loop](const ApiRequest& req,
                                                                  ApiResponse& res) {
    std::string user;
    const std::string name = req.matches[1];
    const std::string comp = req.matches[2];
    if (!Addressed(req, res, loop, name, &user)) return;
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

  h.Delete(R"(/app/v1/services/([^/]+))", [&loop](const ApiRequest& req, ApiResponse& res) {
    std::string user;
    const std::string name = req.matches[1];
    if (!Addressed(req, res, loop, name, &user)) return;
    Status st;
    if (!loop.Call([&](service::Manager& m) { st = m.Destroy(user, name); })) {
      return Error(res, 503, "tarn server is shutting down");
    }
    if (!st.ok()) return Error(res, st);
    Reply(res, 200, json{{"diagnostics", "Successfully destroyed service " + name}});
  });

  h.Get("/tarn/v1/nodes", [&loop](const ApiRequest&, ApiResponse& res) {
    Reply(res, 200, NodesJson(loop.Snapshot()->nodes));
  });

  h.Get("/tarn/v1/queues", [&loop](const ApiRequest&, ApiResponse& res) {
    Reply(res, 200, QueuesJson(loop.Snapshot()->queues));
  });

  h.Get(R"(/tarn/v1/services/([^/]+)/events)", [&loop](const ApiRequest& req, ApiResponse& res) {
    std::string user;
    const std::string name = req.matches[1];
    if (!Addressed(req, res, loop, name, &user)) return;
    const std::shared_ptr<const StateSnapshot> snapshot = loop.Snapshot();
    const AssemblyView* view = snapshot->Find(user, name);
    if (view == nullptr) return Error(res, service::AssemblyNotFoundError(name));
    // ?limit=N: the newest N alone (oldest first, as always).
    int64_t limit = 0;
    if (!QueryNumber(req, res, "limit", 0, &limit)) return;
    const std::vector<service::Event>& events = *view->events();
    if (limit == 0 || static_cast<size_t>(limit) >= events.size()) {
      return Reply(res, 200, EventsJson(events));
    }
    Reply(res, 200, EventsJson(std::vector<service::Event>(events.end() - limit, events.end())));
  });

  h.Get(R"(/tarn/v1/services/([^/]+)/instances/([^/]+)/logs)",
        [&loop](const ApiRequest& req, ApiResponse& res) {
          std::string user;
          const std::string name = req.matches[1];
          const std::string instance = req.matches[2];
          if (!Addressed(req, res, loop, name, &user)) return;
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
          int64_t offset = 0;
          struct stat sb {};
          if (::lstat(path.c_str(), &sb) == 0 && tail >= 0 && sb.st_size > tail) {
            offset = sb.st_size - tail;
          }
          res.content_type = "text/plain";
          res.stream = std::make_shared<LogStream>(loop, path, offset, follow, user, name, instance,
                                                   container);
        },
        Routes::Runs::kPool);

  RegisterIdentityRoutes(h, options_.auth_store, options_.audit, options_.clock);
  RegisterMetricsRoutes(h, loop, options_.collector);
  RegisterUpgradeRoutes(h, loop);
  RegisterSessionRoutes(
      h, SessionOptions{options_.authenticator, options_.auth_store, options_.login_codes,
                        options_.clock, options_.session_ttl_ms, options_.ui_origin});
}

}  // namespace tarn::api
