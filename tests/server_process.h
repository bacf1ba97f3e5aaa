// A `tarn server` child process for the integration tests under tests/ (its own state
// directory, config and Unix socket, the API and DNS on port 0 so that tests run side by
// side), and the REST calls and waits the tests make against it: over TCP with a bearer
// token of the tenant asked for, made by root through the socket (`tarn token create --as`).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/file.h"
#include "tarn_process.h"

namespace tarn::testing {

using namespace std::chrono_literals;

inline std::string ReadAll(const std::string& path) {
  return tarn::ReadFileToString(path).value_or("");
}

// A process of this machine with its environment: how the tests find an instance's workload
// (by the TARN_* variables tarn gave it), whose own pid namespace hides it from its $$.
struct WorkloadProcess {
  pid_t pid = 0;
  std::map<std::string, std::string> env;
};

// Every process whose command name is `comm` ("sleep"). Zombies have no environment.
inline std::vector<WorkloadProcess> WorkloadProcesses(const std::string& comm) {
  std::vector<WorkloadProcess> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string pid = it->path().filename();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ReadAll(it->path().string() + "/comm") != comm + "\n") continue;
    const std::string env = ReadAll(it->path().string() + "/environ");
    WorkloadProcess p;
    p.pid = std::stoi(pid);
    for (size_t start = 0; start < env.size();) {
      size_t stop = env.find('\0', start);
      if (stop == std::string::npos) stop = env.size();
      const std::string kv = env.substr(start, stop - start);
      const size_t eq = kv.find('=');
      if (eq != std::string::npos) p.env[kv.substr(0, eq)] = kv.substr(eq + 1);
      start = stop + 1;
    }
    out.push_back(std::move(p));
  }
  return out;
}

// One `tarn server` child process: --listen and --dns on port 0 (read back from its log),
// its own state directory and config, `env` added to its environment.
class ServerProcess {
 public:
  ServerProcess(std::string state_dir, std::string config, std::vector<std::string> env = {})
      : state_dir_(std::move(state_dir)), config_(std::move(config)), env_(std::move(env)) {}
  ~ServerProcess() { Kill9(); }

