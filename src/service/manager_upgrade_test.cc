// Upgrades on a FakeClock and a fake backend: YARN's calls and states (UPGRADING,
// UPGRADING_AUTO_FINALIZE, EXPRESS_UPGRADING, CANCEL_UPGRADING; NEEDS_UPGRADE, UPGRADING,
// FAILED_UPGRADE), one instance down at a time, readiness gating the next, the deadline,
// cancel, finalize, and the whole of it surviving a server restart.
#include <gtest/gtest.h>

#include "service/manager_test_fixture.h"

namespace tarn::service::testing_manager {
namespace {

// Three replicas behind a PORT readiness check: READY only once a probe says so. Stopped
// for an upgrade at once unless `delay_ms` (tarn.upgrade.deregistration_delay_ms) says.
json Serving(const std::string& version, const std::string& command = "serve --v1",
             int delay_ms = 0) {
  json j = json::parse(R"({"name": "s", "components": [{"name": "srv",
      "number_of_containers": 3,
      "resource": {"cpus": 1, "memory": "64"},
      "readiness_check": {"type": "PORT", "properties": {"port": "8501"}},
      "configuration": {"properties": {"tarn.stop.grace_secs": "5"}}}]})");
  j["version"] = version;
  j["components"][0]["launch_command"] = command;
  j["components"][0]["configuration"]["properties"]["tarn.upgrade.deregistration_delay_ms"] =
      std::to_string(delay_ms);
  return j;
}

class ManagerUpgradeTest : public ManagerTest {
 protected:
  spec::Assembly Parse(const json& j) {
    spec::ParseOptions po;
    po.user = "alice";
    spec::ParseResult r = spec::ParseAssemblyJson(j, po);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r.assembly : spec::Assembly{};
  }
  Status Initiate(const json& j, Manager::UpgradeMode mode = Manager::UpgradeMode::kManual) {
    return manager_->InitiateUpgrade("alice", Parse(j), j.dump(), mode);
  }
  // Started and READY.
  void Up(const std::string& key) {
    Started(key);
    Probed(key, true);
  }
  void LaunchServing(int delay_ms = 0) {
    ASSERT_TRUE(Launch(Serving("1", "serve --v1", delay_ms)).ok());
    for (const char* k : {"alice/s/srv-0", "alice/s/srv-1", "alice/s/srv-2"}) Up(k);
    ASSERT_EQ(State("s"), "STABLE");
  }
  std::vector<std::string> Events(const std::string& type) {
    std::vector<std::string> out;
    const StatusOr<std::vector<service::Event>> events = manager_->Events("alice", "s");
    for (const service::Event& e : *events) {
      if (e.type == type) out.push_back(e.instance.empty() ? e.message : e.instance);
    }
    return out;
  }
  std::string StoredVersion() {
    return json::parse(store_->GetAssembly("alice", "s")->spec_json).value("version", "");
  }
  std::string Launched(const std::string& key) {
    for (size_t k = backend_.launches.size(); k-- > 0;) {
      if (backend_.launches[k] == key) return backend_.launched_versions[k];
    }
    return "";
  }
};

