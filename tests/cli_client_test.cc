// Runs the real `tarn` binary's client verbs against a small HTTP server inside the test
// that answers canned JSON (shaped as docs/api.md says) and records every request, so the
// test can check what the client sent as well as what it printed (cli_format_test.cc, linked
// in, unit-tests the formatters). The real server's integration tests live elsewhere.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/api_format.h"
#include "cli/client.h"
#include "cli/table.h"
#include "common/file.h"
#include "spec/data_uri.h"
#include "tarn_process.h"

namespace {

using json = nlohmann::json;
using tarn::cli::Table;

const std::string kSource = TARN_SOURCE_DIR;

// Who the CLI says it acts for when $TARN_USER or --user names `user`: root acts as it
// (Impersonate-User); anyone else acts as itself and sends no such header.
std::string Sent(const std::string& user) { return ::geteuid() == 0 ? user : "<none>"; }

// ---------------------------------------------------------------------------------------
// Running the binary.

using tarn::testing::CommandResult;
using tarn::testing::RunTarn;
using tarn::testing::TarnProcess;

// ---------------------------------------------------------------------------------------
// The fake server.

struct RecordedRequest {
  std::string method;
  std::string path;
  std::string user;  // the Impersonate-User header (who the CLI acts as), "<none>" when absent
  std::string authorization;  // the Authorization header, "<none>" when absent
  httplib::Params params;
  std::string body;
};

const char kSleeper[] = R"({
  "name": "sleeper", "version": "1.0", "user": "alice", "queue": "default", "priority": 0,
  "state": "UPGRADING", "upgrade_version": "2.0", "diagnostics": "",
  "lifetime": -1, "launch_time": 1700000000000, "shared_dir": "/var/lib/tarn/shared/alice/sleeper",
  "components": [
    {
      "name": "sleeper", "number_of_containers": 2, "state": "STABLE", "diagnostics": "",
      "ready_containers": 1,
      "launch_command": "sleep 1000", "resource": {"cpus": 1, "memory": "256"},
      "containers": [
        {
          "id": "alice_sleeper_sleeper-0_3", "component_instance_name": "sleeper-0",
          "hostname": "sleeper-0.sleeper.alice.tarn", "ip": "127.0.0.1",
          "bare_host": "node-a", "state": "READY", "launch_time": 1700000000123,
          "diagnostics": "", "gpus": [0, 1], "restarts": 2, "last_exit": "exited with code 3",
          "version": "2.0"
        },
        {
          "id": "alice_sleeper_sleeper-1_0", "component_instance_name": "sleeper-1",
          "hostname": "sleeper-1.sleeper.alice.tarn", "ip": "",
          "bare_host": "", "state": "PENDING", "launch_time": 0,
          "diagnostics": "waiting for resources: 1 GPU", "gpus": [], "restarts": 0,
          "last_exit": "", "version": "1.0"
        }
      ]
    }
  ]
})";

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post("/app/v1/services", [this](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      json body = json::parse(req.body, nullptr, false);
      std::string name = body.is_object() ? body.value("name", "") : "";
      res.status = 202;
      res.set_content(json{{"uri", "/app/v1/services/" + name},
                           {"diagnostics", "Application " + name + " accepted"},
                           {"state", "ACCEPTED"}}
                          .dump(),
                      "application/json");
    });
    server_.Get(
        "/app/v1/services/sleeper", [this](const httplib::Request& req, httplib::Response& res) {
          Record(req);
          // Launched five minutes ago, so that the ages (and the column widths) are known.
          json service = json::parse(kSleeper);
          int64_t five_minutes_ago = std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count() -
                                     300'000 - 500;
          service["launch_time"] = five_minutes_ago;
          service["components"][0]["containers"][0]["launch_time"] = five_minutes_ago;
          res.set_content(service.dump(), "application/json");
        });
    // `tarn ui`'s login code; without a TCP listener when with_url_ is false.
    server_.Post("/tarn/v1/ui/login-codes",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   Record(req);
                   json answer = {{"code", "tarn_abc"},
                                  {"tenant", "alice"},
                                  {"login_path", "/ui/login?code=tarn_abc"},
                                  {"expires_ms", 1}};
                   if (with_url_) answer["url"] = "http://127.0.0.1:8088/ui/login?code=tarn_abc";
                   res.status = 201;
                   res.set_content(answer.dump(), "application/json");
                 });
    server_.Get(
        "/app/v1/services/missing", [this](const httplib::Request& req, httplib::Response& res) {
          Record(req);
          res.status = 404;
          res.set_content(R"({"diagnostics": "Service missing not found"})", "application/json");
        });
    // The "waiter" assembly is STARTED for two polls, then `final_state_`.
    server_.Get("/app/v1/services/waiter",
                [this](const httplib::Request& req, httplib::Response& res) {
                  Record(req);
                  json service = json::parse(kSleeper);
                  service["name"] = "waiter";
                  int poll = ++polls_;
                  service["state"] = poll <= 2 ? "STARTED" : final_state_;
                  service["components"][0]["ready_containers"] = poll <= 2 ? poll - 1 : 2;
                  if (final_state_ == "FAILED" && poll > 2) {
                    service["diagnostics"] = "sleeper-1 failed 3 times";
                  }
                  if (final_state_ == "INFEASIBLE" && poll > 1) {
                    service["state"] = "STARTED";
                    service["components"][0]["containers"][1]["diagnostics"] =
                        "can never be placed: needs 2 GPUs, more than any node has";
                  }
                  res.set_content(service.dump(), "application/json");
                });
    // The upgrade calls: answered with what they were.
    server_.Put(
        R"(/app/v1/services/sleeper(/component-instances|/components)?)",
        [this](const httplib::Request& req, httplib::Response& res) {
          Record(req);
          res.status = 202;
          res.set_content(json{{"diagnostics", "did " + req.path}}.dump(), "application/json");
        });
    server_.Put(
        R"(/app/v1/services/([^/]+)/components/([^/]+))",
        [this](const httplib::Request& req, httplib::Response& res) {
          Record(req);
          json body = json::parse(req.body);
          res.set_content(
              json{{"diagnostics", "Updating component (" + req.matches[2].str() +
                                       ") size from 2 to " + body["number_of_containers"].dump()}}
                  .dump(),
              "application/json");
        });
    server_.Get(
        "/tarn/v1/services/sleeper/instances/sleeper-0/logs",
        [this](const httplib::Request& req, httplib::Response& res) {
          Record(req);
          res.set_chunked_content_provider("text/plain", [this](size_t, httplib::DataSink& sink) {
            sink.write("first line\n", 11);
            // The second piece waits until the test has seen the first on the
            // client's stdout: a client that buffered the body would never
            // show it, and the test fails at the deadline.
            std::unique_lock<std::mutex> lock(mu_);
            bool seen =
                cv_.wait_for(lock, std::chrono::seconds(10), [this] { return first_chunk_seen_; });
            lock.unlock();
            if (seen) sink.write("second line\n", 12);
            sink.done();
            return true;
          });
        });
    server_.Get("/tarn/v1/services/sleeper/instances/sleeper-9/logs",
                [this](const httplib::Request& req, httplib::Response& res) {
                  Record(req);
                  res.status = 404;
                  res.set_content(
                      R"({"diagnostics": "assembly sleeper has no instance sleeper-9"})",
                      "application/json");
                });
    server_.Get("/app/v1/services", [this](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      res.set_content(list_, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  void TearDown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      first_chunk_seen_ = true;
    }
    cv_.notify_all();
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  void Record(const httplib::Request& req) {
    std::lock_guard<std::mutex> lock(mu_);
    auto header = [&req](const char* name) {
      return req.has_header(name) ? req.get_header_value(name) : std::string("<none>");
    };
    requests_.push_back(
        {req.method, req.path, header("Impersonate-User"), header("Authorization"), req.params,
         req.body});
  }

  std::vector<RecordedRequest> Requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

  // Over TCP, with a bearer token; root acts as `user` ($TARN_USER means --as for root).
  std::vector<std::string> Env(const std::string& user = "alice") {
    return {"TARN_ADDR=127.0.0.1:" + std::to_string(port_), "TARN_USER=" + user,
            "TARN_TOKEN=" + std::string(kToken)};
  }
  static constexpr char kToken[] = "tarn_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool first_chunk_seen_ = false;
  std::vector<RecordedRequest> requests_;
  std::atomic<int> polls_{0};
  std::string final_state_ = "STABLE";
  std::atomic<bool> with_url_{true};  // the login-code answer carries a url
  std::string list_ = "[]";
};

std::string DecodeDataUri(const json& v) {
  EXPECT_TRUE(v.is_string()) << v;
  if (!v.is_string()) return "";
  auto decoded = tarn::spec::DecodeDataUri(v.get<std::string>());
  EXPECT_TRUE(decoded.ok()) << v;
  return decoded.value_or("");
}

// A fresh directory under /tmp, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    char t[] = "/tmp/tarn-client-files-XXXXXX";
    path_ = ::mkdtemp(t);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  void Write(const std::string& name, const std::string& text) const {
    std::filesystem::create_directories(std::filesystem::path(path_ + "/" + name).parent_path());
    std::ofstream(path_ + "/" + name) << text;
  }

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------------------
// launch

TEST_F(ClientTest, LaunchPostsTheDocumentWithLocalFilesInlined) {
  CommandResult run = RunTarn({"launch", "httpd/httpd.json"}, Env(), kSource + "/examples");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "Application httpd-service accepted\n");
  EXPECT_EQ(run.err, "");
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].path, "/app/v1/services");
  EXPECT_EQ(requests[0].authorization, "Bearer " + std::string(kToken));
  EXPECT_TRUE(requests[0].params.empty());  // no user.name: the token says who
  EXPECT_EQ(requests[0].user, Sent("alice"));
  json sent = json::parse(requests[0].body);
  json written = json::parse(std::ifstream(kSource + "/examples/httpd/httpd.json"));
  // Only src_file changed: it now carries the template itself.
  json& file = sent["components"][1]["configuration"]["files"][0];
  std::string template_text =
      tarn::ReadFileToString(kSource + "/examples/httpd/nginx.conf.template").value();
  ASSERT_FALSE(template_text.empty());
  EXPECT_EQ(file["src_file"].get<std::string>().rfind("data:", 0), 0u);
  EXPECT_EQ(DecodeDataUri(file["src_file"]), template_text);
  file["src_file"] = "nginx.conf.template";
  EXPECT_EQ(sent, written);
}

