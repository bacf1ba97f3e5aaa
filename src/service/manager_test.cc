#include <gtest/gtest.h>

#include "service/manager_test_fixture.h"

namespace tarn::service::testing_manager {
namespace {

TEST_F(ManagerTest, LaunchRespectsDependencyOrderAndBecomesStable) {
  ASSERT_TRUE(Launch(Training()).ok());
  EXPECT_EQ(backend_.launches,
            (std::vector<std::string>{"alice/fmnist/ps-0", "alice/fmnist/ps-1"}));
  EXPECT_EQ(State("fmnist"), "STARTED");
  EXPECT_EQ(Instance("fmnist", "worker-0").state, "PENDING");
  EXPECT_EQ(Instance("fmnist", "worker-0").diagnostics, "waiting for ps to be READY");
  Started("alice/fmnist/ps-0");
  EXPECT_EQ(backend_.launches.size(), 2u) << "workers wait for every ps";
  Started("alice/fmnist/ps-1");
  EXPECT_EQ(backend_.launches.size(), 4u);
  EXPECT_EQ(Instance("fmnist", "ps-1").state, "READY");
  Started("alice/fmnist/worker-0");
  Started("alice/fmnist/worker-1");
  EXPECT_EQ(State("fmnist"), "STABLE");
  auto w = Instance("fmnist", "worker-1");
  EXPECT_EQ(w.hostname, "worker-1.fmnist.alice.tarn");
  EXPECT_EQ(w.ip.rfind("127.42.0.", 0), 0u) << w.ip;
  EXPECT_EQ(w.node, "node-a");
  EXPECT_EQ(w.container_id, "alice_fmnist_worker-1_1");
}

TEST_F(ManagerTest, ReadinessProbesGateDependents) {
  json j = Training();
  j["components"][0]["readiness_check"] = {{"type", "PORT"}, {"properties", {{"port", "2222"}}}};
  ASSERT_TRUE(Launch(j).ok());
  Started("alice/fmnist/ps-0");
  Started("alice/fmnist/ps-1");
  EXPECT_EQ(Instance("fmnist", "ps-0").state, "RUNNING_BUT_UNREADY");
  EXPECT_EQ(backend_.probes.size(), 2u);
  Probed("alice/fmnist/ps-0", true);
  Probed("alice/fmnist/ps-1", false);
  EXPECT_EQ(Instance("fmnist", "ps-1").diagnostics, "readiness check: connection refused");
  EXPECT_EQ(backend_.launches.size(), 2u);
  // The next probe comes after the probe interval, not before.
  Advance(milliseconds(500));
  EXPECT_EQ(backend_.probes.size(), 2u);
  Advance(milliseconds(600));
  EXPECT_EQ(backend_.probes.size(), 4u);
  Probed("alice/fmnist/ps-1", true);
  EXPECT_EQ(Instance("fmnist", "ps-1").state, "READY");
  EXPECT_EQ(backend_.launches.size(), 4u);
}

TEST_F(ManagerTest, CrashingInstanceBacksOffThenFailsTheAssemblyAtTheThreshold) {
  json j = json::parse(R"({"version": "1", "name": "crash", "components": [{"name": "bad",
      "number_of_containers": 1, "launch_command": "exit 3",
      "resource": {"cpus": 1, "memory": "64"},
      "configuration": {"properties": {
        "yarn.service.container-failure-per-component.threshold": "4"}}}]})");
  ASSERT_TRUE(Launch(j).ok());
  const std::string key = "alice/crash/bad-0";
  std::vector<Clock::Duration> delays = {seconds(1), seconds(2), seconds(4)};
  for (size_t k = 0; k < delays.size(); ++k) {
    Started(key);
    Exited(key, 3);
    auto i = Instance("crash", "bad-0");
    EXPECT_EQ(i.state, "PENDING");
    EXPECT_EQ(i.last_exit, "exited with code 3");
    EXPECT_EQ(i.restarts, static_cast<int64_t>(k + 1));
    size_t before = backend_.launches.size();
    Advance(delays[k] - milliseconds(10));
    EXPECT_EQ(backend_.launches.size(), before) << "restarted before its backoff, k=" << k;
    Advance(milliseconds(10));
    EXPECT_EQ(backend_.launches.size(), before + 1) << "not restarted after its backoff";
  }
  EXPECT_EQ(backend_.container_of[key], "alice_crash_bad-0_4");
  Started(key);
  Exited(key, 3);
  EXPECT_EQ(State("crash"), "FAILED");
  auto s = manager_->Get("alice", "crash");
  EXPECT_NE(s->diagnostics.find("bad"), std::string::npos) << s->diagnostics;
  EXPECT_EQ(s->components[0].state, "FAILED");
  EXPECT_EQ(Instance("crash", "bad-0").state, "FAILED");
  EXPECT_EQ(backend_.placed(), 0u) << "a failed instance gives its resources back";
  Advance(seconds(600));
  EXPECT_EQ(backend_.launches.size(), 4u);
}

