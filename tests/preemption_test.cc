// Preemption through a real `tarn server` on a node with 4 fake GPUs: a priority-1 training
// gang (tarn-train, 1 ps + 2 workers with 2 GPUs each, periodic checkpoints off) holds every
// GPU; a priority-10 assembly asks for 2. In this order: the chief checkpoints at step N
// after SIGTERM, the ps stops after it, the urgent assembly becomes READY once a worker's two
// GPUs are free (worker-1 exits at once, so that may be before the chief); once it is
// destroyed the training is placed again, resumes at step N and finishes with its usual
// accuracy. Needs root (containers); release builds (the trainer under ASan is too slow to
// say anything about steps in time).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "server_process.h"
#include "tarn_process.h"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using tarn::testing::CallApi;
using tarn::testing::ReadAll;
using tarn::testing::Reply;
using tarn::testing::WaitFor;

class PreemptionE2eTest : public tarn::testing::ServerTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (containers)";
    StartServer(
        "preemption",
        {{"metrics", {{"scrape_interval_ms", 500}, {"scrape_timeout_ms", 400}}},
         {"queues",
          json::array(
              {{{"name", "default"}, {"capacity", 100}, {"max-application-priority", 10}}})},
         {"nodes",
          json::array({{{"name", "node-1"}, {"vcores", 16}, {"memory_mb", 16384}, {"gpus", 4}}})}});
  }
  void TearDown() override { StopServer({{"alice", "train"}, {"bob", "urgent"}}); }
  Reply Call(const std::string& method, const std::string& path, const std::string& user,
             const json& body = json()) {
    return CallApi(*server_, method, path, body, user);
  }
  json Instance(const std::string& user, const std::string& name, const std::string& instance) {
    Reply r = Call("GET", "/app/v1/services/" + name, user);
    for (const json& c : r.body.value("components", json::array())) {
      for (const json& i : c.value("containers", json::array())) {
        if (i.value("component_instance_name", "") == instance) return i;
      }
    }
    return json::object();
  }
  std::string State(const std::string& user, const std::string& name) {
    return Call("GET", "/app/v1/services/" + name, user).body.value("state", "");
  }
  // Every log of an instance's runs, oldest first.
  std::string Logs(const std::string& instance, const std::string& stream) {
    std::string text;
    const std::string dir = dir_ + "/state/shims/alice/train/" + instance;
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
      if (f.path().filename().string().rfind(stream, 0) == 0) files.push_back(f.path());
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) text += ReadAll(f);
    return text;
  }
  // The time (ms) of the first event of `type` of `instance` ("" for the assembly's own) at
  // or after `after`; 0 when there is none.
  int64_t EventAt(const std::string& user, const std::string& name, const std::string& instance,
                  const std::string& type, int64_t after = 0) {
    Reply r = Call("GET", "/tarn/v1/services/" + name + "/events", user);
    for (const json& e : r.body) {
      if (e.value("type", "") == type && e.value("instance", "") == instance &&
          e.value("time", int64_t{0}) >= after) {
        return e.value("time", int64_t{0});
      }
    }
    return 0;
  }
};