TEST_F(ClientTest, LaunchSendsYamlAsJsonWithPathsResolved) {
  TempDir dir;
  dir.Write("conf/app.properties", "threads=4\n");
  dir.Write("pkg.tgz", "not really a tarball");
  dir.Write("sub/assembly.yaml", R"(# a comment that JSON cannot carry
name: yamlsvc
version: "1.0.0"
artifact: {id: ../pkg.tgz, type: TARBALL}
configuration:
  files:
    - {type: STATIC, dest_file: app.properties, src_file: ../conf/app.properties}
    - {type: TEMPLATE, dest_file: inline.txt, src_file: "data:;base64,aGk="}
components:
  - name: main
    number_of_containers: 2
    launch_command: sleep 100
    resource: {cpus: 1, memory: "256"}
)");
  CommandResult run =
      RunTarn({"launch", "--user", "Bob_Dev", "sub/assembly.yaml"}, Env("ignored"), dir.path());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].user, Sent("Bob_Dev"));  // --user wins over $TARN_USER, as given
  json sent = json::parse(requests[0].body, nullptr, false);
  ASSERT_FALSE(sent.is_discarded()) << requests[0].body;
  EXPECT_EQ(sent["version"], "1.0.0");
  EXPECT_EQ(sent["components"][0]["number_of_containers"], 2);  // a number, not "2"
  EXPECT_EQ(sent["components"][0]["resource"]["memory"], "256");
  EXPECT_EQ(DecodeDataUri(sent["configuration"]["files"][0]["src_file"]), "threads=4\n");
  EXPECT_EQ(sent["configuration"]["files"][1]["src_file"], "data:;base64,aGk=");  // untouched
  EXPECT_EQ(sent["artifact"]["id"], dir.path() + "/pkg.tgz");
}