TEST_F(ManagerTest, RetryMaxAndFixedInterval) {
  json j = json::parse(R"({"version": "1", "name": "r", "components": [{"name": "c",
      "number_of_containers": 1, "launch_command": "exit 1", "restart_policy": "ON_FAILURE",
      "resource": {"cpus": 1, "memory": "64"},
      "configuration": {"properties": {
        "yarn.service.container-failure.retry.max": "2",
        "yarn.service.container-failure.retry-interval-ms": "3000"}}}]})");
  ASSERT_TRUE(Launch(j).ok());
  const std::string key = "alice/r/c-0";
  for (int k = 0; k < 2; ++k) {
    Started(key);
    Exited(key, 1);
    Advance(milliseconds(2999));
    EXPECT_EQ(backend_.launches.size(), static_cast<size_t>(k + 1));
    Advance(milliseconds(1));
    EXPECT_EQ(backend_.launches.size(), static_cast<size_t>(k + 2));
  }
  Started(key);
  Exited(key, 1);
  EXPECT_EQ(Instance("r", "c-0").state, "FAILED");
  EXPECT_EQ(State("r"), "FAILED");
}

TEST_F(ManagerTest, AllExitingZeroUnderNeverOrOnFailureSucceeds) {
  json j = json::parse(R"({"version": "1", "name": "job", "components": [
      {"name": "a", "number_of_containers": 2, "launch_command": "true",
       "restart_policy": "NEVER", "resource": {"cpus": 1, "memory": "64"}},
      {"name": "b", "number_of_containers": 1, "launch_command": "true",
       "restart_policy": "ON_FAILURE", "resource": {"cpus": 1, "memory": "64"}}]})");
  ASSERT_TRUE(Launch(j).ok());
  for (const char* k : {"alice/job/a-0", "alice/job/a-1", "alice/job/b-0"}) Started(k);
  Exited("alice/job/a-0", 0);
  Exited("alice/job/a-1", 0);
  EXPECT_EQ(State("job"), "STABLE");
  Exited("alice/job/b-0", 0);
  EXPECT_EQ(State("job"), "SUCCEEDED");
  EXPECT_EQ(backend_.placed(), 0u);
}

