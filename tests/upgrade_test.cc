// A rolling upgrade through a real `tarn server`, real tarn-serve replicas and real HTTP
// clients (docs/upgrades.md). A model trained for a few steps by tarn-train is served by two
// replicas; four clients ask them without pause while YARN's calls upgrade the serving
// component to a new spec version (PUT the service with UPGRADING_AUTO_FINALIZE, then its
// component with UPGRADING): one replica at a time is stopped with its grace period (tarn-serve
// drains), started again under its name with the new spec, and the other waits for its
// readiness. The clients route on the instances' `ready` (refreshed every quarter of a second,
// so a list can name a replica already gone) and retry once on the other replica when one
// gives no answer, as the demo's client and a load balancer do. No request may fail.
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
#include <set>
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

struct Outcome {
  std::atomic<int64_t> answered{0};
  std::atomic<int64_t> answered_upgrading{0};  // while the upgrade was under way
  std::atomic<int64_t> failed{0};              // an HTTP error, or neither replica answered
  std::atomic<int64_t> retried{0};             // no answer from one: asked the other
};

class UpgradeE2eTest : public tarn::testing::ServerTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (containers)";
    StartServer(
        "upgrade",
        {{"nodes", json::array({{{"name", "node-1"}, {"vcores", 8}, {"memory_mb", 8192}}})}});
  }
  void TearDown() override { StopServer({{"alice", "web"}}); }
  Reply Call(const std::string& method, const std::string& path, const json& body = json()) {
    return CallApi(*server_, method, path, body, "alice");
  }
  // The serving instances, by name.
  std::map<std::string, json> Instances() {
    std::map<std::string, json> out;
    Reply r = Call("GET", "/app/v1/services/web");
    for (const json& c : r.body.value("components", json::array())) {
      for (const json& i : c.value("containers", json::array())) {
        out[i.value("component_instance_name", "")] = i;
      }
    }
    return out;
  }
  std::vector<std::string> ReadyIps() {
    std::vector<std::string> ips;
    for (const auto& [name, i] : Instances()) {
      if (i.value("ready", false) && !i.value("ip", "").empty()) ips.push_back(i["ip"]);
    }
    return ips;
  }
  // The serving spec at `version`; `mark` goes into the replicas' environment.
  json Web(const std::string& version, const std::string& models) {
    return {{"name", "web"},
            {"version", version},
            {"configuration",
             {{"env",
               {{"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"}, {"WEB_SPEC", version}}}}},
            {"components",
             json::array(
                 {{{"name", "serving"},
                   {"number_of_containers", 2},
                   {"launch_command",
                    "exec tarn-serve --rest_api_port $TARN_PORT_HTTP "
                    "--model_name fmnist --model_base_path " +
                        models + "/fmnist"},
                   {"resource", {{"cpus", 1}, {"memory", "512Mi"}}},
                   {"restart_policy", "ALWAYS"},
                   {"configuration",
                    {{"properties",
                      {{"tarn.ports", "http:8501"},
                       {"tarn.upgrade.deregistration_delay_ms", "1000"}}}}},
                   {"readiness_check",
                    {{"type", "HTTP"},
                     {"properties", {{"url", "http://${THIS_HOST}:8501/v1/models/fmnist"}}}}}}})}};
  }
};