TEST_F(PreemptionE2eTest, UrgentWorkTakesTheGpusAndTheTrainingResumesAtItsCheckpoint) {
  const std::string train =
      "exec tarn-train --model mlp --epochs 4 --threads 1 --log_every_secs 1"
      " --checkpoint_dir $TARN_SHARED_DIR/checkpoints --checkpoint_every_secs 0"
      " --export_every_secs 0";
  auto role = [](const std::string& r) {
    return json{{"properties", {{"tarn.tf.role", r}, {"tarn.ports", "grpc:2222,metrics:9100"}}}};
  };
  json gang = {
      {"name", "train"},
      {"version", "1"},
      {"configuration",
       {{"env", {{"OPENBLAS_NUM_THREADS", "1"}}}, {"properties", {{"tarn.priority", "1"}}}}},
      {"components",
       json::array(
           {{{"name", "ps"},
             {"number_of_containers", 1},
             {"launch_command", train},
             {"resource", {{"cpus", 1}, {"memory", "1Gi"}}},
             {"configuration", role("ps")},
             {"readiness_check", {{"type", "PORT"}, {"properties", {{"port", "2222"}}}}}},
            {{"name", "worker"},
             {"number_of_containers", 2},
             {"dependencies", json::array({"ps"})},
             {"restart_policy", "ON_FAILURE"},
             {"launch_command", train + " --metrics_port 9100"},
             {"resource",
              {{"cpus", 1}, {"memory", "1Gi"}, {"additional", {{"yarn.io/gpu", {{"value", 2}}}}}}},
             {"configuration", role("worker")}}})}};
  ASSERT_EQ(Call("POST", "/app/v1/services", "alice", gang).status, 202);
  ASSERT_TRUE(
      WaitFor("the chief to train", 60s,
              [&] { return Logs("worker-0", "stdout").find("\"step\"") != std::string::npos; }))
      << Logs("worker-0", "stdout") << Logs("worker-0", "stderr");

  json urgent = {
      {"name", "urgent"},
      {"version", "1"},
      {"configuration", {{"properties", {{"tarn.priority", "10"}}}}},
      {"components", json::array({{{"name", "job"},
                                   {"number_of_containers", 1},
                                   {"launch_command", "sleep 1000"},
                                   {"resource",
                                    {{"cpus", 1},
                                     {"memory", "64"},
                                     {"additional", {{"yarn.io/gpu", {{"value", 2}}}}}}}}})}};
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_EQ(Call("POST", "/app/v1/services", "bob", urgent).status, 202);
  ASSERT_TRUE(
      WaitFor("the urgent assembly to be READY", 60s,
              [&] { return Instance("bob", "urgent", "job-0").value("state", "") == "READY"; }))
      << Call("GET", "/app/v1/services/urgent", "bob").text
      << Call("GET", "/tarn/v1/services/train/events", "alice").text;
  const double to_ready =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();

  // The chief checkpointed on SIGTERM and said where: the step the gang resumes from.
  const std::string stderr_text = Logs("worker-0", "stderr");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(stderr_text, m,
                                std::regex("stopped by SIGTERM: checkpoint at step ([0-9]+)")))
      << stderr_text << Logs("worker-0", "stdout");
  const std::string step = m[1];
  // The ps stops once the chief has exited (it holds no GPU: the urgent job need not wait).
  json ps;
  ASSERT_TRUE(WaitFor("the ps to stop", 60s, [&] {
    ps = Instance("alice", "train", "ps-0");
    return ps.value("state", "") == "PENDING";
  })) << ps.dump();
  EXPECT_EQ(
      ps.value("diagnostics", ""),
      "preempted by bob/urgent (priority 10); resumes from step " + step + " when there is room")
      << ps.dump();
  EXPECT_EQ(ps.value("restarts", -1), 0) << "a stop is not a restart";
  // In this order: the chief checkpointed and exited; then the ps was stopped. The urgent
  // job ran once two GPUs were free: after the first worker stopped (worker-1 has no
  // checkpoint to write, so it is often before the chief).
  const int64_t chief_stopped = EventAt("alice", "train", "worker-0", "STOPPED");
  const int64_t other_stopped = EventAt("alice", "train", "worker-1", "STOPPED");
  const int64_t ps_stop = EventAt("alice", "train", "ps-0", "STOP", chief_stopped);
  const int64_t ps_stopped = EventAt("alice", "train", "ps-0", "STOPPED");
  const int64_t urgent_ready = EventAt("bob", "urgent", "job-0", "READY");
  ASSERT_GT(chief_stopped, 0);
  EXPECT_GE(ps_stop, chief_stopped) << Call("GET", "/tarn/v1/services/train/events", "alice").text;
  EXPECT_GE(ps_stopped, chief_stopped);
  ASSERT_GT(other_stopped, 0);
  EXPECT_GE(urgent_ready, std::min(chief_stopped, other_stopped));
  EXPECT_GT(EventAt("alice", "train", "", "PREEMPTED"), 0);
  EXPECT_GT(EventAt("bob", "urgent", "", "PREEMPTING"), 0);
  const std::string chief_out = Logs("worker-0", "stdout");
  EXPECT_NE(chief_out.find("checkpoint of step " + step), std::string::npos) << chief_out;

  // The server counts it.
  httplib::Client c("127.0.0.1", server_->port());
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("\ntarn_preemptions_total 1\n"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("\ntarn_preempted_instances_total 3\n"), std::string::npos);

  // The urgent work goes; the training is placed again as a whole and resumes at step N.
  ASSERT_EQ(Call("DELETE", "/app/v1/services/urgent", "bob").status, 200);
  std::string worker_state;
  ASSERT_TRUE(WaitFor("the training to finish", 180s, [&] {
    Reply r = Call("GET", "/app/v1/services/train", "alice");
    for (const json& comp : r.body.value("components", json::array())) {
      if (comp.value("name", "") == "worker") worker_state = comp.value("state", "");
    }
    return worker_state == "SUCCEEDED" || worker_state == "FAILED";
  }));
  const std::string resumed = Logs("worker-0", "stdout");
  ASSERT_EQ(worker_state, "SUCCEEDED") << resumed << Logs("worker-0", "stderr");
  EXPECT_NE(resumed.find("resuming from the checkpoint of step " + step), std::string::npos)
      << resumed;
  // Its usual accuracy: the mlp reaches about 0.85 after 4 epochs of Fashion-MNIST.
  std::smatch acc;
  std::string::const_iterator from = resumed.cbegin();
  double last = 0;
  while (std::regex_search(from, resumed.cend(), acc, std::regex("test accuracy ([0-9.]+)"))) {
    last = std::stod(acc[1]);
    from = acc.suffix().first;
  }
  EXPECT_GE(last, 0.80) << resumed;
  RecordProperty("urgent_to_ready_s", std::to_string(to_ready));
  std::cout << "urgent request to READY: " << to_ready << " s; resumed at step " << step
            << "; final accuracy " << last << std::endl;
}

}  // namespace