TEST_F(ManagerTest, FlexDownRemovesHighestAndUpFillsLowestFreeIndex) {
  json j = json::parse(R"({"version": "1", "name": "s", "components": [{"name": "w",
      "number_of_containers": 3, "launch_command": "sleep 9",
      "resource": {"cpus": 1, "memory": "64"}}]})");
  ASSERT_TRUE(Launch(j).ok());
  for (int k = 0; k < 3; ++k) Started("alice/s/w-" + std::to_string(k));
  EXPECT_EQ(State("s"), "STABLE");
  auto before = manager_->Flex("alice", "s", "w", 1);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(*before, 3);
  EXPECT_EQ(backend_.stops, (std::vector<std::string>{"alice/s/w-1", "alice/s/w-2"}));
  EXPECT_EQ(State("s"), "FLEX");
  Exited("alice/s/w-2", 143);
  Exited("alice/s/w-1", 143);
  EXPECT_EQ(State("s"), "STABLE");
  EXPECT_EQ(manager_->Get("alice", "s")->components[0].instances.size(), 1u);
  EXPECT_EQ(backend_.cleanups.size(), 2u);
  ASSERT_TRUE(manager_->Flex("alice", "s", "w", 2).ok());
  EXPECT_EQ(backend_.launches.back(), "alice/s/w-1");
  // The flex is in the stored spec.
  auto rec = store_->GetAssembly("alice", "s");
  EXPECT_EQ(json::parse(rec->spec_json)["components"][0]["number_of_containers"], 2);
  EXPECT_EQ(manager_->Flex("alice", "s", "nope", 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(manager_->Flex("alice", "s", "w", -1).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ManagerTest, StopStartDestroy) {
  ASSERT_TRUE(Launch(Training()).ok());
  Started("alice/fmnist/ps-0");
  Started("alice/fmnist/ps-1");
  ASSERT_TRUE(manager_->Stop("alice", "fmnist").ok());
  EXPECT_EQ(State("fmnist"), "STOPPED");
  EXPECT_EQ(backend_.stops.size(), 4u) << "ps running, workers starting: all are stopped";
  EXPECT_EQ(manager_->Start("alice", "fmnist").code(), StatusCode::kFailedPrecondition)
      << "still stopping";
  Exited("alice/fmnist/ps-0", 143);
  Exited("alice/fmnist/ps-1", 143);
  Event(BackendEvent::Kind::kStartFailed, "alice/fmnist/worker-0", "stopped before it started");
  Exited("alice/fmnist/worker-1", 143);
  EXPECT_EQ(Instance("fmnist", "ps-0").state, "STOPPED");
  EXPECT_EQ(Instance("fmnist", "worker-0").state, "STOPPED");
  EXPECT_EQ(backend_.placed(), 0u);
  size_t launched = backend_.launches.size();
  ASSERT_TRUE(manager_->Start("alice", "fmnist").ok());
  EXPECT_EQ(backend_.launches.size(), launched + 2);
  EXPECT_EQ(backend_.container_of["alice/fmnist/ps-0"], "alice_fmnist_ps-0_2");
  ASSERT_TRUE(manager_->Destroy("alice", "fmnist").ok());
  Exited("alice/fmnist/ps-0", 143);
  Exited("alice/fmnist/ps-1", 143);
  EXPECT_EQ(manager_->Get("alice", "fmnist").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(backend_.destroyed, (std::vector<std::string>{"alice/fmnist"}));
  EXPECT_EQ(store_->GetAssembly("alice", "fmnist").status().code(), StatusCode::kNotFound);
  // The name is free again.
  EXPECT_TRUE(Launch(Training()).ok());
}

TEST_F(ManagerTest, UsersAreIsolated) {
  ASSERT_TRUE(Launch(Training(), "alice").ok());
  ASSERT_TRUE(Launch(Training(), "bob").ok());
  EXPECT_EQ(Launch(Training(), "bob").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(manager_->List("alice").size(), 1u);
  EXPECT_EQ(manager_->List("").size(), 2u);
  ASSERT_TRUE(manager_->Stop("bob", "fmnist").ok());
  EXPECT_EQ(State("fmnist", "alice"), "STARTED");
  EXPECT_EQ(manager_->Stop("carol", "fmnist").code(), StatusCode::kNotFound);
  EXPECT_EQ(manager_->FindInstance("carol", "fmnist", "ps-0").status().code(),
            StatusCode::kNotFound);
}

// Whether a queue admits the caller is the API's check (it knows the caller's groups): the
// Manager only refuses queues that do not exist.
TEST_F(ManagerTest, UnknownQueuesAreRefusedAtLaunch) {
  json j = Training();
  j["queue"] = "nope";
  Status s = Launch(j);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "queue: there is no queue \"nope\" (queues: default, research)");
  j["queue"] = "research";
  EXPECT_TRUE(Launch(j, "alice").ok());
  EXPECT_EQ(manager_->Get("alice", "fmnist")->queue, "research");
}

// tarn.priority: the queue's default when absent; above the queue's
// max-application-priority the launch is refused, naming the cap.
TEST_F(ManagerTest, APriorityAboveTheQueuesMaximumIsRefusedAtLaunch) {
  json j = Training();
  j["queue"] = "research";
  j["configuration"]["properties"]["tarn.priority"] = "6";
  Status s = Launch(j, "alice");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(),
            "configuration.properties[\"tarn.priority\"]: 6 is above queue research's "
            "max-application-priority (5; the server's config sets it per queue)");
  EXPECT_EQ(manager_->Get("alice", "fmnist").status().code(), StatusCode::kNotFound);
  j["configuration"]["properties"]["tarn.priority"] = "5";
  ASSERT_TRUE(Launch(j, "alice").ok());
  EXPECT_EQ(manager_->Get("alice", "fmnist")->priority, 5);
  j["name"] = "other";
  j["configuration"]["properties"].erase("tarn.priority");
  ASSERT_TRUE(Launch(j, "alice").ok());
  EXPECT_EQ(manager_->Get("alice", "other")->priority, 2);  // the queue's default
  j["name"] = "third";
  j.erase("queue");
  j["configuration"]["properties"]["tarn.priority"] = "1";
  EXPECT_EQ(Launch(j, "alice").code(), StatusCode::kPermissionDenied);  // default's max is 0
}

TEST_F(ManagerTest, WaitsForResourcesAndSaysWhy) {
  backend_.slots = 1;
  json j = json::parse(R"({"version": "1", "name": "s", "components": [{"name": "w",
      "number_of_containers": 2, "launch_command": "sleep 9",
      "resource": {"cpus": 1, "memory": "64"}}]})");
  ASSERT_TRUE(Launch(j).ok());
  EXPECT_EQ(backend_.launches.size(), 1u);
  EXPECT_EQ(Instance("s", "w-1").diagnostics, "waiting for resources: no free slot");
  Started("alice/s/w-0");
  ASSERT_TRUE(manager_->Flex("alice", "s", "w", 1).ok());
  EXPECT_EQ(manager_->Get("alice", "s")->components[0].instances.size(), 1u);
}

