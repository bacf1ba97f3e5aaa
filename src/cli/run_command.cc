// tarn run FILE: the embedded, foreground mode (like `docker compose up`). An in-process
// tarn server on a free loopback port and its own state directory; the assembly launched
// into it; live progress (instance states, readiness, restarts, exits) and the instances'
// output on stdout; until the assembly finishes, the timeout, or Ctrl-C; then everything is
// destroyed and the server stops.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "api/server_command.h"
#include "cli/client.h"
#include "cli/client_session.h"
#include "cli/commands.h"
#include "cli/identity.h"
#include "common/dns_name.h"
#include "common/file.h"

namespace tarn::cli {
namespace {

using json = nlohmann::json;

std::atomic<int> g_signal{0};

void OnSignal(int sig) { g_signal = sig; }

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// Prints what is new in one instance's log file, each line prefixed with its name.
class LogTail {
 public:
  LogTail(std::string prefix, std::string path)
      : prefix_(std::move(prefix)), path_(std::move(path)) {}
  void Poll(std::ostream& out) {
    FILE* f = std::fopen(path_.c_str(), "r");
    if (f == nullptr) return;
    if (std::fseek(f, 0, SEEK_END) == 0) {
      long size = std::ftell(f);
      if (size < offset_) offset_ = 0;  // rotated or restarted
    }
    std::fseek(f, offset_, SEEK_SET);
    char buf[8192];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
      offset_ += static_cast<long>(n);
      partial_.append(buf, n);
    }
    std::fclose(f);
    size_t start = 0, nl;
    while ((nl = partial_.find('\n', start)) != std::string::npos) {
      out << prefix_ << partial_.substr(start, nl - start) << "\n";
      start = nl + 1;
    }
    partial_.erase(0, start);
  }

 private:
  std::string prefix_, path_;
  long offset_ = 0;
  std::string partial_;
};

}  // namespace

int RunForeground(const RunFlags& run) {
  std::optional<Acting> acting = ResolveActing("", run.user);
  if (!acting) return 2;
  const std::string label = UserToDnsLabel(acting->name);
  PreparedLaunch prepared;
  if (int rc = PrepareLaunch(run.file, label, "tarn", &prepared); rc != 0) return rc;

  std::string state_dir = run.state_dir;
  bool temporary = false;
  if (state_dir.empty()) {
    char tmpl[] = "/tmp/tarn-run-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      std::cerr << "tarn: cannot create a state directory under /tmp\n";
      return 1;
    }
    state_dir = tmpl;
    ::chmod(state_dir.c_str(), 0711);
    temporary = true;
  }

  // Ctrl-C and SIGTERM end the run cleanly; set before any thread starts.
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  api::ServerFlags sf;
  sf.listen = "";  // the private server answers on its own socket alone
  sf.socket = state_dir + "/tarn.sock";
  sf.state_dir = state_dir;
  sf.fake_gpus = run.fake_gpus;
  sf.config = run.config;
  sf.dns = "127.0.0.1:0";
  auto daemon = api::Daemon::Start(sf);
  if (!daemon.ok()) {
    std::cerr << "tarn: cannot start the embedded server: " << daemon.status().message() << "\n";
    if (temporary) std::filesystem::remove_all(state_dir);
    return 1;
  }
  std::cout << "tarn run: embedded server on unix:" << (*daemon)->socket_path() << ", DNS on "
            << (*daemon)->dns_address() << ", state in " << state_dir << std::endl;

  ApiClient::Options co;
  co.address = *ParseServerAddress("unix:" + (*daemon)->socket_path());
  co.act_as = acting->as;
  auto client = ApiClient::Create(co);
  const std::string path = "/app/v1/services/" + UrlEncode(prepared.name);
  int exit_code = 0;
  auto posted = client->Post("/app/v1/services", prepared.body);
  if (!posted.ok()) {
    exit_code = PrintError(posted.status());
  } else {
    std::cout << "tarn run: launched " << prepared.name << " as " << label << std::endl;
    const auto start = std::chrono::steady_clock::now();
    std::map<std::string, std::string> shown;  // instance -> "STATE diagnostics"
    std::map<std::string, LogTail> tails;
    std::string last_state;
    size_t events_seen = 0;
    for (;;) {
      auto s = client->Get(path);
      if (!s.ok()) {
        exit_code = PrintError(s.status());
        break;
      }
      const std::string state = Str(*s, "state");
      if (state != last_state) {
        std::cout << "[" << prepared.name << "] " << state
                  << (Str(*s, "diagnostics").empty() ? "" : ": " + Str(*s, "diagnostics"))
                  << std::endl;
        last_state = state;
      }
      for (const json& c : s->value("components", json::array())) {
        for (const json& i : c.value("containers", json::array())) {
          const std::string name = Str(i, "component_instance_name");
          std::string line = Str(i, "state");
          if (!Str(i, "diagnostics").empty()) line += " (" + Str(i, "diagnostics") + ")";
          if (shown[name] != line) {
            std::cout << "[" << name << "] " << line << std::endl;
            shown[name] = line;
          }
          if (!tails.count(name + "/out")) {
            // In-process: read the log files where the local backend keeps them.
            const std::string shim =
                state_dir + "/shims/" + label + "/" + prepared.name + "/" + name;
            tails.emplace(name + "/out", LogTail(name + " | ", shim + "/stdout.log"));
            tails.emplace(name + "/err", LogTail(name + " ! ", shim + "/stderr.log"));
          }
        }
      }
      for (auto& [k, t] : tails) t.Poll(std::cout);
      auto events = client->Get("/tarn/v1/services/" + UrlEncode(prepared.name) + "/events");
      if (events.ok() && events->is_array()) {
        for (size_t k = events_seen; k < events->size(); ++k) {
          const json& e = (*events)[k];
          const std::string type = Str(e, "type");
          if (type == "RESTART" || type == "EXITED" || type == "FAILED" || type == "START_FAILED") {
            std::cout << "[" << (Str(e, "instance").empty() ? prepared.name : Str(e, "instance"))
                      << "] " << type << ": " << Str(e, "message") << std::endl;
          }
        }
        events_seen = events->size();
      }
      if (state == "SUCCEEDED") {
        exit_code = 0;
        break;
      }
      if (state == "FAILED") {
        exit_code = 1;
        break;
      }
      if (g_signal != 0) {
        std::cout << "tarn run: interrupted" << std::endl;
        exit_code = 130;
        break;
      }
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (run.timeout_s > 0 && elapsed >= run.timeout_s) {
        std::cout << "tarn run: timed out after " << run.timeout_s << " s" << std::endl;
        exit_code = 124;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    // Stop everything: destroy, and wait until it is gone.
    std::cout << "tarn run: destroying " << prepared.name << std::endl;
    if (client->Delete(path).ok()) {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (std::chrono::steady_clock::now() < deadline) {
        auto s = client->Get(path);
        if (!s.ok()) break;  // 404: gone
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }
  client.reset();  // close the keep-alive connection: the server's shutdown waits for it
  (*daemon)->Shutdown();
  if (temporary) std::filesystem::remove_all(state_dir);
  std::cout << "tarn run: " << prepared.name << " ended with exit status " << exit_code
            << std::endl;
  return exit_code;
}

}  // namespace tarn::cli
