// Who is asking (issue 21, DESIGN.md "Who"): real local accounts made here with useradd (and
// removed after), a real `tarn server` as root, the real CLI run as those accounts (setpriv)
// over the real Unix socket, and REST calls over the real TCP listener with tokens.
//
// Needs root (useradd, setpriv, containers run as the tenant's uid); skips itself otherwise.
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"
#include "tarn_process.h"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using tarn::testing::CallApiWithToken;
using tarn::testing::CommandResult;
using tarn::testing::ReadAll;
using tarn::testing::Reply;
using tarn::testing::ServerProcess;

bool Sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

// A local account this test made (and removes).
struct Account {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;
};

// The accounts and the group of the whole suite, made once: useradd takes a while.
class Accounts {
 public:
  // Names unique to this run (a pid suffix), so that no account of the machine is touched.
  bool Make() {
    const std::string n = std::to_string(::getpid() % 100000);
    group_ = "tgpu" + n;
    if (!Sh("groupadd " + group_)) return Fail("groupadd " + group_);
    made_group_ = true;
    for (const auto& [key, groups] :
         std::vector<std::pair<std::string, std::string>>{{"alice", ""},
                                                          {"bob", ""},
                                                          {"carol", group_},
                                                          {"oper", ""},
                                                          {"coll_x", ""},
                                                          {"coll-x", ""}}) {
      const std::string name = "t" + n + key;
      if (::getpwnam(name.c_str()) != nullptr) return Fail("account " + name + " exists already");
      if (!Sh("useradd -m -s /bin/sh " + (groups.empty() ? "" : "-G " + groups + " ") + name)) {
        return Fail("useradd " + name);
      }
      const passwd* pw = ::getpwnam(name.c_str());
      if (pw == nullptr) return Fail("getpwnam " + name);
      made_.push_back(Account{name, pw->pw_uid, pw->pw_gid, pw->pw_dir});
      by_key_[key] = made_.size() - 1;
    }
    return true;
  }
  void Remove() {
    for (const Account& a : made_) Sh("userdel -r " + a.name);
    made_.clear();
    if (made_group_) Sh("groupdel " + group_);
    made_group_ = false;
  }
  const Account& operator[](const std::string& key) const { return made_.at(by_key_.at(key)); }
  const std::string& group() const { return group_; }
  const std::string& error() const { return error_; }

 private:
  bool Fail(const std::string& what) {
    error_ = what + " failed";
    return false;
  }
  std::vector<Account> made_;
  std::map<std::string, size_t> by_key_;
  std::string group_;
  bool made_group_ = false;
  std::string error_;
};

Accounts* accounts = nullptr;

class IdentityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    accounts = new Accounts();
    if (!accounts->Make()) {
      skip_reason_ = accounts->error();
      accounts->Remove();
    }
  }
  static void TearDownTestSuite() {
    if (accounts != nullptr) accounts->Remove();
    delete accounts;
    accounts = nullptr;
  }

  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (useradd, setpriv, containers)";
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    char tmpl[] = "/tmp/tarn-identity-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ::chmod(dir_.c_str(), 0711);  // the accounts reach the socket and read the files in it
    range_lock_ = tarn::testing::LockAddressRange(&range_);
    ASSERT_GE(range_lock_, 0) << "no free test address range";
  }

  void TearDown() override {
    if (server_ && server_->pid() > 0) {
      // Destroy every tenant's assemblies (root's token is an admin's), then stop.
      const std::string root = RootToken();
      Reply list = Rest("GET", "/app/v1/services?tenant=*", json(), root);
      for (const json& a : list.body.is_array() ? list.body : json::array()) {
        const std::string path = "/app/v1/services/" + a.value("name", "") +
                                 "?tenant=" + a.value("user", "");
        Rest("DELETE", path, json(), root);
        tarn::testing::WaitFor(path + " to be destroyed", 30s,
                               [&] { return Rest("GET", path, json(), root).status == 404; });
      }
      EXPECT_TRUE(server_->Terminate()) << server_->log();
    }
    server_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    if (range_lock_ >= 0) ::close(range_lock_);
  }

  void StartServer(json extra = json::object()) {
    json config = {{"probe_interval_ms", 100},
                   {"address_range", range_},
                   {"dns_upstream", json::array()},
                   {"nodes", json::array({{{"name", "node-1"},
                                           {"vcores", 64},
                                           {"memory_mb", 65536},
                                           {"gpus", 0}}})}};
    for (auto it = extra.begin(); it != extra.end(); ++it) config[it.key()] = it.value();
    std::ofstream(dir_ + "/config.json") << config.dump(2);
    server_ = std::make_unique<ServerProcess>(dir_ + "/state", dir_ + "/config.json");
    server_->set_socket(dir_ + "/tarn.sock");
    ASSERT_TRUE(server_->Start()) << server_->log();
  }

  // The CLI as `who` (an account key, or "root"), with that account's home and no TARN_*
  // variable but the socket's and `env`.
  CommandResult Tarn(const std::string& who, std::vector<std::string> args,
                     std::vector<std::string> env = {}) {
    env.push_back("TARN_SOCKET=" + server_->socket());
    std::vector<std::string> wrapper;
    if (who != "root") {
      const Account& a = (*accounts)[who];
      wrapper = {"/usr/bin/setpriv", "--reuid=" + std::to_string(a.uid),
                 "--regid=" + std::to_string(a.gid), "--init-groups"};
      env.push_back("HOME=" + a.home);
      env.push_back("USER=" + a.name);
      env.push_back("LOGNAME=" + a.name);
    }
    tarn::testing::TarnProcess p(args, env, "/tmp", wrapper);
    return p.Finish(60s);
  }

  // A token of `who`'s own, made by it over the socket.
  std::string TokenOf(const std::string& who, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"token", "create"};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = Tarn(who, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
  std::string RootToken() {
    if (root_token_.empty()) root_token_ = TokenOf("root", {"--name", "test-root"});
    return root_token_;
  }

  Reply Rest(const std::string& method, const std::string& path, const json& body,
             const std::string& token) {
    return CallApiWithToken(server_->port(), method, path, body, token);
  }

  // An assembly file `name` readable by every account: one sleeper whose output is its uid.
  std::string AssemblyFile(const std::string& name, const std::string& queue = "") {
    json a = {{"name", name},
              {"version", "1"},
              {"components", json::array({{{"name", "sleeper"},
                                           {"number_of_containers", 1},
                                           {"launch_command", "sh -c 'id -u; exec sleep 1000'"},
                                           {"resource", {{"cpus", 1}, {"memory", "64"}}}}})}};
    if (!queue.empty()) a["queue"] = queue;
    const std::string path = dir_ + "/" + name + ".json";
    std::ofstream(path) << a.dump(2);
    ::chmod(path.c_str(), 0644);
    return path;
  }

  // The audit log's events, as root reads them with `tarn audit`.
  std::vector<json> Audit() {
    CommandResult r = Tarn("root", {"audit", "--limit", "100000"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<json> out;
    size_t start = 0;
    while (start < r.out.size()) {
      size_t end = r.out.find('\n', start);
      if (end == std::string::npos) end = r.out.size();
      json e = json::parse(r.out.substr(start, end - start), nullptr, false);
      if (!e.is_discarded()) out.push_back(std::move(e));
      start = end + 1;
    }
    return out;
  }

  static std::string Tenant(const std::string& key) { return (*accounts)[key].name; }

  static inline std::string skip_reason_;
  std::string dir_, range_;
  int range_lock_ = -1;
  std::unique_ptr<ServerProcess> server_;
  std::string root_token_;
};

// How many audit events record `method path...` (path a prefix) answered `status`; with
// `denied`, only denials.
size_t Audited(const std::vector<json>& events, const std::string& method,
               const std::string& path_prefix, int status, bool denied = true) {
  size_t n = 0;
  for (const json& e : events) {
    if ((!denied || e.value("decision", "") == "deny") && e.value("method", "") == method &&
        e.value("path", "").rfind(path_prefix, 0) == 0 && e.value("status", 0) == status) {
      ++n;
    }
  }
  return n;
}

TEST_F(IdentityTest, BobCanNeitherActAsAliceNorTouchHerAssembly) {
  StartServer();
  const std::string alice = Tenant("alice"), bob = Tenant("bob");
  CommandResult launched = Tarn("alice", {"launch", AssemblyFile("secret")});
  ASSERT_EQ(launched.exit_code, 0) << launched.err;
  const std::string bob_token = TokenOf("bob", {"--name", "main"});
  ASSERT_EQ(bob_token.rfind("tarn_", 0), 0u) << bob_token;

  // The CLI over the socket: TARN_USER and --user are ignored with a warning; --as is
  // refused; in each case alice's assembly does not exist for bob.
  CommandResult r = Tarn("bob", {"status", "secret"}, {"TARN_USER=" + alice});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is ignored: you act as " + bob), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(HTTP 404)"), std::string::npos) << r.err;
  for (const std::string verb : {"status", "stop", "destroy"}) {
    r = Tarn("bob", {verb, "secret", "--user", alice});
    EXPECT_EQ(r.exit_code, 1) << verb;
    EXPECT_NE(r.err.find("(HTTP 404)"), std::string::npos) << verb << ": " << r.err;
  }
  r = Tarn("bob", {"flex", "secret", "sleeper", "3", "--as", alice});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("(HTTP 403)"), std::string::npos) << r.err;
  r = Tarn("bob", {"launch", AssemblyFile("as-alice"), "--as", alice});
  EXPECT_NE(r.err.find("(HTTP 403)"), std::string::npos) << r.err;

  // Over TCP: ?user.name= (simple auth is off) and forged proxy headers are not credentials;
  // with bob's token they are ignored, and bob is bob.
  const std::string secret = "/app/v1/services/secret";
  EXPECT_EQ(Rest("GET", secret + "?user.name=" + alice, json(), "").status, 401);
  EXPECT_EQ(Rest("GET", secret + "?user.name=" + alice, json(), bob_token).status, 404);
  EXPECT_EQ(Rest("GET", secret + "?tenant=" + alice, json(), bob_token).status, 404);
  EXPECT_EQ(Rest("PUT", secret + "?tenant=" + alice, json{{"state", "STOPPED"}}, bob_token).status,
            404);
  EXPECT_EQ(Rest("DELETE", secret + "?user.name=" + alice, json(), bob_token).status, 404);
  EXPECT_EQ(Rest("POST", "/app/v1/services?tenant=" + alice,
                 json::parse(std::ifstream(AssemblyFile("as-alice"))), bob_token)
                .status,
            403);
  for (const char* header : {"X-Remote-User", "X-Forwarded-User", "Impersonate-User"}) {
    httplib::Client c("127.0.0.1", server_->port());
    httplib::Headers h = {{header, alice}};
    auto got = c.Get(secret.c_str(), h);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->status, 401) << header;  // no token: nobody
    h.emplace("Authorization", "Bearer " + bob_token);
    got = c.Get(secret.c_str(), h);
    ASSERT_TRUE(got);
    // Impersonate-User is heard, and refused to a user; the others are never read.
    EXPECT_EQ(got->status, std::string(header) == "Impersonate-User" ? 403 : 404) << header;
  }

  // A token of bob's named after alice is still bob's.
  const std::string named_alice = TokenOf("bob", {"--name", alice});
  EXPECT_EQ(Rest("GET", secret, json(), named_alice).status, 404);
  Reply who = Rest("GET", "/tarn/v1/whoami", json(), named_alice);
  EXPECT_EQ(who.body.value("tenant", ""), bob) << who.text;

  // Revoked, expired, truncated, made up: 401 saying which.
  // A connection that has used a token (and remembers who it was) loses it at revocation.
  const std::string revoked = TokenOf("bob", {"--name", "gone"});
  httplib::Client kept("127.0.0.1", server_->port());
  kept.set_keep_alive(true);
  kept.set_bearer_token_auth(revoked.c_str());
  auto before = kept.Get("/tarn/v1/whoami");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 200);
  ASSERT_EQ(Tarn("bob", {"token", "revoke", "gone"}).exit_code, 0);
  auto after = kept.Get("/tarn/v1/whoami");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 401) << after->body;
  EXPECT_NE(after->body.find("revoked"), std::string::npos) << after->body;
  const std::string expired = TokenOf("bob", {"--name", "brief", "--ttl", "1s"});
  std::this_thread::sleep_for(1500ms);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {revoked, "revoked"},
      {expired, "expired"},
      {bob_token.substr(0, bob_token.size() - 5), "malformed"},
      {"tarn_" + std::string(43, 'A'), "unknown"}};
  for (const auto& [token, reason] : bad) {
    Reply denied = Rest("GET", secret, json(), token);
    EXPECT_EQ(denied.status, 401) << reason;
    EXPECT_EQ(denied.body.value("reason", ""), reason) << denied.text;
    EXPECT_EQ(denied.text.find(alice), std::string::npos) << denied.text;  // no names leak
  }

  // bob's user token mints no operator or admin token, over the socket or TCP.
  for (const char* role : {"operator", "admin"}) {
    r = Tarn("bob", {"token", "create", "--role", role});
    EXPECT_EQ(r.exit_code, 1) << role;
    EXPECT_NE(r.err.find("(HTTP 403)"), std::string::npos) << r.err;
    EXPECT_EQ(Rest("POST", "/tarn/v1/tokens", json{{"role", role}}, bob_token).status, 403);
  }
  // Nor a token of alice's, nor reads the audit log.
  EXPECT_EQ(Rest("POST", "/tarn/v1/tokens?tenant=" + alice, json::object(), bob_token).status,
            403);
  EXPECT_EQ(Tarn("bob", {"audit"}).exit_code, 1);

  // Alice's assembly is untouched; bob's own runs as bob's uid, alice's as hers.
  CommandResult mine = Tarn("bob", {"launch", AssemblyFile("mine"), "--wait", "--timeout", "60"});
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  ASSERT_EQ(Tarn("alice", {"launch", AssemblyFile("hers"), "--wait", "--timeout", "60"}).exit_code,
            0);
  for (const auto& [key, name] : std::vector<std::pair<std::string, std::string>>{
           {"bob", "mine"}, {"alice", "hers"}}) {
    std::string out;
    tarn::testing::WaitFor(name + "'s output", 20s, [&] {
      out = Tarn(key, {"logs", name, "sleeper-0"}).out;
      return !out.empty();
    });
    EXPECT_EQ(out, std::to_string((*accounts)[key].uid) + "\n") << key;
  }
  r = Tarn("alice", {"status", "secret", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).value("state", ""), "STABLE");

  // Every denial has its audit line, with who and why; so has every state-changing request
  // (bob's stop and destroy of "secret" with --user ignored addressed his own namespace:
  // audited, answered 404, not denials).
  const std::vector<json> events = Audit();
  EXPECT_GE(Audited(events, "GET", secret, 404), 1u);
  EXPECT_GE(Audited(events, "PUT", secret, 404), 1u);
  EXPECT_GE(Audited(events, "GET", secret, 401), 7u);
  EXPECT_GE(Audited(events, "GET", secret, 403), 1u);  // Impersonate-User
  EXPECT_GE(Audited(events, "PUT", secret, 403), 1u);  // flex --as
  EXPECT_GE(Audited(events, "PUT", secret, 404, false), 2u);
  EXPECT_GE(Audited(events, "DELETE", secret, 404, false), 2u);
  EXPECT_GE(Audited(events, "POST", "/app/v1/services", 403), 2u);  // launch --as, ?tenant=
  EXPECT_GE(Audited(events, "POST", "/tarn/v1/tokens", 403), 5u);
  EXPECT_GE(Audited(events, "GET", "/tarn/v1/audit", 403), 1u);
  bool expired_seen = false, hidden_seen = false;
  for (const json& e : events) {
    if (e.value("status", 0) == 401 && e["auth"].value("failure", "") == "expired") {
      expired_seen = true;
    }
    if (e.value("status", 0) == 404 && e.value("decision", "") == "deny" &&
        e.contains("user") && e["user"].value("tenant", "") == bob &&
        e["user"].value("uid", -1) == static_cast<int>((*accounts)["bob"].uid)) {
      hidden_seen = true;
      EXPECT_NE(e.value("reason", "").find(alice), std::string::npos) << e.dump();
      EXPECT_FALSE(e.value("time", "").empty()) << e.dump();
    }
  }
  EXPECT_TRUE(expired_seen);
  EXPECT_TRUE(hidden_seen);
}

