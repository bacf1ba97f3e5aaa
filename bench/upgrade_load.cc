// upgrade_load: bench/run upgrade's clients. Each of --clients threads sends POST --path with
// --body back to back (closed loop, keep-alive), choosing in turn among the replicas named in
// --targets (one HOST:PORT per line, the ready ones; the driver rewrites it by rename and this
// re-reads it every 50 ms, so a list can be that much older than tarn's). A request that gets
// no answer at all (refused, reset, closed before the answer) is asked once of the next
// replica, as the demo's client does; anything but a 200 is an error. Runs until SIGTERM or
// SIGINT, then prints one JSON object: requests, rps, latency_p50_ms, latency_p99_ms,
// latency_max_ms (from the first attempt to the answer), errors, non_200, no_answer, retried
// (asked of the other replica), reconnected (a kept-alive connection found closed).
//
// usage: upgrade_load --targets FILE --path /x --body FILE [--clients 16]
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http_wire.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "upgrade_load: %s\nusage: upgrade_load --targets FILE --path /x --body FILE "
               "[--clients 16]\n",
               why.c_str());
  std::exit(2);
}

struct Target {
  std::string host;
  int port = 0;
  std::string Key() const { return host + ":" + std::to_string(port); }
};

// The current list of ready replicas, re-read from the driver's file.
class Targets {
 public:
  explicit Targets(std::string path) : path_(std::move(path)) {}
  void Reload() {
    std::ifstream in(path_);
    if (!in) return;  // between the driver's write and rename: keep the last list
    std::vector<Target> next;
    std::string line;
    while (std::getline(in, line)) {
      const size_t colon = line.rfind(':');
      if (colon == std::string::npos) continue;
      next.push_back({line.substr(0, colon), std::atoi(line.c_str() + colon + 1)});
    }
    std::lock_guard<std::mutex> lock(mu_);
    list_ = std::make_shared<const std::vector<Target>>(std::move(next));
  }
  std::shared_ptr<const std::vector<Target>> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return list_;
  }

 private:
  const std::string path_;
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<Target>> list_ = std::make_shared<std::vector<Target>>();
};

struct Tally {
  std::vector<double> latencies_ms;
  long requests = 0, non_200 = 0, no_answer = 0, retried = 0, reconnected = 0;
  std::vector<std::string> first_errors;
};

struct Conn {
  int fd = -1;
  std::string in;
};

// An idle kept-alive connection with something to read (its end, or a reset) is over.
bool PeerClosed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0;
}

void Client(const Targets& targets, const std::string& request, size_t seed, Tally* t) {
  std::map<std::string, Conn> conns;
  size_t turn = seed;
  auto drop = [&conns](const std::string& key) {
    if (auto it = conns.find(key); it != conns.end()) {
      ::close(it->second.fd);
      conns.erase(it);
    }
  };
  auto error = [t](const std::string& what) {
    if (t->first_errors.size() < 5) t->first_errors.push_back(what);
  };
  while (!g_stop) {
    const std::shared_ptr<const std::vector<Target>> list = targets.Get();
    if (list->empty()) {
      std::this_thread::sleep_for(5ms);
      continue;
    }
    ++turn;
    const Clock::time_point start = Clock::now();
    int status = -1;
    std::string body;
    const size_t attempts = std::min<size_t>(2, list->size());
    for (size_t attempt = 0; attempt < attempts; ++attempt) {
      const Target& target = (*list)[(turn + attempt) % list->size()];
      const std::string key = target.Key();
      // A kept-alive connection the replica closed meanwhile (its old run drained) is
      // replaced before use, and one that fails before any answer is tried once afresh,
      // as HTTP clients do (Go's Transport, httplib); neither is the retry on the other.
      if (auto it = conns.find(key); it != conns.end() && PeerClosed(it->second.fd)) drop(key);
      for (int fresh = 0; fresh < 2 && status < 0; ++fresh) {
        Conn& c = conns[key];
        const bool reused = c.fd >= 0;
        if (!reused) c.fd = tarn::bench::ConnectTcp(target.host, target.port);
        bool close = false;
        if (c.fd >= 0 && tarn::bench::WriteAll(c.fd, request)) {
          status = tarn::bench::ReadAnswer(c.fd, c.in, &body, &close);
        }
        if (status < 0 || close) drop(key);
        if (status >= 0 || !reused) break;
        ++t->reconnected;
      }
      if (status >= 0) break;
      if (attempt + 1 < attempts) ++t->retried;
    }
    if (status < 0) {
      ++t->no_answer;
      error("no answer from either replica");
      std::this_thread::sleep_for(10ms);  // a client backs off; not thousands a second
    } else if (status != 200) {
      ++t->non_200;
      error("HTTP " + std::to_string(status) + ": " + body.substr(0, 200));
    } else {
      ++t->requests;
      t->latencies_ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
  }
  for (auto& [key, c] : conns) ::close(c.fd);
}

}  // namespace