TEST_F(ManagerTest, GangIsRequestedWhole) {
  backend_.slots = 3;
  json j = Training();
  j["components"][0]["configuration"] = {
      {"properties", {{"tarn.tf.role", "ps"}, {"tarn.ports", "grpc:2222"}}}};
  j["components"][1]["configuration"] = {
      {"properties", {{"tarn.tf.role", "worker"}, {"tarn.ports", "grpc:2222"}}}};
  ASSERT_TRUE(Launch(j).ok());
  EXPECT_TRUE(backend_.launches.empty()) << "4 members do not fit 3 slots: none starts";
  EXPECT_EQ(Instance("fmnist", "ps-0").state, "PENDING");
  backend_.slots = 4;
  Advance(milliseconds(1));
  EXPECT_EQ(backend_.placed(), 4u);
  // Placed together, started in dependency order.
  EXPECT_EQ(backend_.launches.size(), 2u);
  EXPECT_NE(Instance("fmnist", "worker-0").diagnostics.find("waiting for ps"), std::string::npos);
}

TEST_F(ManagerTest, RestartedServerAdoptsRunningInstancesAndNeverStartsTwo) {
  ASSERT_TRUE(Launch(Training()).ok());
  Started("alice/fmnist/ps-0");
  Started("alice/fmnist/ps-1");
  ASSERT_EQ(backend_.launches.size(), 4u);
  // worker-0 and worker-1 were launched (committed) but no answer came: the server dies.
  RestartServer();
  EXPECT_EQ(backend_.launches.size(), 4u) << "nothing is launched before recovery answers";
  EXPECT_EQ(backend_.recovers.size(), 4u);
  EXPECT_EQ(State("fmnist"), "STARTED");
  Started("alice/fmnist/ps-0");
  Started("alice/fmnist/ps-1");
  Started("alice/fmnist/worker-0");
  // worker-1 never started: recovery says so, and it is launched once, with a new id.
  Event(BackendEvent::Kind::kStartFailed, "alice/fmnist/worker-1", "no container");
  EXPECT_EQ(backend_.launches.size(), 5u);
  EXPECT_EQ(backend_.container_of["alice/fmnist/worker-1"], "alice_fmnist_worker-1_2");
  Started("alice/fmnist/worker-1");
  EXPECT_EQ(State("fmnist"), "STABLE");
  EXPECT_EQ(Instance("fmnist", "worker-1").restarts, 0);
}