TEST_F(ClientTest, LaunchOfAnInvalidFileSendsNothing) {
  CommandResult run = RunTarn({"launch", "bad-name.json"}, Env(), kSource + "/tests/data/invalid");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("bad-name.json: name: \"My_Service\" is not a DNS label"),
            std::string::npos)
      << run.err;
  EXPECT_TRUE(Requests().empty());
}

TEST_F(ClientTest, LaunchWaitPrintsProgressUntilStable) {
  TempDir dir;
  std::string text = tarn::ReadFileToString(kSource + "/examples/sleeper/sleeper.json").value();
  json doc = json::parse(text);
  doc["name"] = "waiter";
  dir.Write("waiter.json", doc.dump());
  CommandResult run =
      RunTarn({"launch", "--wait", "--timeout", "20", "waiter.json"}, Env(), dir.path());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "waiter: STARTED, ready sleeper 0/2; sleeper-1 PENDING: waiting for resources: 1 GPU\n"
            "waiter: STARTED, ready sleeper 1/2; sleeper-1 PENDING: waiting for resources: 1 GPU\n"
            "waiter: STABLE, ready sleeper 2/2; sleeper-1 PENDING: waiting for resources: 1 GPU\n");
  EXPECT_EQ(polls_.load(), 3);
}

TEST_F(ClientTest, LaunchWaitFailsWithTheDiagnostics) {
  final_state_ = "FAILED";
  TempDir dir;
  json doc =
      json::parse(tarn::ReadFileToString(kSource + "/examples/sleeper/sleeper.json").value());
  doc["name"] = "waiter";
  dir.Write("waiter.json", doc.dump());
  CommandResult run = RunTarn({"launch", "--wait", "waiter.json"}, Env(), dir.path());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err, "tarn: waiter is FAILED: sleeper-1 failed 3 times\n");
}