int main(int argc, char** argv) {
  std::string targets_path, path, body_path;
  int clients = 16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--targets") {
      targets_path = v;
    } else if (a == "--path") {
      path = v;
    } else if (a == "--body") {
      body_path = v;
    } else if (a == "--clients") {
      clients = std::atoi(v.c_str());
    } else {
      Usage("unknown flag " + a);
    }
  }
  if (targets_path.empty() || path.empty() || body_path.empty()) {
    Usage("--targets, --path and --body are required");
  }
  if (clients < 1 || clients > 1024) Usage("--clients: 1 to 1024");
  std::ifstream body_in(body_path);
  if (!body_in) Usage("cannot read --body " + body_path);
  std::stringstream body;
  body << body_in.rdbuf();
  const std::string request = "POST " + path +
                              " HTTP/1.1\r\nHost: replica\r\nContent-Type: application/json\r\n"
                              "Content-Length: " +
                              std::to_string(body.str().size()) + "\r\n\r\n" + body.str();

  ::signal(SIGTERM, OnSignal);
  ::signal(SIGINT, OnSignal);
  Targets targets(targets_path);
  targets.Reload();
  std::thread reload([&] {
    while (!g_stop) {
      std::this_thread::sleep_for(50ms);
      targets.Reload();
    }
  });
  const Clock::time_point start = Clock::now();
  std::vector<Tally> tallies(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < tallies.size(); ++i) {
    threads.emplace_back([&, i] { Client(targets, request, i, &tallies[i]); });
  }
  for (std::thread& t : threads) t.join();
  reload.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  Tally all;
  for (Tally& t : tallies) {
    all.requests += t.requests;
    all.non_200 += t.non_200;
    all.no_answer += t.no_answer;
    all.retried += t.retried;
    all.reconnected += t.reconnected;
    all.latencies_ms.insert(all.latencies_ms.end(), t.latencies_ms.begin(), t.latencies_ms.end());
    for (const std::string& e : t.first_errors) {
      if (all.first_errors.size() < 5) all.first_errors.push_back(e);
    }
  }
  for (const std::string& e : all.first_errors)
    std::fprintf(stderr, "upgrade_load: %s\n", e.c_str());
  std::sort(all.latencies_ms.begin(), all.latencies_ms.end());
  auto pct = [&all](double p) {
    if (all.latencies_ms.empty()) return 0.0;
    const size_t i =
        std::min(all.latencies_ms.size() - 1,
                 static_cast<size_t>(p * static_cast<double>(all.latencies_ms.size())));
    return all.latencies_ms[i];
  };
  std::printf(
      "{\"seconds\": %.2f, \"requests\": %ld, \"rps\": %.1f, \"latency_p50_ms\": %.3f, "
      "\"latency_p99_ms\": %.3f, \"latency_max_ms\": %.3f, \"errors\": %ld, \"non_200\": %ld, "
      "\"no_answer\": %ld, \"retried\": %ld, \"reconnected\": %ld}\n",
      seconds, all.requests, static_cast<double>(all.requests) / seconds, pct(0.50), pct(0.99),
      all.latencies_ms.empty() ? 0.0 : all.latencies_ms.back(), all.non_200 + all.no_answer,
      all.non_200, all.no_answer, all.retried, all.reconnected);
  return 0;
}