TEST_F(ManagerTest, RestartedServerKeepsFlexesStopsAndFinishedInstances) {
  json j = json::parse(R"({"version": "1", "name": "s", "components": [{"name": "w",
      "number_of_containers": 2, "launch_command": "sleep 9", "restart_policy": "NEVER",
      "resource": {"cpus": 1, "memory": "64"}}]})");
  ASSERT_TRUE(Launch(j).ok());
  Started("alice/s/w-0");
  Started("alice/s/w-1");
  Exited("alice/s/w-0", 0);
  ASSERT_TRUE(manager_->Flex("alice", "s", "w", 3).ok());
  ASSERT_TRUE(Launch(Training()).ok());
  ASSERT_TRUE(manager_->Stop("alice", "fmnist").ok());
  RestartServer();
  EXPECT_EQ(Instance("s", "w-0").state, "SUCCEEDED");
  EXPECT_EQ(manager_->Get("alice", "s")->components[0].number_of_containers, 3);
  EXPECT_EQ(State("fmnist"), "STOPPED");
  // w-1 is recovered (it had a container), w-2 had none and is recovered as running too or
  // launched; either way exactly one container per instance is asked for.
  std::map<std::string, int> asks;
  for (const auto& k : backend_.recovers) ++asks[k];
  for (const auto& k : backend_.launches) ++asks[k];
  EXPECT_EQ(asks["alice/s/w-0"], 1) << "a finished instance is not started again";
}

TEST_F(ManagerTest, NamesArePublishedFromPlacementAndGoWithTheInstance) {
  constexpr uint16_t kA = 1, kTxt = 16;
  json j = json::parse(R"({"version": "1", "name": "s", "components": [{"name": "w",
      "number_of_containers": 2, "launch_command": "sleep 9",
      "resource": {"cpus": 1, "memory": "64"}}]})");
  ASSERT_TRUE(Launch(j).ok());
  // Placed, not started: the instance's own name resolves; the component lists no one.
  auto a = registry_.Lookup("w-1.s.alice.tarn", kA);
  ASSERT_EQ(a.answers().size(), 1u);
  EXPECT_EQ(registry_.Lookup("w.s.alice.tarn", kA).answers().size(), 0u);
  Started("alice/s/w-0");
  Started("alice/s/w-1");
  EXPECT_EQ(registry_.Lookup("w.s.alice.tarn", kA).answers().size(), 2u);
  auto txt = registry_.Lookup("w-0.s.alice.tarn", kTxt);
  ASSERT_EQ(txt.answers().size(), 1u);
  EXPECT_EQ(txt.answers()[0].text, "alice_s_w-0_1");
  ASSERT_TRUE(manager_->Flex("alice", "s", "w", 1).ok());
  Exited("alice/s/w-1", 143);
  EXPECT_EQ(registry_.Lookup("w-1.s.alice.tarn", kA).rcode(), registry::Rcode::kNxDomain);
  EXPECT_EQ(registry_.Lookup("w.s.alice.tarn", kA).answers().size(), 1u);
  ASSERT_TRUE(manager_->Destroy("alice", "s").ok());
  Exited("alice/s/w-0", 143);
  EXPECT_EQ(registry_.Lookup("w-0.s.alice.tarn", kA).rcode(), registry::Rcode::kNxDomain);
}