TEST_F(ClientTest, LaunchWaitStopsAtOnceWhenAnInstanceCanNeverBePlaced) {
  final_state_ = "INFEASIBLE";
  TempDir dir;
  json doc =
      json::parse(tarn::ReadFileToString(kSource + "/examples/sleeper/sleeper.json").value());
  doc["name"] = "waiter";
  dir.Write("waiter.json", doc.dump());
  CommandResult run =
      RunTarn({"launch", "--wait", "--timeout", "20", "waiter.json"}, Env(), dir.path());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err,
            "tarn: waiter cannot start: sleeper-1: can never be placed: needs 2 GPUs, more than "
            "any node has\n");
  EXPECT_EQ(polls_.load(), 2);
}

TEST_F(ClientTest, LaunchWaitTimesOut) {
  final_state_ = "STARTED";
  TempDir dir;
  json doc =
      json::parse(tarn::ReadFileToString(kSource + "/examples/sleeper/sleeper.json").value());
  doc["name"] = "waiter";
  dir.Write("waiter.json", doc.dump());
  CommandResult run =
      RunTarn({"launch", "--wait", "--timeout", "0.3", "waiter.json"}, Env(), dir.path());
  EXPECT_EQ(run.exit_code, 124);
  EXPECT_EQ(run.err.rfind("tarn: waiter is not up after 0.3s: waiter: STARTED", 0), 0u) << run.err;
}

// ---------------------------------------------------------------------------------------
// Errors

TEST_F(ClientTest, ServerErrorIsOneLineWithTheStatus) {
  CommandResult run = RunTarn({"status", "missing"}, Env());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "tarn: Service missing not found (HTTP 404)\n");
}

TEST_F(ClientTest, UnknownRouteWithoutJsonStillGivesOneLine) {
  CommandResult run = RunTarn({"queues"}, Env());  // the fake server has no /tarn/v1/queues
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err, "tarn: Not Found (HTTP 404)\n");
}

TEST(ClientErrorTest, ConnectionRefusedSaysSo) {
  // A bound socket that does not listen: connecting to it is refused, and no one else can
  // take the port while the test holds it.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string where = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  CommandResult run = RunTarn({"list", "--addr", "http://" + where}, {"TARN_USER=alice"});
  ::close(fd);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err, "tarn: cannot reach tarn server at " + where +
                         " (connection refused); is `tarn server` running?\n");
}

