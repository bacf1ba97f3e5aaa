// The manager carrying out autoscaling decisions on a FakeClock and a fake backend: up at
// once under a burst, down one replica at a time after the delay, each stop finished first,
// never outside min..max, the count durable, flex held to the bounds.
#include <gtest/gtest.h>

#include "service/manager_test_fixture.h"

namespace tarn::service::testing_manager {
namespace {

json Serving() {
  return json::parse(R"({"version": "1", "name": "s", "components": [{"name": "srv",
      "number_of_containers": 1, "launch_command": "sleep 9",
      "resource": {"cpus": 1, "memory": "64"},
      "configuration": {"properties": {
        "tarn.autoscale.min": "1", "tarn.autoscale.max": "3",
        "tarn.autoscale.target_in_flight": "2", "tarn.autoscale.stable_window_secs": "10",
        "tarn.autoscale.panic_window_secs": "2", "tarn.autoscale.scale_down_delay_secs": "20"
      }}}]})");
}

class ManagerAutoscaleTest : public ManagerTest {
 protected:
  std::vector<std::string> Autoscales() {
    std::vector<std::string> out;
    StatusOr<std::vector<service::Event>> events = manager_->Events("alice", "s");
    for (const service::Event& e : *events) {
      if (e.type == "AUTOSCALE") out.push_back(e.message);
    }
    return out;
  }
  int64_t Count() { return manager_->Get("alice", "s")->components[0].instances.size(); }
  int64_t Stored() {
    return json::parse(
        store_->GetAssembly("alice", "s")->spec_json)["components"][0]["number_of_containers"];
  }
};

TEST_F(ManagerAutoscaleTest, UpUnderABurstThenDownOneAtATimeAfterTheDelay) {
  ASSERT_TRUE(Launch(Serving()).ok());
  Started("alice/s/srv-0");
  ASSERT_EQ(Instance("s", "srv-0").state, "READY");
  // No reading yet: nothing decided, whatever the time.
  Advance(seconds(4));
  EXPECT_TRUE(Autoscales().empty());
  ASSERT_TRUE(manager_->NextDeadline().has_value());
  EXPECT_LE(*manager_->NextDeadline(), clock_.Now() + seconds(2)) << "the next decision is due";

  // 5 in flight on one replica: 3 wanted (300%): panic, up to max at once.
  in_flight_["alice/s/srv-0"] = 5;
  Advance(seconds(2));
  ASSERT_EQ(Autoscales().size(), 1u);
  EXPECT_NE(Autoscales()[0].find("1 -> 3"), std::string::npos) << Autoscales()[0];
  EXPECT_NE(Autoscales()[0].find("panic mode"), std::string::npos) << Autoscales()[0];
  EXPECT_EQ(Stored(), 3);
  EXPECT_EQ(backend_.launches,
            (std::vector<std::string>{"alice/s/srv-0", "alice/s/srv-1", "alice/s/srv-2"}));
  Started("alice/s/srv-1");
  Started("alice/s/srv-2");

  // The load goes away. Panic mode holds 3 for its 10 s stable window; 20 s of delay after
  // that, one replica goes.
  in_flight_["alice/s/srv-0"] = 0;
  in_flight_["alice/s/srv-1"] = 0;
  in_flight_["alice/s/srv-2"] = 0;
  for (int k = 0; k < 8; ++k) Advance(seconds(2));
  EXPECT_EQ(Autoscales().size(), 1u) << "held by the delay: " << Autoscales().back();
  for (int k = 0; k < 8 && Autoscales().size() == 1; ++k) Advance(seconds(2));
  ASSERT_EQ(Autoscales().size(), 2u);
  EXPECT_NE(Autoscales()[1].find("3 -> 2"), std::string::npos) << Autoscales()[1];
  EXPECT_EQ(backend_.stops, (std::vector<std::string>{"alice/s/srv-2"}));
  // While srv-2 drains, nothing more goes.
  for (int k = 0; k < 5; ++k) Advance(seconds(2));
  EXPECT_EQ(Autoscales().size(), 2u);
  EXPECT_EQ(backend_.stops.size(), 1u);
  Exited("alice/s/srv-2", 143);
  Advance(seconds(2));
  std::vector<std::string> said = Autoscales();
  ASSERT_EQ(said.size(), 3u);
  EXPECT_NE(said[2].find("2 -> 1"), std::string::npos) << said[2];
  Exited("alice/s/srv-1", 143);
  // Never below min.
  for (int k = 0; k < 30; ++k) Advance(seconds(2));
  EXPECT_EQ(Autoscales().size(), 3u);
  EXPECT_EQ(Count(), 1);
  EXPECT_EQ(Stored(), 1);
  EXPECT_EQ(State("s"), "STABLE");
}

TEST_F(ManagerAutoscaleTest, FlexIsHeldToTheBoundsAndTheCountSurvivesARestart) {
  ASSERT_TRUE(Launch(Serving()).ok());
  Started("alice/s/srv-0");
  auto refused = manager_->Flex("alice", "s", "srv", 4);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("autoscales from 1 to 3"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(manager_->Flex("alice", "s", "srv", 0).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(manager_->Flex("alice", "s", "srv", 2).ok());
  in_flight_["alice/s/srv-0"] = 8;
  Started("alice/s/srv-1");
  in_flight_["alice/s/srv-1"] = 8;
  Advance(seconds(2));
  ASSERT_EQ(Autoscales().size(), 1u);
  EXPECT_NE(Autoscales()[0].find("2 -> 3"), std::string::npos) << Autoscales()[0];
  RestartServer();
  EXPECT_EQ(Count(), 3);
  EXPECT_EQ(Stored(), 3);
}

}  // namespace
}  // namespace tarn::service::testing_manager
