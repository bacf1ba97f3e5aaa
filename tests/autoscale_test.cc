// Serving autoscaling through a real `tarn server`, real tarn-serve replicas and real HTTP
// clients (docs/autoscaling.md). A model trained for a few steps by tarn-train is served by an
// assembly that autoscales from 1 to 3 replicas on the requests each has in flight. Client
// threads load it: tarn scales it to 3 and the load reaches the new replicas; then a light
// load goes on while tarn takes it back to 1, one replica at a time, each draining. Every
// request is answered: a client that finds a replica gone (its address list is a quarter of a
// second old) tries the next one, as a load balancer would, and the test says how often.
// Needs root (containers); release builds.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"
#include "tarn_process.h"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using tarn::testing::AddressList;
using tarn::testing::CallApi;
using tarn::testing::Reply;
using tarn::testing::WaitFor;

// What the clients saw.
struct Tally {
  std::atomic<int64_t> answered{0};  // 200 with predictions
  std::atomic<int64_t> failed{0};    // an HTTP error, or no replica answered
  std::atomic<int64_t> retried{0};   // a replica gone before the list said so: tried the next
  std::mutex mu;
  std::map<std::string, int64_t> by_replica;  // answered, by replica address
};

class AutoscaleE2eTest : public tarn::testing::ServerTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (containers)";
    StartServer(
        "autoscale",
        {{"metrics", {{"scrape_interval_ms", 500}, {"scrape_timeout_ms", 400}}},
         {"nodes", json::array({{{"name", "node-1"}, {"vcores", 8}, {"memory_mb", 8192}}})}});
  }
  void TearDown() override { StopServer({{"alice", "web"}}); }
  Reply Call(const std::string& method, const std::string& path, const json& body = json()) {
    return CallApi(*server_, method, path, body, "alice");
  }
  // The serving component's instances: their states, and the READY ones' addresses.
  std::vector<std::string> Ready(int* instances = nullptr) {
    std::vector<std::string> ips;
    int n = 0;
    Reply r = Call("GET", "/app/v1/services/web");
    for (const json& c : r.body.value("components", json::array())) {
      for (const json& i : c.value("containers", json::array())) {
        ++n;
        if (i.value("state", "") == "READY" && !i.value("ip", "").empty()) {
          ips.push_back(i.value("ip", ""));
        }
      }
    }
    if (instances) *instances = n;
    return ips;
  }
  // The AUTOSCALE events' "from -> to", oldest first, and their messages.
  std::vector<std::pair<int, int>> Scalings(std::string* text) {
    std::vector<std::pair<int, int>> out;
    Reply r = Call("GET", "/tarn/v1/services/web/events");
    const json events = r.body;
    for (const json& e : events) {
      if (e.value("type", "") != "AUTOSCALE") continue;
      const std::string message = e.value("message", "");
      *text += message + "\n";
      std::smatch m;
      if (std::regex_search(message, m, std::regex("; ([0-9]+) -> ([0-9]+)$"))) {
        out.emplace_back(std::stoi(m[1]), std::stoi(m[2]));
      }
    }
    return out;
  }
};