// With nothing set the CLI goes to the local server's Unix socket, and says which when none
// listens there.
TEST(ClientErrorTest, DefaultAddressIsNamed) {
  CommandResult run = RunTarn({"nodes"}, {"TARN_SOCKET=/nonexistent/tarn.sock"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err,
            "tarn: cannot reach tarn server at unix:/nonexistent/tarn.sock (no such file or "
            "directory); is `tarn server` running?\n");
}

TEST(ClientErrorTest, BadAddressIsAUsageError) {
  CommandResult run = RunTarn({"list"}, {"TARN_ADDR=ftp://x:1", "TARN_USER=alice"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "tarn: server address \"ftp://x:1\": a path is not allowed (use HOST:PORT, "
            "http://HOST:PORT, https://HOST:PORT or unix:PATH)\n");
}

// https to a listener that is not TLS (the fake server here speaks plain HTTP): the handshake
// fails, and the message says where and what to check.
TEST_F(ClientTest, HttpsToAPlainListenerSaysTheHandshakeFailed) {
  CommandResult run =
      RunTarn({"list"}, {"TARN_ADDR=https://127.0.0.1:" + std::to_string(port_),
                         "TARN_TOKEN=" + std::string(kToken)});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("tarn: TLS handshake with tarn server at https://127.0.0.1:"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("--cacert"), std::string::npos) << run.err;
  EXPECT_TRUE(Requests().empty());
}

TEST(ClientErrorTest, MissingArgumentIsAUsageError) {
  CommandResult run = RunTarn({"flex", "sleeper", "worker"}, {"TARN_USER=alice"});
  EXPECT_EQ(run.exit_code, 2);
}

// ---------------------------------------------------------------------------------------
// status, flex, logs

// The fake server has no metrics route: no MODELS column (cli_format_test.cc has one).
TEST_F(ClientTest, StatusRendersAlignedTables) {
  CommandResult run = RunTarn({"status", "sleeper"}, Env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(
      run.out,
      "SERVICE  STATE      VERSION     USER   QUEUE    PRIORITY  AGE  LIFETIME   DIAGNOSTICS\n"
      "sleeper  UPGRADING  1.0 -> 2.0  alice  default  0         5m   unlimited  -\n"
      "\n"
      "COMPONENT  STATE   READY  DIAGNOSTICS\n"
      "sleeper    STABLE  1/2    -\n"
      "\n"
      "INSTANCE   STATE    VERSION  HOST                          IP         NODE    GPUS  "
      "RESTARTS  AGE  LAST EXIT           DIAGNOSTICS\n"
      "sleeper-0  READY    2.0      sleeper-0.sleeper.alice.tarn  127.0.0.1  node-a  0,1   "
      "2         5m   exited with code 3  -\n"
      "sleeper-1  PENDING  1.0      sleeper-1.sleeper.alice.tarn  -          -       -     "
      "0         -    -                   waiting for resources: 1 GPU\n");
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].path, "/app/v1/services/sleeper");
  EXPECT_EQ(requests[0].user, Sent("alice"));
}

TEST_F(ClientTest, StatusAsJsonPrintsTheApiAnswer) {
  CommandResult run = RunTarn({"status", "sleeper", "-o", "json"}, Env("o'Neil & co=1"));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  json expected = json::parse(kSleeper);
  json printed = json::parse(run.out);
  expected["launch_time"] = printed["launch_time"];
  expected["components"][0]["containers"][0]["launch_time"] =
      printed["components"][0]["containers"][0]["launch_time"];
  EXPECT_EQ(printed, expected);
  EXPECT_NE(run.out.find("\n  \"components\""), std::string::npos);  // pretty
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].user, Sent("o'Neil & co=1"));  // a header, sent as given
}

// --as is sent whoever runs the CLI (the server lets admins alone act as another), and wins
// over $TARN_USER; --tenant addresses another tenant's assembly.
TEST_F(ClientTest, AsAndTenantAreSent) {
  CommandResult run = RunTarn({"status", "sleeper", "--as", "bob", "--tenant", "carol"}, Env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].user, "bob");
  EXPECT_EQ(requests[0].params.find("tenant")->second, "carol");
}