// One client: requests back to back, alternating between the ready replicas; a request that
// gets no answer at all (refused, reset, closed) is asked once of the other replica.
void Client(const AddressList& ready, const std::string& body, const std::atomic<bool>& upgrading,
            const std::atomic<bool>& stop, Outcome& out) {
  std::map<std::string, std::unique_ptr<httplib::Client>> clients;
  size_t turn = 0;
  while (!stop) {
    const std::vector<std::string> ips = ready.Get();
    if (ips.empty()) {
      std::this_thread::sleep_for(10ms);
      continue;
    }
    ++turn;
    bool answered = false;
    for (size_t attempt = 0; attempt < std::min<size_t>(2, ips.size()) && !answered; ++attempt) {
      const std::string& ip = ips[(turn + attempt) % ips.size()];
      auto& client = clients[ip];
      if (!client) {
        client = std::make_unique<httplib::Client>(ip, 8501);
        client->set_keep_alive(true);
        client->set_tcp_nodelay(true);
        client->set_connection_timeout(2, 0);
        client->set_read_timeout(10, 0);
      }
      auto r = client->Post("/v1/models/fmnist:predict", body, "application/json");
      if (!r) {
        ++out.retried;
        clients.erase(ip);
        continue;
      }
      answered = true;
      if (r->status == 200 && r->body.find("\"predictions\"") != std::string::npos) {
        ++out.answered;
        if (upgrading) ++out.answered_upgrading;
      } else {
        ++out.failed;
        std::cerr << "HTTP " << r->status << " from " << ip << ": " << r->body << "\n";
      }
    }
    if (!answered) {
      ++out.failed;
      std::cerr << "no answer from either replica\n";
    }
  }
}