// A backend that picks the node at launch (Slurm): the instance shows why it waits, gets
// its node and address (and its DNS name) from kStarted, loses the name when it exits, and
// is recovered (never launched twice) after a server restart although no node was recorded.
TEST_F(ManagerTest, ABackendThatPlacesAtLaunchReportsWaitingNodeAndAddress) {
  constexpr uint16_t kA = 1;
  backend_.places_at_launch = true;
  json j = json::parse(R"({"version": "1", "name": "s", "components": [{"name": "w",
      "number_of_containers": 1, "launch_command": "sleep 9",
      "resource": {"cpus": 1, "memory": "64"}}]})");
  ASSERT_TRUE(Launch(j).ok());
  ASSERT_EQ(backend_.launches, std::vector<std::string>{"alice/s/w-0"});
  EXPECT_EQ(Instance("s", "w-0").ip, "");
  EXPECT_EQ(Instance("s", "w-0").diagnostics, "starting");
  EXPECT_EQ(registry_.Lookup("w-0.s.alice.tarn", kA).rcode(), registry::Rcode::kNxDomain);
  Event(BackendEvent::Kind::kWaiting, "alice/s/w-0", "Slurm: PENDING (Resources)");
  EXPECT_EQ(Instance("s", "w-0").state, "PENDING");
  EXPECT_EQ(Instance("s", "w-0").diagnostics, "Slurm: PENDING (Resources)");
  EXPECT_EQ(manager_->Events("alice", "s")->back().type, "WAITING");

  BackendEvent started;
  started.kind = BackendEvent::Kind::kStarted;
  started.key = "alice/s/w-0";
  started.container_id = backend_.container_of["alice/s/w-0"];
  started.ip = "127.0.1.2";
  started.node = "node2";
  manager_->Handle(started);
  EXPECT_EQ(Instance("s", "w-0").state, "READY");
  EXPECT_EQ(Instance("s", "w-0").ip, "127.0.1.2");
  EXPECT_EQ(Instance("s", "w-0").node, "node2");
  auto a = registry_.Lookup("w-0.s.alice.tarn", kA);
  ASSERT_EQ(a.answers().size(), 1u);
  EXPECT_EQ(a.answers()[0].ipv4, 0x7f000102u);
  // A late kWaiting of the same start changes nothing.
  Event(BackendEvent::Kind::kWaiting, "alice/s/w-0", "Slurm: PENDING (Priority)");
  EXPECT_EQ(Instance("s", "w-0").diagnostics, "");

  RestartServer();
  EXPECT_EQ(backend_.launches.size(), 1u);
  EXPECT_EQ(backend_.recovers, std::vector<std::string>{"alice/s/w-0"});
  started.ip = "127.0.1.2";
  manager_->Handle(started);
  EXPECT_EQ(Instance("s", "w-0").state, "READY");
  EXPECT_EQ(Instance("s", "w-0").node, "node2");

  Exited("alice/s/w-0", 1);
  EXPECT_EQ(Instance("s", "w-0").ip, "");
  EXPECT_EQ(registry_.Lookup("w-0.s.alice.tarn", kA).rcode(), registry::Rcode::kNxDomain);
}