TEST_F(ClientTest, UiPrintsTheOneTimeLoginUrl) {
  CommandResult run = RunTarn({"ui"}, Env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "http://127.0.0.1:8088/ui/login?code=tarn_abc\n");
  EXPECT_EQ(run.err,
            "tarn: open this URL to log in to the dashboard as alice; it is good once, for a "
            "minute\n");
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].path, "/tarn/v1/ui/login-codes");

  // Where the browser reaches the server another way (ssh -L), the origin is the caller's.
  run = RunTarn({"ui", "--origin", "https://tunnel.example:9000/"}, Env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "https://tunnel.example:9000/ui/login?code=tarn_abc\n");
  run = RunTarn({"ui", "--origin", "tunnel:9000"}, Env());
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "tarn: --origin: \"tunnel:9000\" is not an http:// or https:// origin (e.g. "
            "http://127.0.0.1:8088)\n");

  with_url_ = false;
  run = RunTarn({"ui"}, Env());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_NE(run.err.find("the server has no TCP listener"), std::string::npos) << run.err;
}

TEST_F(ClientTest, FlexPutsTheNewCount) {
  CommandResult run = RunTarn({"flex", "sleeper", "sleeper", "4"}, Env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "Updating component (sleeper) size from 2 to 4\n");
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "PUT");
  EXPECT_EQ(requests[0].path, "/app/v1/services/sleeper/components/sleeper");
  EXPECT_EQ(json::parse(requests[0].body), json({{"number_of_containers", 4}}));
}

TEST_F(ClientTest, UpgradeSendsYarnsCalls) {
  TempDir dir;
  dir.Write("v2.yaml", R"(name: sleeper
version: "2.0"
components:
  - name: sleeper
    number_of_containers: 2
    launch_command: sleep 2000
    resource: {cpus: 1, memory: "256"}
)");
  const std::vector<std::pair<std::vector<std::string>, std::string>> calls = {
      {{"upgrade", "sleeper", "v2.yaml"}, "UPGRADING"},
      {{"upgrade", "sleeper", "v2.yaml", "--auto-finalize"}, "UPGRADING_AUTO_FINALIZE"},
      {{"upgrade", "sleeper", "v2.yaml", "--express"}, "EXPRESS_UPGRADING"}};
  for (const auto& [args, state] : calls) {
    CommandResult run = RunTarn(args, Env(), dir.path());
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.out, "did /app/v1/services/sleeper\n");
  }
  EXPECT_EQ(RunTarn({"upgrade", "sleeper", "--instances", "sleeper-0, sleeper-1"}, Env()).exit_code,
            0);
  EXPECT_EQ(RunTarn({"upgrade", "sleeper", "--components", "sleeper"}, Env()).exit_code, 0);
  EXPECT_EQ(RunTarn({"upgrade", "sleeper", "--finalize"}, Env()).exit_code, 0);
  EXPECT_EQ(RunTarn({"upgrade", "sleeper", "--cancel"}, Env()).exit_code, 0);
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 7u);
  for (size_t k = 0; k < 3; ++k) {
    json sent = json::parse(requests[k].body);
    EXPECT_EQ(sent["state"], calls[k].second);
    EXPECT_EQ(sent["version"], "2.0");
    EXPECT_EQ(sent["components"][0]["launch_command"], "sleep 2000");
  }
  EXPECT_EQ(requests[3].path, "/app/v1/services/sleeper/component-instances");
  EXPECT_EQ(json::parse(requests[3].body),
            json::parse(R"([{"component_instance_name": "sleeper-0", "state": "UPGRADING"},
                            {"component_instance_name": "sleeper-1", "state": "UPGRADING"}])"));
  EXPECT_EQ(requests[4].path, "/app/v1/services/sleeper/components");
  EXPECT_EQ(json::parse(requests[4].body),
            json::parse(R"([{"name": "sleeper", "state": "UPGRADING"}])"));
  EXPECT_EQ(json::parse(requests[5].body), json({{"state", "STABLE"}}));
  EXPECT_EQ(json::parse(requests[6].body), json({{"state", "CANCEL_UPGRADING"}}));

  // Usage errors say what to give, and send nothing.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"upgrade", "sleeper"},
        {"upgrade", "sleeper", "v2.yaml", "--finalize"},
        {"upgrade", "sleeper", "--cancel", "--express"},
        {"upgrade", "sleeper", "v2.yaml", "--express", "--auto-finalize"}}) {
    CommandResult run = RunTarn(bad, Env(), dir.path());
    EXPECT_EQ(run.exit_code, 2) << bad.back();
    EXPECT_EQ(run.err.rfind("tarn upgrade: ", 0), 0u) << run.err;
  }
  dir.Write("other.yaml",
            "name: other\nversion: \"2\"\ncomponents:\n  - {name: a, "
            "number_of_containers: 1, launch_command: x, resource: {cpus: 1, "
            "memory: \"64\"}}\n");
  CommandResult other = RunTarn({"upgrade", "sleeper", "other.yaml"}, Env(), dir.path());
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_EQ(other.err, "tarn upgrade: other.yaml is assembly \"other\", not \"sleeper\"\n");
  EXPECT_EQ(Requests().size(), 7u);
}