TEST_F(UpgradeE2eTest, RollingUpgradeOfTwoReplicasUnderFourClientsFailsNoRequest) {
  const std::string models = dir_ + "/models";
  std::filesystem::create_directories(models);
  ::chmod(models.c_str(), 0755);
  const std::string train =
      std::string(TARN_TRAIN_BINARY) + " --model mlp --max_steps 20 --threads 1 --export_base " +
      models + " --checkpoint_dir " + dir_ + "/checkpoints > " + dir_ + "/train.log 2>&1";
  ASSERT_EQ(std::system(train.c_str()), 0) << tarn::testing::ReadAll(dir_ + "/train.log");

  Reply launched = Call("POST", "/app/v1/services", Web("1", models));
  ASSERT_EQ(launched.status, 202) << launched.text;
  ASSERT_TRUE(WaitFor("2 READY replicas", 60s, [&] { return ReadyIps().size() == 2; }))
      << Call("GET", "/app/v1/services/web").text;
  std::map<std::string, std::string> first_ids;
  for (const auto& [name, i] : Instances()) first_ids[name] = i.value("id", "");

  // Refusals before anything starts: the same version, finalize with nothing to finalize.
  json same = Web("1", models);
  same["state"] = "UPGRADING";
  Reply r = Call("PUT", "/app/v1/services/web", same);
  EXPECT_EQ(r.status, 400) << r.text;
  r = Call("PUT", "/app/v1/services/web", json{{"state", "STABLE"}});
  EXPECT_EQ(r.status, 409) << r.text;
  r = Call("PUT", "/app/v1/services/web/component-instances",
           json::array({{{"component_instance_name", "serving-0"}, {"state", "UPGRADING"}}}));
  EXPECT_EQ(r.status, 409) << "no upgrade to take part in: " << r.text;

  json rows = json::array();
  for (int k = 0; k < 28; ++k) rows.push_back(std::vector<float>(28, 0.5f));
  const std::string body = json{{"instances", json::array({json::array({rows})})}}.dump();
  AddressList ready;
  ready.Set(ReadyIps());
  std::atomic<bool> stop{false}, stop_refresh{false}, upgrading{false};
  std::thread refresh([&] {
    while (!stop_refresh) {
      ready.Set(ReadyIps());
      std::this_thread::sleep_for(250ms);
    }
  });
  Outcome out;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] { Client(ready, body, upgrading, stop, out); });
  }
  auto stop_all = [&] {
    stop = stop_refresh = true;
    for (std::thread& t : clients) t.join();
    refresh.join();
  };
  std::this_thread::sleep_for(1s);
  const int64_t before = out.answered;

  // Initiate (auto-finalize), then ask for the whole component, as `tarn upgrade web FILE
  // --auto-finalize` and `tarn upgrade web --components serving` do.
  json next = Web("2", models);
  next["state"] = "UPGRADING_AUTO_FINALIZE";
  upgrading = true;
  const auto started = std::chrono::steady_clock::now();
  r = Call("PUT", "/app/v1/services/web", next);
  ASSERT_EQ(r.status, 202) << r.text;
  EXPECT_EQ(Call("GET", "/app/v1/services/web").body.value("upgrade_version", ""), "2");
  r = Call("PUT", "/app/v1/services/web/components/serving/component-instances/serving-7",
           json{{"state", "UPGRADING"}});
  EXPECT_EQ(r.status, 404) << r.text;
  r = Call("PUT", "/app/v1/services/web/components",
           json::array({{{"name", "serving"}, {"state", "UPGRADING"}}}));
  ASSERT_EQ(r.status, 202) << r.text;

  const bool done = WaitFor("the upgrade to version 2 to finish", 120s, [&] {
    Reply s = Call("GET", "/app/v1/services/web");
    if (s.body.value("state", "") != "STABLE" || s.body.value("version", "") != "2") return false;
    for (const auto& [name, i] : Instances()) {
      if (i.value("version", "") != "2" || !i.value("ready", false)) return false;
    }
    return true;
  });
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  upgrading = false;
  std::this_thread::sleep_for(1s);  // both new replicas take load
  stop_all();
  Reply events = Call("GET", "/tarn/v1/services/web/events");
  ASSERT_TRUE(done) << Call("GET", "/app/v1/services/web").text << events.text;

  std::cout << "upgraded 2 replicas in " << took << " s; " << out.answered << " requests answered ("
            << out.answered_upgrading << " during the upgrade), " << out.failed << " failed, "
            << out.retried << " asked of the other replica\n";
  EXPECT_EQ(out.failed, 0);
  EXPECT_GT(before, 0);
  EXPECT_GT(out.answered_upgrading, 0);
  EXPECT_GT(out.answered, out.answered_upgrading + before) << "the new replicas answer";

  // Both replicas restarted under their names, running the new spec.
  const std::map<std::string, json> now = Instances();
  ASSERT_EQ(now.size(), 2u);
  for (const auto& [name, i] : now) {
    EXPECT_NE(i.value("id", ""), first_ids[name]) << name << " was started again";
    EXPECT_EQ(i.value("state", ""), "READY") << name;
  }
  int new_spec = 0;
  for (const auto& p : tarn::testing::WorkloadProcesses("tarn-serve")) {
    if (p.env.count("TARN_IP") == 0 || p.env.count("WEB_SPEC") == 0) continue;
    if (p.env.at("TARN_IP") != now.at("serving-0").value("ip", "") &&
        p.env.at("TARN_IP") != now.at("serving-1").value("ip", "")) {
      continue;  // another test's
    }
    EXPECT_EQ(p.env.at("WEB_SPEC"), "2") << "pid " << p.pid;
    ++new_spec;
  }
  EXPECT_EQ(new_spec, 2);

  // One at a time: each instance UPGRADING then UPGRADED before the next begins, then
  // the automatic finalize.
  std::vector<std::string> order;
  for (const json& e : events.body) {
    const std::string type = e.value("type", "");
    if (type == "UPGRADING" || type == "UPGRADED") {
      order.push_back(type + " " + e.value("instance", ""));
    } else if (type == "UPGRADE_FINALIZED" || type == "UPGRADE_FAILED") {
      order.push_back(type);
    }
  }
  ASSERT_EQ(order.size(), 5u) << events.text;
  const std::string a = order[0].substr(order[0].find(' ') + 1);
  const std::string b = a == "serving-0" ? "serving-1" : "serving-0";
  EXPECT_EQ(order, (std::vector<std::string>{"UPGRADING " + a, "UPGRADED " + a, "UPGRADING " + b,
                                             "UPGRADED " + b, "UPGRADE_FINALIZED"}))
      << events.text;
}

}  // namespace