// Backends whose containers read a hosts file hear of every change of an assembly's names,
// before the launches that need them, and only of changes.
TEST_F(ManagerTest, NamesChangedCarriesTheAssemblysHostsLines) {
  json j = json::parse(R"({"version": "1", "name": "s", "components": [{"name": "w",
      "number_of_containers": 2, "launch_command": "sleep 9",
      "resource": {"cpus": 1, "memory": "64"}}]})");
  ASSERT_TRUE(Launch(j).ok());
  ASSERT_FALSE(backend_.names_changed.empty());
  const auto& [key, lines] = backend_.names_changed.back();
  EXPECT_EQ(key, "alice/s");
  EXPECT_NE(lines.find("\tw-0.s.alice.tarn w-0\n"), std::string::npos) << lines;
  EXPECT_NE(lines.find("\tw-1.s.alice.tarn w-1\n"), std::string::npos) << lines;
  ASSERT_EQ(backend_.names_before_launch.size(), 2u);
  EXPECT_GE(backend_.names_before_launch[0], 1u);
  const size_t calls = backend_.names_changed.size();
  Started("alice/s/w-0");  // READY changes the component's records, not the hosts lines
  EXPECT_EQ(backend_.names_changed.size(), calls);
  ASSERT_TRUE(manager_->Flex("alice", "s", "w", 1).ok());
  Exited("alice/s/w-1", 143);
  EXPECT_EQ(backend_.names_changed.back().second.find("w-1"), std::string::npos)
      << backend_.names_changed.back().second;
  EXPECT_NE(backend_.names_changed.back().second.find("w-0"), std::string::npos);
}

TEST_F(ManagerTest, StaleEventsOfAnOlderStartAreIgnored) {
  json j = json::parse(R"({"version": "1", "name": "s", "components": [{"name": "w",
      "number_of_containers": 1, "launch_command": "sleep 9",
      "resource": {"cpus": 1, "memory": "64"}}]})");
  ASSERT_TRUE(Launch(j).ok());
  Started("alice/s/w-0");
  BackendEvent e;
  e.kind = BackendEvent::Kind::kExited;
  e.key = "alice/s/w-0";
  e.container_id = "alice_s_w-0_0";
  manager_->Handle(e);
  EXPECT_EQ(Instance("s", "w-0").state, "READY");
}

TEST_F(ManagerTest, LifetimeDestroysTheAssembly) {
  json j = Training();
  j["lifetime"] = 30;
  ASSERT_TRUE(Launch(j).ok());
  EXPECT_EQ(manager_->Get("alice", "fmnist")->lifetime_remaining_s, 30);
  ASSERT_TRUE(manager_->NextDeadline().has_value());
  EXPECT_EQ(*manager_->NextDeadline(), clock_.Now() + seconds(30));
  Started("alice/fmnist/ps-0");
  Advance(seconds(30));
  EXPECT_EQ(backend_.stops, (std::vector<std::string>{"alice/fmnist/ps-0", "alice/fmnist/ps-1"}));
  EXPECT_EQ(State("fmnist"), "STOPPED");
  Exited("alice/fmnist/ps-0", 143);
  Event(BackendEvent::Kind::kStartFailed, "alice/fmnist/ps-1", "stopped before it started");
  EXPECT_EQ(manager_->Get("alice", "fmnist").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(manager_->SetLifetime("alice", "fmnist", 5).code(), StatusCode::kNotFound);
}

TEST_F(ManagerTest, EventsTellTheStory) {
  ASSERT_TRUE(Launch(Training()).ok());
  Started("alice/fmnist/ps-0");
  auto events = manager_->Events("alice", "fmnist");
  ASSERT_TRUE(events.ok());
  std::vector<std::string> types;
  for (const auto& e : *events) types.push_back(e.type);
  EXPECT_EQ(types.front(), "ACCEPTED");
  EXPECT_NE(std::find(types.begin(), types.end(), "LAUNCH"), types.end());
  EXPECT_NE(std::find(types.begin(), types.end(), "READY"), types.end());
  EXPECT_EQ(manager_->Events("bob", "fmnist").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tarn::service::testing_manager