// One client: requests back to back (or `pause` apart), round robin over the addresses,
// until `stop`.
void Client(const AddressList& addresses, const std::string& body, std::chrono::milliseconds pause,
            const std::atomic<bool>& stop, Tally& tally) {
  std::map<std::string, std::unique_ptr<httplib::Client>> clients;
  size_t next = 0;
  while (!stop) {
    const std::vector<std::string> ips = addresses.Get();
    if (ips.empty()) {
      std::this_thread::sleep_for(10ms);
      continue;
    }
    bool done = false;
    for (size_t attempt = 0; attempt < ips.size() && !done; ++attempt) {
      const std::string& ip = ips[next++ % ips.size()];
      auto& client = clients[ip];
      if (!client) {
        client = std::make_unique<httplib::Client>(ip, 8501);
        client->set_keep_alive(true);
        client->set_tcp_nodelay(true);  // else each request waits out a delayed ACK
        client->set_connection_timeout(2, 0);
        client->set_read_timeout(10, 0);
      }
      auto r = client->Post("/v1/models/fmnist:predict", body, "application/json");
      if (!r) {  // no answer at all: the replica is gone; the next one
        ++tally.retried;
        clients.erase(ip);
        continue;
      }
      done = true;
      if (r->status == 200 && r->body.find("\"predictions\"") != std::string::npos) {
        ++tally.answered;
        std::lock_guard<std::mutex> lock(tally.mu);
        ++tally.by_replica[ip];
      } else {
        ++tally.failed;
        std::cerr << "HTTP " << r->status << " from " << ip << ": " << r->body << "\n";
      }
    }
    if (!done) ++tally.failed;
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
}

TEST_F(AutoscaleE2eTest, LoadScalesTheServersUpToMaxAndItsEndTakesThemBackOneAtATime) {
  // A model: 20 steps of tarn-train, exported where every account can read it.
  const std::string models = dir_ + "/models";
  std::filesystem::create_directories(models);
  ::chmod(models.c_str(), 0755);
  const std::string train =
      std::string(TARN_TRAIN_BINARY) + " --model mlp --max_steps 20 --threads 1 --export_base " +
      models + " --checkpoint_dir " + dir_ + "/checkpoints > " + dir_ + "/train.log 2>&1";
  ASSERT_EQ(std::system(train.c_str()), 0) << tarn::testing::ReadAll(dir_ + "/train.log");
  ASSERT_TRUE(std::filesystem::exists(models + "/fmnist/1/model.pt"))
      << tarn::testing::ReadAll(dir_ + "/train.log");

  json web = {
      {"name", "web"},
      {"version", "1"},
      {"configuration", {{"env", {{"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"}}}}},
      {"components",
       json::array(
           {{{"name", "serving"},
             {"number_of_containers", 1},
             {"launch_command",
              "exec tarn-serve --rest_api_port $TARN_PORT_HTTP "
              "--model_name fmnist --model_base_path " +
                  models + "/fmnist"},
             {"resource", {{"cpus", 1}, {"memory", "512Mi"}}},
             {"restart_policy", "ALWAYS"},
             {"configuration",
              {{"properties",
                {{"tarn.ports", "http:8501"},
                 {"tarn.ports.public", "http"},
                 {"tarn.autoscale.max", "3"},
                 {"tarn.autoscale.target_in_flight", "0.2"},
                 {"tarn.autoscale.stable_window_secs", "6"},
                 {"tarn.autoscale.panic_window_secs", "2"},
                 {"tarn.autoscale.scale_down_delay_secs", "4"}}}}},
             {"readiness_check",
              {{"type", "HTTP"},
               {"properties", {{"url", "http://${THIS_HOST}:8501/v1/models/fmnist"}}}}}}})}};
  Reply launched = Call("POST", "/app/v1/services", web);
  ASSERT_EQ(launched.status, 202) << launched.text;
  ASSERT_TRUE(WaitFor("the first replica to be READY", 60s, [&] { return Ready().size() == 1; }))
      << Call("GET", "/app/v1/services/web").text;

  json rows = json::array();
  for (int r = 0; r < 28; ++r) rows.push_back(std::vector<float>(28, 0.5f));
  // 16 images a request: the replica's own time, what in flight counts, dominates.
  const std::string body = json{{"instances", std::vector<json>(16, json::array({rows}))}}.dump();

  AddressList addresses;
  addresses.Set(Ready());
  std::atomic<bool> stop_refresh{false}, stop_heavy{false}, stop_light{false};
  std::thread refresh([&] {
    while (!stop_refresh) {
      addresses.Set(Ready());
      std::this_thread::sleep_for(250ms);
    }
  });
  Tally heavy, light;
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c) {
    clients.emplace_back([&] { Client(addresses, body, 0ms, stop_heavy, heavy); });
  }
  clients.emplace_back([&] { Client(addresses, body, 100ms, stop_light, light); });
  auto stop_all = [&] {
    stop_heavy = stop_light = stop_refresh = true;
    for (std::thread& t : clients) t.join();
    refresh.join();
  };

  // Up: three closed-loop clients keep about 1 to 3 requests in flight, against 0.2 wanted
  // per replica.
  const auto loaded = std::chrono::steady_clock::now();
  const bool up = WaitFor("3 READY replicas", 90s, [&] { return Ready().size() == 3; });
  const double to_three =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - loaded).count();
  if (up) std::this_thread::sleep_for(3s);  // the load spreads over the three
  stop_heavy = true;
  std::string text;
  if (!up) {
    stop_all();
    std::string replica_metrics;
    if (auto m = httplib::Client(Ready().at(0), 8501).Get("/metrics")) replica_metrics = m->body;
    FAIL() << "not scaled to 3: " << Scalings(&text).size() << " AUTOSCALE events; "
           << heavy.answered << " answered, " << heavy.failed << " failed, " << heavy.retried
           << " retried\n"
           << text << Call("GET", "/app/v1/services/web").text << "\n"
           << replica_metrics;
  }

  // Down: the light client alone (10 requests a second) wants one replica.
  const auto unloaded = std::chrono::steady_clock::now();
  int instances = 0;
  const bool down =
      WaitFor("1 replica", 90s, [&] { return Ready(&instances).size() == 1 && instances == 1; });
  const double to_one =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - unloaded).count();
  stop_all();
  const std::vector<std::pair<int, int>> scalings = Scalings(&text);
  ASSERT_TRUE(down) << text << Call("GET", "/app/v1/services/web").text;

  std::cout << "to 3 replicas in " << to_three << " s of load; back to 1 in " << to_one
            << " s after it; " << heavy.answered + light.answered << " requests answered, "
            << heavy.failed + light.failed << " failed, " << heavy.retried + light.retried
            << " tried on the next replica\n"
            << text;
  EXPECT_EQ(heavy.failed, 0);
  EXPECT_EQ(light.failed, 0);
  EXPECT_GT(light.answered, 0);
  // Every replica the load brought answered some of it.
  EXPECT_EQ(heavy.by_replica.size(), 3u);
  for (const auto& [ip, n] : heavy.by_replica) EXPECT_GT(n, 0) << ip;

  // The events, in order: up (in one or more steps) to 3, never down while loaded; then
  // 3 -> 2 and 2 -> 1, one at a time.
  ASSERT_GE(scalings.size(), 3u) << text;
  size_t i = 0;
  int count = 1;
  for (; i < scalings.size() && scalings[i].second > scalings[i].first; ++i) {
    EXPECT_EQ(scalings[i].first, count) << text;
    count = scalings[i].second;
  }
  EXPECT_EQ(count, 3) << text;
  ASSERT_EQ(scalings.size() - i, 2u) << text;
  EXPECT_EQ(scalings[i], std::make_pair(3, 2)) << text;
  EXPECT_EQ(scalings[i + 1], std::make_pair(2, 1)) << text;
  EXPECT_NE(text.find("in flight"), std::string::npos) << text;
}

}  // namespace