  // Starts it and waits until it listens; false (with the log) when it does not.
  bool Start() {
    std::filesystem::create_directories(state_dir_);
    static int starts = 0;  // a fresh log per start: never read an older server's address
    log_ = state_dir_ + "/server-" + std::to_string(++starts) + ".log";
    std::filesystem::remove(log_);
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      for (const std::string& e : env_) ::putenv(const_cast<char*>(e.c_str()));
      // Port 0 for both: tests run side by side.
      std::vector<std::string> args = {TARN_BINARY, "server",      "--listen",    "127.0.0.1:0",
                                       "--dns",     "127.0.0.1:0", "--state-dir", state_dir_,
                                       "--config",  config_,       "--socket",    socket()};
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(TARN_BINARY, argv.data());
      ::_exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      std::string text = ReadAll(log_);
      auto at = text.find("listening on http://");
      size_t skip = 20;
      if (at == std::string::npos) {
        at = text.find("listening on https://");
        skip = 21;
      }
      if (at != std::string::npos) {
        auto end = text.find(' ', at + skip);
        std::string addr = text.substr(at + skip, end - at - skip);
        auto colon = addr.rfind(':');
        port_ = std::stoi(addr.substr(colon + 1));
        auto dns = text.find("DNS on 127.0.0.1:");
        if (dns != std::string::npos) dns_port_ = std::stoi(text.substr(dns + 17));
        return true;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  // kill -9, as a crash or the OOM killer would.
  void Kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Waits for it to die by itself (a crash point), at most `timeout`.
  bool WaitExit(std::chrono::milliseconds timeout, int* status) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid_, status, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  bool Terminate() {
    if (pid_ <= 0) return true;
    ::kill(pid_, SIGTERM);
    int status = 0;
    bool ok = WaitExit(20s, &status);
    return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

  int port() const { return port_; }
  int dns_port() const { return dns_port_; }
  std::string socket() const { return socket_.empty() ? state_dir_ + "/tarn.sock" : socket_; }
  // Before Start(): where the socket goes (by default in the state directory, which only
  // root may enter).
  void set_socket(std::string path) { socket_ = std::move(path); }
  // The environment that makes the CLI talk to this server's socket (as root, `user`).
  std::vector<std::string> CliEnv(const std::string& user = "alice") const {
    return {"TARN_SOCKET=" + socket(), "TARN_USER=" + user};
  }

  // A bearer token of tenant `user` (made once per user and server state, by root acting as
  // the user over the socket); "" when it could not be made (the test fails saying why).
  std::string Token(const std::string& user) {
    auto it = tokens_.find(user);
    if (it != tokens_.end()) return it->second;
    static int made = 0;  // names unique across servers on one state directory
    const std::string name = "test-" + std::to_string(::getpid()) + "-" + std::to_string(++made);
    CommandResult r = RunTarn({"token", "create", "--as", user, "--name", name, "--socket",
                               socket()},
                              {}, "/tmp", std::chrono::seconds(30));
    std::string token = r.out.substr(0, r.out.find('\n'));
    if (r.exit_code != 0 || token.rfind("tarn_", 0) != 0) {
      ADD_FAILURE() << "tarn token create --as " << user << " exited " << r.exit_code << ": "
                    << r.err;
      return "";
    }
    tokens_[user] = token;
    return token;
  }
  std::string log() const { return ReadAll(log_); }
  pid_t pid() const { return pid_; }

 private:
  std::string state_dir_, config_, socket_;
  std::vector<std::string> env_;
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
  int dns_port_ = 0;
  std::map<std::string, std::string> tokens_;  // user -> bearer token
};

struct Reply {
  int status = 0;  // 0: no answer
  nlohmann::json body;
  std::string text;
  std::string index;  // its X-Tarn-Index header ("" when none)
};

// One REST call to the server on 127.0.0.1:`port` with bearer `token` (none: "").
inline Reply CallApiWithToken(int port, const std::string& method, const std::string& path,
                              const nlohmann::json& body, const std::string& token) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  c.set_read_timeout(30);
  if (!token.empty()) c.set_bearer_token_auth(token.c_str());
  const std::string& target = path;
  std::string payload = body.is_null() ? "" : body.dump();
  httplib::Result r = method == "GET"    ? c.Get(target)
                      : method == "POST" ? c.Post(target, payload, "application/json")
                      : method == "PUT"  ? c.Put(target, payload, "application/json")
                                         : c.Delete(target);
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.text = r->body;
  out.index = r->get_header_value("X-Tarn-Index");
  out.body = nlohmann::json::parse(r->body, nullptr, false);
  return out;
}

// One REST call to `server` over TCP as tenant `user` (with its token; none: "").
inline Reply CallApi(ServerProcess& server, const std::string& method, const std::string& path,
                     const nlohmann::json& body = nlohmann::json(),
                     const std::string& user = "alice") {
  return CallApiWithToken(server.port(), method, path, body,
                          user.empty() ? "" : server.Token(user));
}

// Polls `done` until it holds (true) or `timeout` passes (a test failure naming `what`).
inline bool WaitFor(const std::string& what, std::chrono::milliseconds timeout,
                    const std::function<bool()>& done,
                    std::chrono::milliseconds every = std::chrono::milliseconds(50)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(every);
  }
  ADD_FAILURE() << "timed out waiting for " << what;
  return false;
}

// The READY replicas' addresses for load-generating clients: one thread refreshes them from
// the API (Set), every client reads them (Get) before each request.
class AddressList {
 public:
  void Set(std::vector<std::string> ips) {
    std::lock_guard<std::mutex> lock(mu_);
    ips_ = std::move(ips);
  }
  std::vector<std::string> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ips_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> ips_;
};

// The fixture of end-to-end tests that run a real `tarn server` (root: containers) in a
// temporary directory and on a test address range of their own.
class ServerTest : public ::testing::Test {
 protected:
  // Starts the server in /tmp/tarn-LABEL-test-XXXXXX with probe_interval_ms 100, the range
  // and no DNS upstream, and what `config` adds or overrides.
  void StartServer(const std::string& label, const nlohmann::json& config) {
    std::string tmpl = "/tmp/tarn-" + label + "-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr) << tmpl;
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0711);
    range_lock_ = LockAddressRange(&range_);
    ASSERT_GE(range_lock_, 0) << "no free test address range";
    nlohmann::json full = {{"probe_interval_ms", 100},
                           {"address_range", range_},
                           {"dns_upstream", nlohmann::json::array()}};
    full.update(config);
    std::ofstream(dir_ + "/config.json") << full.dump(2);
    server_ = std::make_unique<ServerProcess>(dir_ + "/state", dir_ + "/config.json");
    ASSERT_TRUE(server_->Start()) << server_->log();
  }
  // Destroys each (user, assembly) still there, waiting up to `timeout` for each to go,
  // stops the server, removes the directory and gives the range back.
  void StopServer(const std::vector<std::pair<std::string, std::string>>& assemblies,
                  std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    if (server_) {
      for (const auto& [user, name] : assemblies) {
        const std::string path = "/app/v1/services/" + name;
        if (CallApi(*server_, "GET", path, nlohmann::json(), user).status != 200) continue;
        CallApi(*server_, "DELETE", path, nlohmann::json(), user);
        WaitFor(name + " to be destroyed", timeout, [&] {
          return CallApi(*server_, "GET", path, nlohmann::json(), user).status == 404;
        });
      }
      EXPECT_TRUE(server_->Terminate()) << server_->log();
      server_.reset();
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    if (range_lock_ >= 0) ::close(range_lock_);
    range_lock_ = -1;
  }

  std::string dir_, range_;
  int range_lock_ = -1;
  std::unique_ptr<ServerProcess> server_;
};

}  // namespace tarn::testing