TEST_F(ManagerUpgradeTest, ManualUpgradeRollsOneAtATimeGatedOnReadinessThenFinalizes) {
  LaunchServing();
  ASSERT_TRUE(Initiate(Serving("2", "serve --v2")).ok());
  EXPECT_EQ(State("s"), "UPGRADING");
  EXPECT_EQ(manager_->Get("alice", "s")->upgrade_version, "2");
  EXPECT_EQ(manager_->Get("alice", "s")->components[0].state, "NEEDS_UPGRADE");
  for (const char* n : {"srv-0", "srv-1", "srv-2"}) {
    EXPECT_EQ(Instance("s", n).state, "NEEDS_UPGRADE");
    EXPECT_EQ(Instance("s", n).version, "1");
    EXPECT_TRUE(Instance("s", n).ready) << n << " serves until it is stopped";
  }
  EXPECT_TRUE(backend_.stops.empty()) << "initiating stops nothing";
  Status early = manager_->FinalizeUpgrade("alice", "s");
  EXPECT_EQ(early.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(early.message().find("3 instance(s) do not run version 2 yet (srv-0 NEEDS_UPGRADE"),
            std::string::npos)
      << early.message();

  // Two asked for: srv-0 stops at once, srv-1 waits for srv-0 to be READY again.
  ASSERT_TRUE(manager_->UpgradeInstances("alice", "s", {"srv-0", "srv-1"}).ok());
  EXPECT_EQ(backend_.stops, (std::vector<std::string>{"alice/s/srv-0"}));
  EXPECT_EQ(Instance("s", "srv-0").state, "UPGRADING");
  EXPECT_EQ(Instance("s", "srv-1").state, "UPGRADING");
  EXPECT_FALSE(Instance("s", "srv-0").ready) << "stopping";
  EXPECT_TRUE(Instance("s", "srv-1").ready) << "waiting for its turn, still serving";
  EXPECT_EQ(manager_->Get("alice", "s")->components[0].state, "UPGRADING");
  Exited("alice/s/srv-0", 143);
  // Started again under its name and index, with the new spec.
  EXPECT_EQ(Launched("alice/s/srv-0"), "2");
  EXPECT_EQ(Instance("s", "srv-0").version, "2");
  EXPECT_EQ(Instance("s", "srv-0").container_id, "alice_s_srv-0_2");
  Started("alice/s/srv-0");
  EXPECT_FALSE(Instance("s", "srv-0").ready);
  Advance(seconds(30));
  EXPECT_EQ(backend_.stops.size(), 1u) << "srv-1 waits while srv-0 is not READY";
  Probed("alice/s/srv-0", true);
  EXPECT_EQ(Instance("s", "srv-0").state, "READY");
  EXPECT_TRUE(Instance("s", "srv-0").ready);
  EXPECT_EQ(backend_.stops, (std::vector<std::string>{"alice/s/srv-0", "alice/s/srv-1"}));
  Exited("alice/s/srv-1", 143);
  Up("alice/s/srv-1");
  EXPECT_EQ(Events("UPGRADED"), (std::vector<std::string>{"srv-0", "srv-1"}));
  EXPECT_EQ(Instance("s", "srv-2").state, "NEEDS_UPGRADE");
  EXPECT_EQ(Launched("alice/s/srv-2"), "1");
  EXPECT_EQ(State("s"), "UPGRADING") << "manual: finalized only when asked";

  // The component's turn, then finalize: the new spec is the assembly's.
  EXPECT_EQ(manager_->UpgradeInstances("alice", "s", {"srv-0"}).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->UpgradeInstances("alice", "s", {"srv-9"}).code(), StatusCode::kNotFound);
  ASSERT_TRUE(manager_->UpgradeComponents("alice", "s", {"srv"}).ok());
  Exited("alice/s/srv-2", 143);
  Up("alice/s/srv-2");
  EXPECT_EQ(manager_->Get("alice", "s")->components[0].state, "STABLE");
  ASSERT_TRUE(manager_->FinalizeUpgrade("alice", "s").ok());
  EXPECT_EQ(State("s"), "STABLE");
  EXPECT_EQ(StoredVersion(), "2");
  EXPECT_EQ(manager_->Get("alice", "s")->version, "2");
  EXPECT_EQ(manager_->Get("alice", "s")->upgrade_version, "");
  EXPECT_EQ(store_->GetAssembly("alice", "s")->upgrade_json, "");
  EXPECT_EQ(Events("UPGRADE_FINALIZED").size(), 1u);
  EXPECT_EQ(manager_->FinalizeUpgrade("alice", "s").code(), StatusCode::kFailedPrecondition);

  // After a server restart the assembly runs version 2 everywhere, nothing to upgrade.
  RestartServer();
  EXPECT_EQ(manager_->Get("alice", "s")->version, "2");
  for (const char* n : {"srv-0", "srv-1", "srv-2"}) EXPECT_EQ(Instance("s", n).version, "2");
}

// A READY replica leaves the ready set (its `ready`, the component's DNS records) for the
// delay before its stop, still running; probes saying READY meanwhile do not bring it back.
TEST_F(ManagerUpgradeTest, ReadyInstanceLeavesTheReadySetForTheDelayBeforeItsStop) {
  LaunchServing(/*delay_ms=*/1500);
  ASSERT_TRUE(Initiate(Serving("2", "serve --v2", 1500), Manager::UpgradeMode::kAutoFinalize).ok());
  ASSERT_TRUE(manager_->UpgradeComponents("alice", "s", {"srv"}).ok());
  EXPECT_TRUE(backend_.stops.empty()) << "not stopped yet";
  EXPECT_FALSE(Instance("s", "srv-0").ready);
  EXPECT_EQ(Instance("s", "srv-0").version, "1") << "still running the old spec";
  EXPECT_TRUE(Instance("s", "srv-1").ready) << "one at a time";
  EXPECT_EQ(Events("UNREADY"), (std::vector<std::string>{"srv-0"}));
  Advance(milliseconds(1000));
  Probed("alice/s/srv-0", true);
  EXPECT_FALSE(Instance("s", "srv-0").ready) << "a probe does not end the delay";
  EXPECT_TRUE(backend_.stops.empty());
  Advance(milliseconds(500));
  EXPECT_EQ(backend_.stops, (std::vector<std::string>{"alice/s/srv-0"})) << "stopped at 1.5 s";
  Exited("alice/s/srv-0", 143);
  Up("alice/s/srv-0");
  EXPECT_EQ(Instance("s", "srv-0").version, "2");
  EXPECT_TRUE(Instance("s", "srv-0").ready);
  EXPECT_FALSE(Instance("s", "srv-1").ready) << "the next one's turn: out of the ready set";
  EXPECT_EQ(backend_.stops.size(), 1u);
  // An instance that exits during its delay is not stopped: it starts on the new spec.
  Exited("alice/s/srv-1", 1);
  EXPECT_EQ(backend_.stops.size(), 1u);
  EXPECT_EQ(Launched("alice/s/srv-1"), "2");
  Up("alice/s/srv-1");
  Advance(milliseconds(1500));
  EXPECT_EQ(backend_.stops.back(), "alice/s/srv-2");
  Exited("alice/s/srv-2", 143);
  Up("alice/s/srv-2");
  EXPECT_EQ(State("s"), "STABLE");
  EXPECT_EQ(manager_->Get("alice", "s")->version, "2");
  EXPECT_EQ(Events("UPGRADED"), (std::vector<std::string>{"srv-0", "srv-1", "srv-2"}));
}

TEST_F(ManagerUpgradeTest, ExpressUpgradesComponentsInDependencyOrderAndFinalizesItself) {
  json v1 = Training();
  ASSERT_TRUE(Launch(v1).ok());
  for (const char* k : {"alice/fmnist/ps-0", "alice/fmnist/ps-1"}) Started(k);
  for (const char* k : {"alice/fmnist/worker-0", "alice/fmnist/worker-1"}) Started(k);
  ASSERT_EQ(State("fmnist"), "STABLE");
  json v2 = Training();
  v2["version"] = "2";
  v2["components"][1]["configuration"] = {{"properties", {{"tarn.upgrade.max_unavailable", "2"}}}};
  ASSERT_TRUE(
      manager_->InitiateUpgrade("alice", Parse(v2), v2.dump(), Manager::UpgradeMode::kExpress)
          .ok());
  EXPECT_EQ(State("fmnist"), "EXPRESS_UPGRADING");
  // ps first (the workers depend on it), one at a time (DEFAULT readiness: READY on start),
  // each out of the ready set for the default 5 s (the registry's TTL) before its stop.
  EXPECT_TRUE(backend_.stops.empty());
  Advance(seconds(5));
  EXPECT_EQ(backend_.stops, (std::vector<std::string>{"alice/fmnist/ps-0"}));
  Exited("alice/fmnist/ps-0", 143);
  Started("alice/fmnist/ps-0");
  Advance(seconds(5));
  EXPECT_EQ(backend_.stops.back(), "alice/fmnist/ps-1");
  Exited("alice/fmnist/ps-1", 143);
  EXPECT_EQ(backend_.stops.size(), 2u) << "the workers wait for every ps to be upgraded";
  Started("alice/fmnist/ps-1");
  Advance(seconds(5));
  // Then both workers at once: max_unavailable 2.
  EXPECT_EQ(backend_.stops,
            (std::vector<std::string>{"alice/fmnist/ps-0", "alice/fmnist/ps-1",
                                      "alice/fmnist/worker-0", "alice/fmnist/worker-1"}));
  Exited("alice/fmnist/worker-0", 143);
  Exited("alice/fmnist/worker-1", 143);
  Started("alice/fmnist/worker-0");
  EXPECT_EQ(State("fmnist"), "EXPRESS_UPGRADING");
  Started("alice/fmnist/worker-1");
  EXPECT_EQ(State("fmnist"), "STABLE");
  EXPECT_EQ(manager_->Get("alice", "fmnist")->version, "2");
  EXPECT_EQ(json::parse(store_->GetAssembly("alice", "fmnist")->spec_json)["version"], "2");
}

TEST_F(ManagerUpgradeTest, AutoFinalizeEndsTheUpgradeOnceEveryInstanceIsUpgraded) {
  LaunchServing();
  ASSERT_TRUE(Initiate(Serving("2"), Manager::UpgradeMode::kAutoFinalize).ok());
  EXPECT_EQ(State("s"), "UPGRADING_AUTO_FINALIZE");
  ASSERT_TRUE(manager_->UpgradeComponents("alice", "s", {"srv"}).ok());
  for (const char* k : {"alice/s/srv-0", "alice/s/srv-1", "alice/s/srv-2"}) {
    EXPECT_EQ(backend_.stops.back(), k);
    Exited(k, 143);
    EXPECT_EQ(State("s"), "UPGRADING_AUTO_FINALIZE");
    Up(k);
  }
  EXPECT_EQ(State("s"), "STABLE");
  EXPECT_EQ(StoredVersion(), "2");
}

TEST_F(ManagerUpgradeTest, AnInstanceNotReadyInTimeStopsTheUpgradeAndCancelBringsTheOldSpecBack) {
  LaunchServing();
  json v2 = Serving("2", "serve --broken");
  v2["components"][0]["configuration"]["properties"]["tarn.upgrade.progress_deadline_secs"] = "60";
  ASSERT_TRUE(Initiate(v2).ok());
  ASSERT_TRUE(manager_->UpgradeComponents("alice", "s", {"srv"}).ok());
  Exited("alice/s/srv-0", 143);
  Started("alice/s/srv-0");
  Probed("alice/s/srv-0", false);
  ASSERT_TRUE(manager_->NextDeadline().has_value());
  EXPECT_LE(*manager_->NextDeadline(), clock_.Now() + seconds(60));
  Advance(seconds(61));
  EXPECT_EQ(Instance("s", "srv-0").state, "FAILED_UPGRADE");
  auto status = manager_->Get("alice", "s");
  EXPECT_EQ(status->state, "UPGRADING");
  EXPECT_NE(status->diagnostics.find("srv-0 was not READY within 60 s of its upgrade"),
            std::string::npos)
      << status->diagnostics;
  ASSERT_EQ(Events("UPGRADE_FAILED").size(), 1u);
  Advance(seconds(120));
  EXPECT_EQ(backend_.stops.size(), 1u) << "nothing else is touched once the upgrade failed";
  EXPECT_EQ(Instance("s", "srv-1").state, "UPGRADING");

  // Cancel: the failed instance goes back the same way; the others were never stopped.
  ASSERT_TRUE(manager_->CancelUpgrade("alice", "s").ok());
  EXPECT_EQ(State("s"), "CANCEL_UPGRADING");
  EXPECT_EQ(Instance("s", "srv-1").state, "READY");
  EXPECT_EQ(backend_.stops, (std::vector<std::string>{"alice/s/srv-0", "alice/s/srv-0"}));
  EXPECT_EQ(manager_->UpgradeInstances("alice", "s", {"srv-1"}).code(),
            StatusCode::kFailedPrecondition);
  Exited("alice/s/srv-0", 143);
  EXPECT_EQ(Launched("alice/s/srv-0"), "1");
  Started("alice/s/srv-0");
  EXPECT_EQ(State("s"), "CANCEL_UPGRADING");
  Probed("alice/s/srv-0", true);
  EXPECT_EQ(State("s"), "STABLE");
  EXPECT_EQ(Events("UPGRADE_CANCELLED").size(), 1u);
  EXPECT_EQ(StoredVersion(), "1");
  EXPECT_EQ(manager_->Get("alice", "s")->diagnostics, "");
  for (const char* n : {"srv-0", "srv-1", "srv-2"}) EXPECT_EQ(Instance("s", n).version, "1");
  EXPECT_EQ(manager_->CancelUpgrade("alice", "s").code(), StatusCode::kFailedPrecondition);
}

TEST_F(ManagerUpgradeTest, AskingAgainAfterAFailureRollsOnWithAFreshDeadline) {
  LaunchServing();
  json v2 = Serving("2");
  v2["components"][0]["configuration"]["properties"]["tarn.upgrade.progress_deadline_secs"] = "10";
  ASSERT_TRUE(Initiate(v2).ok());
  ASSERT_TRUE(manager_->UpgradeInstances("alice", "s", {"srv-0"}).ok());
  Exited("alice/s/srv-0", 143);
  Started("alice/s/srv-0");
  Advance(seconds(11));
  ASSERT_EQ(Instance("s", "srv-0").state, "FAILED_UPGRADE");
  ASSERT_TRUE(manager_->UpgradeInstances("alice", "s", {"srv-0"}).ok());
  EXPECT_EQ(Instance("s", "srv-0").state, "UPGRADING");
  EXPECT_EQ(manager_->Get("alice", "s")->diagnostics, "");
  Probed("alice/s/srv-0", true);
  EXPECT_EQ(Instance("s", "srv-0").state, "READY");
  EXPECT_EQ(Events("UPGRADED"), (std::vector<std::string>{"srv-0"}));
}

TEST_F(ManagerUpgradeTest, AnUpgradeInProgressSurvivesAServerRestart) {
  LaunchServing();
  ASSERT_TRUE(Initiate(Serving("2"), Manager::UpgradeMode::kAutoFinalize).ok());
  ASSERT_TRUE(manager_->UpgradeComponents("alice", "s", {"srv"}).ok());
  Exited("alice/s/srv-0", 143);
  Up("alice/s/srv-0");
  ASSERT_EQ(backend_.stops.back(), "alice/s/srv-1");
  // kill -9 while srv-1 stops: the new server adopts the instances, knows the upgrade and
  // what each runs, and carries on.
  RestartServer();
  EXPECT_EQ(State("s"), "UPGRADING_AUTO_FINALIZE");
  EXPECT_EQ(Instance("s", "srv-0").version, "2");
  EXPECT_EQ(Instance("s", "srv-1").version, "1");
  for (const char* k : {"alice/s/srv-0", "alice/s/srv-1", "alice/s/srv-2"}) Up(k);
  EXPECT_EQ(Instance("s", "srv-0").state, "READY");
  EXPECT_EQ(backend_.stops.back(), "alice/s/srv-1") << "srv-1 is stopped again";
  Exited("alice/s/srv-1", 143);
  EXPECT_EQ(Launched("alice/s/srv-1"), "2");
  Up("alice/s/srv-1");
  Exited("alice/s/srv-2", 143);
  Up("alice/s/srv-2");
  EXPECT_EQ(State("s"), "STABLE");
  EXPECT_EQ(StoredVersion(), "2");
}

TEST_F(ManagerUpgradeTest, RefusesWhatAnUpgradeCannotDo) {
  LaunchServing();
  auto code_and = [](const Status& s, const std::string& words) {
    return s.message().find(words) != std::string::npos ? s.code() : StatusCode::kUnknown;
  };
  EXPECT_EQ(code_and(Initiate(Serving("1")), "already runs version 1"),
            StatusCode::kInvalidArgument);
  json renamed = Serving("2");
  renamed["components"][0]["name"] = "api";
  EXPECT_EQ(code_and(Initiate(renamed), "keeps the components, in their order (srv)"),
            StatusCode::kInvalidArgument);
  json queued = Serving("2");
  queued["queue"] = "research";
  EXPECT_EQ(code_and(Initiate(queued), "keeps the assembly's queue"), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_and(manager_->UpgradeInstances("alice", "s", {"srv-0"}), "is not upgrading"),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->FinalizeUpgrade("alice", "s").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->CancelUpgrade("bob", "s").code(), StatusCode::kNotFound);

  // The file's count is not the upgrade's to change: the running one stays.
  json bigger = Serving("2");
  bigger["components"][0]["number_of_containers"] = 5;
  ASSERT_TRUE(Initiate(bigger).ok());
  EXPECT_EQ(manager_->Get("alice", "s")->components[0].instances.size(), 3u);
  EXPECT_EQ(code_and(Initiate(Serving("3")), "already upgrading to version 2"),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(code_and(manager_->Flex("alice", "s", "srv", 4).status(), "flex it once the upgrade"),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->UpgradeComponents("alice", "s", {"web"}).code(), StatusCode::kNotFound);
  // Cancelled before anything was upgraded: over at once.
  ASSERT_TRUE(manager_->CancelUpgrade("alice", "s").ok());
  EXPECT_EQ(State("s"), "STABLE");
  EXPECT_TRUE(backend_.stops.empty());
  // And a stopped assembly is not upgraded.
  ASSERT_TRUE(manager_->Stop("alice", "s").ok());
  EXPECT_EQ(code_and(Initiate(Serving("2")), "only a running assembly is upgraded"),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tarn::service::testing_manager