TEST_F(ClientTest, LogsFollowStreamsPiecesAsTheyCome) {
  TarnProcess process({"logs", "sleeper", "sleeper-0", "-f", "--tail", "100"}, Env(), "/tmp");
  std::string seen = process.ReadUntil("first line\n");
  EXPECT_EQ(seen, "first line\n");
  {
    std::lock_guard<std::mutex> lock(mu_);
    first_chunk_seen_ = true;
  }
  cv_.notify_all();
  CommandResult run = process.Finish();
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "first line\nsecond line\n");
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].user, Sent("alice"));
  const httplib::Params& p = requests[0].params;
  EXPECT_EQ(p.find("follow")->second, "true");
  EXPECT_EQ(p.find("tail")->second, "100");
  EXPECT_EQ(p.find("stream")->second, "stdout");
}

TEST_F(ClientTest, LogsErrorIsOneLine) {
  CommandResult run = RunTarn({"logs", "sleeper", "sleeper-9", "--stderr"}, Env());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "tarn: assembly sleeper has no instance sleeper-9 (HTTP 404)\n");
  auto requests = Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].params.find("stream")->second, "stderr");
  EXPECT_EQ(requests[0].params.count("follow"), 0u);
}

TEST_F(ClientTest, ListShowsOneRowPerAssembly) {
  list_ = R"([{"name": "fmnist", "user": "alice", "state": "STARTED", "diagnostics": "",
      "priority": 10,
      "launch_time": 0, "lifetime": 3600, "components": [
        {"name": "ps", "state": "STABLE", "number_of_containers": 1, "ready_containers": 1},
        {"name": "worker", "state": "FLEXING", "number_of_containers": 3,
         "ready_containers": 2}]},
    {"name": "sleeper", "user": "alice", "state": "FAILED", "diagnostics": "sleeper-0 failed",
      "priority": 0,
      "launch_time": 0, "lifetime": -1, "components": []}])";
  CommandResult run = RunTarn({"list"}, Env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "NAME     STATE    PRIORITY  READY  COMPONENTS         AGE  LIFETIME   DIAGNOSTICS\n"
            "fmnist   STARTED  10        3/4    ps:1/1,worker:2/3  -    60m left   -\n"
            "sleeper  FAILED   0         0/0    -                  -    unlimited  sleeper-0 failed\n");
}

TEST_F(ClientTest, EmptyListSaysSoOnStderr) {
  CommandResult run = RunTarn({"list"}, Env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err, "No assemblies.\n");
}

TEST(ClientUsageTest, UnknownCommandListsTheClientVerbs) {
  CommandResult run = RunTarn({"lanch", "x.json"}, {});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "tarn: unknown command \"lanch\" (commands: validate, explain, launch, list, status, "
            "flex, upgrade, stop, start, destroy, logs, nodes, queues, events, whoami, token, "
            "audit, ui, server, run; see tarn "
            "--help)\n");
}

}  // namespace