// Walls between tenants (issue 22): bob's processes cannot connect to any port of alice's
// instances but her serving component's public one; alice's own processes and root reach
// everything of hers; the walls stand through a kill -9 and restart of the server.
TEST_F(IdentityTest, WallsKeepOtherAccountsOffAnInstanceButOnItsPublicPorts) {
  if (std::system("nft list tables >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "nftables is not installed (scripts/setup installs it) or the kernel "
                    "refuses it";
  }
  StartServer();
  auto server = [](const std::string& name, int port, const std::string& props) {
    json c = {{"name", name},
              {"number_of_containers", 1},
              {"launch_command", "exec /usr/bin/python3 -m http.server " + std::to_string(port) +
                                     " --bind $TARN_IP"},
              {"resource", {{"cpus", 1}, {"memory", "128"}}}};
    c["configuration"]["properties"] = json::parse(props);
    return c;
  };
  json a = {{"name", "walled"},
            {"version", "1"},
            {"components",
             json::array({server("ps", 9000, R"({"tarn.ports": "grpc:9000"})"),
                          server("serving", 9001,
                                 R"({"tarn.ports": "http:9001,admin:9002",
                                     "tarn.ports.public": "http"})")})}};
  const std::string file = dir_ + "/walled.json";
  std::ofstream(file) << a.dump(2);
  ::chmod(file.c_str(), 0644);
  CommandResult r = Tarn("alice", {"launch", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const std::string alice_token = TokenOf("alice");
  std::map<std::string, std::string> ip;
  json status;
  tarn::testing::WaitFor("walled's addresses", 30s, [&] {
    status = Rest("GET", "/app/v1/services/walled", json(), alice_token).body;
    if (!status.is_object() || !status.contains("components")) return false;
    for (const json& c : status["components"]) {
      for (const json& i : c["containers"]) {
        if (!i.value("ip", "").empty()) ip[c.value("name", "")] = i.value("ip", "");
      }
    }
    return ip.size() == 2;
  });
  ASSERT_EQ(ip.size(), 2u) << status.dump();
  EXPECT_EQ(status.value("network_walls", "").rfind("on: ", 0), 0u) << status.dump();
  // Exit 0 when `who` (an account key, or "root") connects to ip:port.
  auto connects = [&](const std::string& who, const std::string& to, int port) {
    std::string as = "--reuid=0";
    if (who != "root") {
      const Account& acc = (*accounts)[who];
      as = "--reuid=" + std::to_string(acc.uid) + " --regid=" + std::to_string(acc.gid) +
           " --init-groups";
    }
    return std::system(("setpriv " + as + " bash -c 'exec 3<>/dev/tcp/" + to + "/" +
                        std::to_string(port) + "' 2>/dev/null")
                           .c_str()) == 0;
  };
  ASSERT_TRUE(tarn::testing::WaitFor("both servers to listen", 30s, [&] {
    return connects("root", ip["ps"], 9000) && connects("root", ip["serving"], 9001);
  }));
  auto check = [&](const std::string& when) {
    EXPECT_FALSE(connects("bob", ip["ps"], 9000)) << when << ": bob reached alice's ps";
    EXPECT_FALSE(connects("bob", ip["serving"], 9002)) << when << ": a port not made public";
    EXPECT_TRUE(connects("bob", ip["serving"], 9001)) << when << ": the public port";
    EXPECT_TRUE(connects("alice", ip["ps"], 9000)) << when << ": alice's own";
    EXPECT_TRUE(connects("root", ip["ps"], 9000)) << when << ": root";
  };
  check("running");

  // kill -9: the kernel keeps the rules; the restarted server loads them again whole.
  server_->Kill9();
  check("while the server is down");
  ASSERT_TRUE(server_->Start()) << server_->log();
  check("after the restart");
  // The server's table (one per address range: "tarn_127_43_0_0_16").
  std::string name = "tarn_";
  for (char c : range_) name += std::isdigit(static_cast<unsigned char>(c)) ? c : '_';
  auto table = [&] {
    FILE* p = ::popen(("nft list table inet " + name + " 2>&1").c_str(), "r");
    std::string text;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
    ::pclose(p);
    return text;
  };
  std::string rules = table();
  EXPECT_NE(rules.find(ip["ps"] + " . " + std::to_string((*accounts)["alice"].uid)),
            std::string::npos)
      << rules;

  // Destroyed: the addresses are free, and so are their walls.
  ASSERT_EQ(Tarn("alice", {"destroy", "walled"}).exit_code, 0);
  tarn::testing::WaitFor("walled to be destroyed", 30s, [&] {
    return Rest("GET", "/app/v1/services/walled", json(), alice_token).status == 404;
  });
  rules = table();
  EXPECT_EQ(rules.find(ip["ps"] + " "), std::string::npos) << rules;
}

// File walls (issue 22): a tenant's shared directory (checkpoints, exported models), work
// directory and logs are its own account's; the state database, the token hashes and the
// audit log are root's alone.
TEST_F(IdentityTest, ATenantsFilesAreItsOwnAndTheServersAreRoots) {
  StartServer();
  json a = {{"name", "files"},
            {"version", "1"},
            {"components",
             json::array({{{"name", "trainer"},
                           {"number_of_containers", 1},
                           {"launch_command",
                            "mkdir -p $TARN_SHARED_DIR/checkpoints $TARN_SHARED_DIR/models/1 && "
                            "echo weights > $TARN_SHARED_DIR/checkpoints/ckpt-1 && "
                            "echo model > $TARN_SHARED_DIR/models/1/model.pt && "
                            "echo state > work.txt && exec sleep 1000"},
                           {"resource", {{"cpus", 1}, {"memory", "64"}}}}})}};
  const std::string file = dir_ + "/files.json";
  std::ofstream(file) << a.dump(2);
  ::chmod(file.c_str(), 0644);
  ASSERT_EQ(Tarn("alice", {"launch", file}).exit_code, 0);
  const std::string token = TokenOf("alice");
  std::string shared;
  ASSERT_TRUE(tarn::testing::WaitFor("alice's model", 30s, [&] {
    shared = Rest("GET", "/app/v1/services/files", json(), token).body.value("shared_dir", "");
    return !shared.empty() && std::filesystem::exists(shared + "/models/1/model.pt");
  }));
  // Exit 0 when `who` reads `path` (cat, or ls for a directory).
  auto reads = [&](const std::string& who, const std::string& path) {
    const Account& acc = (*accounts)[who];
    const std::string tool = std::filesystem::is_directory(path) ? "ls" : "cat";
    return std::system(("setpriv --reuid=" + std::to_string(acc.uid) + " --regid=" +
                        std::to_string(acc.gid) + " --init-groups " + tool + " '" + path +
                        "' >/dev/null 2>&1")
                           .c_str()) == 0;
  };
  const std::string state = dir_ + "/state";
  std::string work;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(state)) {
    if (entry.path().filename() == "work.txt") work = entry.path().string();
  }
  ASSERT_FALSE(work.empty()) << "no work.txt under " << state;
  for (const std::string& path : {shared, shared + "/checkpoints/ckpt-1",
                                  shared + "/models/1/model.pt", work}) {
    EXPECT_TRUE(reads("alice", path)) << path;
    EXPECT_FALSE(reads("bob", path)) << "bob reads " << path;
  }
  for (const char* own : {"state.db", "state.db-wal", "auth.db", "audit.log"}) {
    const std::string path = state + "/" + own;
    if (!std::filesystem::exists(path)) continue;
    EXPECT_FALSE(reads("bob", path)) << "bob reads " << path;
    EXPECT_FALSE(reads("alice", path)) << "alice reads " << path;
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u) << path;
  }
}

TEST_F(IdentityTest, RootActsAsAnotherAndTheAuditLineHasBothNames) {
  StartServer();
  const std::string alice = Tenant("alice");
  ASSERT_EQ(Tarn("alice", {"launch", AssemblyFile("job")}).exit_code, 0);
  CommandResult r = Tarn("root", {"flex", "job", "sleeper", "2", "--as", alice});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // For root, --user and $TARN_USER mean --as.
  r = Tarn("root", {"status", "job", "-o", "json"}, {"TARN_USER=" + alice});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).value("user", ""), alice);
  bool found = false;
  for (const json& e : Audit()) {
    if (e.value("method", "") == "PUT" && e.contains("impersonated_by")) {
      found = true;
      EXPECT_EQ(e["user"].value("tenant", ""), alice) << e.dump();
      EXPECT_EQ(e["user"].value("uid", -1), static_cast<int>((*accounts)["alice"].uid));
      EXPECT_EQ(e["impersonated_by"].value("uid", -1), 0) << e.dump();
      EXPECT_EQ(e["impersonated_by"].value("role", ""), "admin");
      EXPECT_EQ(e["auth"].value("method", ""), "socket");
      EXPECT_EQ(e.value("status", 0), 200) << e.dump();
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(IdentityTest, OperatorsAndQueueAclsDecideWhoMayDoWhat) {
  StartServer({{"auth", {{"operators", Tenant("oper")}}},
               {"queues", json::array({{{"name", "gpu"},
                                        {"capacity", 50},
                                        {"acl_submit_applications", " " + accounts->group()}},
                                       {{"name", "default"}, {"capacity", 50}}})}});
  const std::string alice = Tenant("alice");
  ASSERT_EQ(Tarn("alice", {"launch", AssemblyFile("work")}).exit_code, 0);
  // A user can't stop another tenant's assembly (it does not exist for them); an operator can.
  CommandResult r = Tarn("bob", {"stop", "work", "--tenant", alice});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("(HTTP 404)"), std::string::npos) << r.err;
  r = Tarn("oper", {"stop", "work", "--tenant", alice});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Tarn("oper", {"list", "--tenant", "*", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).size(), 1u) << r.out;
  // An operator's token is no admin's: no tokens for others.
  const std::string op_token = TokenOf("oper");
  EXPECT_EQ(Rest("POST", "/tarn/v1/tokens?tenant=" + alice, json::object(), op_token).status, 403);

  // The gpu queue admits its group's members only.
  r = Tarn("bob", {"launch", AssemblyFile("train", "gpu")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("(HTTP 403)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gpu does not admit account " + Tenant("bob")), std::string::npos) << r.err;
  r = Tarn("carol", {"launch", AssemblyFile("train", "gpu")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(IdentityTest, TwoAccountsWhoseLabelsCollideAreNotMerged) {
  StartServer();
  CommandResult first = Tarn("coll_x", {"whoami", "-o", "json"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const json me = json::parse(first.out);
  EXPECT_EQ(me.value("account", ""), Tenant("coll_x"));
  CommandResult second = Tarn("coll-x", {"whoami"});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("(HTTP 403)"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("\"" + Tenant("coll-x") + "\", which another local account already holds"),
            std::string::npos)
      << second.err;
  // The first is still itself, after a restart too (the binding is stored).
  ASSERT_TRUE(server_->Terminate());
  ASSERT_TRUE(server_->Start()) << server_->log();
  EXPECT_EQ(Tarn("coll_x", {"whoami"}).exit_code, 0);
  EXPECT_EQ(Tarn("coll-x", {"whoami"}).exit_code, 1);
}

TEST_F(IdentityTest, BeyondLoopbackOnlyWithTlsAndTheCliVerifiesTheServer) {
  // Refused at start, before listening, with the reason.
  CommandResult refused = tarn::testing::RunTarn(
      {"server", "--listen", "0.0.0.0:0", "--dns", "127.0.0.1:0", "--state-dir", dir_ + "/s0",
       "--socket", dir_ + "/s0.sock"},
      {}, "/tmp", 30s);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("0.0.0.0"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("TLS"), std::string::npos) << refused.err;

  ASSERT_TRUE(Sh("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                 "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
                 dir_ + "/key.pem -out " + dir_ + "/cert.pem"));
  ::chmod((dir_ + "/cert.pem").c_str(), 0644);
  StartServer({{"tls", {{"cert", dir_ + "/cert.pem"}, {"key", dir_ + "/key.pem"}}}});
  EXPECT_NE(server_->log().find("listening on https://127.0.0.1:"), std::string::npos);
  const std::string bob_token = TokenOf("bob");
  const std::string addr = "https://127.0.0.1:" + std::to_string(server_->port());
  CommandResult r = Tarn("bob", {"whoami", "--addr", addr, "--cacert", dir_ + "/cert.pem"},
                         {"TARN_TOKEN=" + bob_token});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(Tenant("bob")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("token"), std::string::npos) << r.out;
  // $TARN_CACERT too; without the CA the server is not trusted.
  r = Tarn("bob", {"list", "--addr", addr},
           {"TARN_TOKEN=" + bob_token, "TARN_CACERT=" + dir_ + "/cert.pem"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Tarn("bob", {"list", "--addr", addr}, {"TARN_TOKEN=" + bob_token});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("TLS handshake with tarn server at " + addr), std::string::npos) << r.err;
  // The token file, written 0600 by `token create --save`, is what the CLI sends by default.
  r = Tarn("bob", {"token", "create", "--name", "saved", "--save"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat(((*accounts)["bob"].home + "/.config/tarn/token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, (*accounts)["bob"].uid);
  r = Tarn("bob", {"whoami", "--addr", addr, "--cacert", dir_ + "/cert.pem"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("saved"), std::string::npos) << r.out;
}

TEST_F(IdentityTest, SimpleAuthOnlyWhenConfiguredAndOnlyOnLoopback) {
  // Off by default: YARN's curl examples get 401, saying a credential is missing.
  StartServer();
  Reply off = Rest("GET", "/app/v1/services?user.name=" + Tenant("alice"), json(), "");
  EXPECT_EQ(off.status, 401);
  EXPECT_EQ(off.body.value("reason", ""), "missing") << off.text;
  ASSERT_TRUE(server_->Terminate());
  server_.reset();

  StartServer({{"auth", {{"simple", true}}}});
  EXPECT_NE(server_->log().find("any local account can act as any other"), std::string::npos)
      << server_->log();
  // YARN's Services API examples, as curl sends them.
  const std::string alice = Tenant("alice");
  json sleeper = json::parse(std::ifstream(AssemblyFile("yarn")));
  EXPECT_EQ(Rest("POST", "/app/v1/services?user.name=" + alice, sleeper, "").status, 202);
  Reply got = Rest("GET", "/app/v1/services/yarn?user.name=" + alice, json(), "");
  EXPECT_EQ(got.status, 200) << got.text;
  EXPECT_EQ(got.body.value("user", ""), alice);
  EXPECT_EQ(Rest("PUT", "/app/v1/services/yarn/components/sleeper?user.name=" + alice,
                 json{{"number_of_containers", 2}}, "")
                .status,
            200);
  EXPECT_EQ(Rest("GET", "/app/v1/services/yarn?user.name=" + Tenant("bob"), json(), "").status,
            404);
  EXPECT_EQ(Rest("DELETE", "/app/v1/services/yarn?user.name=" + alice, json(), "").status, 200);
}

// The dashboard's sessions (issue 24): a token, or a one-time code, exchanged for an HttpOnly,
// SameSite=Strict cookie that acts as the token's owner and nobody else; a change with the
// cookie needs X-Tarn-CSRF (a page of another site cannot send it); logout ends it.
TEST_F(IdentityTest, ADashboardSessionActsAsItsOwnerAndRefusesCrossSiteChanges) {
  StartServer();
  const std::string alice = Tenant("alice"), bob = Tenant("bob");
  const std::string alice_token = TokenOf("alice");
  httplib::Client http("127.0.0.1", server_->port());
  auto post = [&](const std::string& path, const json& body, httplib::Headers headers = {}) {
    return http.Post(path, headers, body.is_null() ? "" : body.dump(), "application/json");
  };
  // Logs in with `body`; the cookie's value ("" when none was set).
  auto login = [&](const json& body, int want) {
    auto r = post("/ui/login", body);
    EXPECT_TRUE(r);
    if (!r) return std::string();
    EXPECT_EQ(r->status, want) << r->body;
    const std::string cookie = r->get_header_value("Set-Cookie");
    if (want != 200) {
      EXPECT_EQ(cookie, "") << "a refused login sets no cookie";
      return std::string();
    }
    EXPECT_NE(cookie.find("; HttpOnly"), std::string::npos) << cookie;
    EXPECT_NE(cookie.find("; SameSite=Strict"), std::string::npos) << cookie;
    EXPECT_NE(cookie.find("; Path=/"), std::string::npos) << cookie;
    EXPECT_NE(cookie.find("; Max-Age=43200"), std::string::npos) << cookie;
    EXPECT_EQ(cookie.find("Secure"), std::string::npos) << "plain TCP on loopback: " << cookie;
    EXPECT_EQ(cookie.rfind("tarn_session=tarn_", 0), 0u) << cookie;
    EXPECT_NE(cookie.substr(13, cookie.find(';') - 13), alice_token) << "a secret of its own";
    return cookie.substr(13, cookie.find(';') - 13);
  };
  const std::string session = login({{"token", alice_token}}, 200);
  ASSERT_FALSE(session.empty());
  const httplib::Headers with_cookie = {{"Cookie", "theme=dark; tarn_session=" + session}};
  auto who = http.Get("/tarn/v1/whoami", with_cookie);
  ASSERT_TRUE(who);
  ASSERT_EQ(who->status, 200) << who->body;
  const json w = json::parse(who->body);
  EXPECT_EQ(w["tenant"], alice);
  EXPECT_EQ(w["authenticated_by"], "session");
  EXPECT_EQ(w.value("token", "").rfind("ui-session-", 0), 0u) << w.dump();
  // `tarn token list` shows it: the owner sees and can revoke every session.
  CommandResult list = Tarn("alice", {"token", "list"});
  EXPECT_NE(list.out.find(w.value("token", "")), std::string::npos) << list.out;

  // A change with the cookie alone is refused (and audited); with X-Tarn-CSRF it is made.
  json a = json::parse(ReadAll(AssemblyFile("viaui")));
  auto refused = post("/app/v1/services", a, with_cookie);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 403) << refused->body;
  EXPECT_NE(refused->body.find("X-Tarn-CSRF: 1"), std::string::npos) << refused->body;
  EXPECT_EQ(Rest("GET", "/app/v1/services/viaui", json(), alice_token).status, 404)
      << "nothing launched";
  httplib::Headers changes = with_cookie;
  changes.emplace("X-Tarn-CSRF", "1");
  auto made = post("/app/v1/services", a, changes);
  ASSERT_TRUE(made);
  EXPECT_EQ(made->status, 202) << made->body;
  // Bob's session sees nothing of alice's.
  const std::string bob_session = login({{"token", TokenOf("bob")}}, 200);
  auto other = http.Get("/app/v1/services/viaui", {{"Cookie", "tarn_session=" + bob_session}});
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404) << other->body;

  // A one-time code (what `tarn ui` prints): good once, for its tenant.
  Reply code = Rest("POST", "/tarn/v1/ui/login-codes", json(), alice_token);
  ASSERT_EQ(code.status, 201) << code.text;
  EXPECT_EQ(code.body.value("login_path", ""), "/ui/login?code=" + code.body.value("code", ""));
  const std::string by_code = login({{"code", code.body["code"]}}, 200);
  auto who2 = http.Get("/tarn/v1/whoami", {{"Cookie", "tarn_session=" + by_code}});
  ASSERT_TRUE(who2);
  EXPECT_EQ(json::parse(who2->body)["tenant"], alice);
  login({{"code", code.body["code"]}}, 401);  // used

  // Bad logins say why and set nothing.
  login({{"token", "tarn_" + std::string(43, 'x')}}, 401);
  login(json::object(), 400);
  login({{"token", alice_token}, {"code", "x"}}, 400);

  // Logout ends the session: its cookie is cleared, and refused from then on.
  auto out = post("/ui/logout", json(), changes);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->status, 200) << out->body;
  EXPECT_NE(out->get_header_value("Set-Cookie").find("tarn_session=; "), std::string::npos);
  EXPECT_NE(out->get_header_value("Set-Cookie").find("Max-Age=0"), std::string::npos);
  auto gone = http.Get("/tarn/v1/whoami", with_cookie);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 401);
  EXPECT_NE(gone->body.find("revoked"), std::string::npos) << gone->body;
  // A bearer token is no session to log out of.
  EXPECT_EQ(Rest("POST", "/ui/logout", json(), alice_token).status, 400);

  const std::vector<json> events = Audit();
  EXPECT_GE(Audited(events, "POST", "/app/v1/services", 403), 1u) << "the cross-site refusal";
  EXPECT_GE(Audited(events, "POST", "/ui/login", 401), 1u);
}

}  // namespace
