// The autoscaling rule on a FakeClock: tolerance, the windows, panic mode, the scale-down
// delay, one replica at a time, and the bounds.
#include "service/autoscaler.h"

#include <gtest/gtest.h>

namespace tarn::service {
namespace {

using std::chrono::seconds;

spec::Autoscale Spec() {
  spec::Autoscale s;
  s.min = 1;
  s.max = 10;
  s.target_in_flight = 2;
  s.tolerance = 0.1;
  s.stable_window_secs = 60;
  s.panic_window_secs = 6;
  s.panic_threshold = 2.0;
  s.scale_down_delay_secs = 300;
  return s;
}

// `in_flight` read every 2 s for `secs` seconds (as the manager does); the last decision.
Autoscaler::Decision Feed(Autoscaler& a, FakeClock& clock, double in_flight, int secs,
                          int64_t current, int64_t ready) {
  Autoscaler::Decision d;
  for (int t = 0; t < secs; t += 2) {
    clock.Advance(seconds(2));
    a.Observe(in_flight);
    d = a.Decide(current, ready);
  }
  return d;
}

TEST(AutoscalerTest, NoReadingsKeepTheCountWithinBounds) {
  FakeClock clock;
  Autoscaler a(Spec(), clock);
  EXPECT_EQ(a.Decide(3, 3).desired, 3);
  EXPECT_FALSE(a.Decide(3, 3).has_readings);
  EXPECT_EQ(a.Decide(0, 0).desired, 1);     // min
  EXPECT_EQ(a.Decide(12, 12).desired, 10);  // max
}

TEST(AutoscalerTest, WithinTheToleranceNothingChanges) {
  FakeClock clock;
  Autoscaler a(Spec(), clock);
  // 2 replicas x target 2 = 4; 4.3 is 7.5% over: held.
  Autoscaler::Decision d = Feed(a, clock, 4.3, 60, 2, 2);
  EXPECT_EQ(d.desired, 2);
  EXPECT_NE(d.held.find("tolerance"), std::string::npos) << d.held;
  // 4.6 is 15% over: ceil(4.6 / 2) = 3.
  FakeClock clock2;
  Autoscaler b(Spec(), clock2);
  d = Feed(b, clock2, 4.6, 60, 2, 2);
  EXPECT_EQ(d.wanted, 3);
  EXPECT_EQ(d.desired, 3);
  EXPECT_TRUE(d.held.empty()) << d.held;
}

TEST(AutoscalerTest, UpAtOnceToWhatTheStableWindowWantsBoundedByMax) {
  FakeClock clock;
  Autoscaler a(Spec(), clock);
  // 2 replicas, load 5: wants 3 (150% of the ready ones, under the 200% panic threshold):
  // up at once.
  clock.Advance(seconds(2));
  a.Observe(5);
  Autoscaler::Decision d = a.Decide(2, 2);
  EXPECT_FALSE(d.panic);
  EXPECT_EQ(d.desired, 3);
  // A load of 100 wants 50; max is 10.
  d = Feed(a, clock, 100, 60, 2, 2);
  EXPECT_EQ(d.wanted, 50);
  EXPECT_EQ(d.desired, 10);
  EXPECT_NE(d.held.find("tarn.autoscale.max 10"), std::string::npos) << d.held;
}

TEST(AutoscalerTest, TheStableWindowForgetsOldReadings) {
  FakeClock clock;
  Autoscaler a(Spec(), clock);
  Feed(a, clock, 8, 60, 4, 4);  // 4 replicas, exactly on target
  // Load 4 for 30 s: the 60 s mean is 6 (3 wanted); after 60 s it is 4 (2 wanted).
  Autoscaler::Decision d = Feed(a, clock, 4, 30, 4, 4);
  EXPECT_NEAR(d.stable_in_flight, 6, 0.3);
  d = Feed(a, clock, 4, 30, 4, 4);
  EXPECT_DOUBLE_EQ(d.stable_in_flight, 4);
  EXPECT_EQ(d.wanted, 2);
}

TEST(AutoscalerTest, DownOnlyAfterTheDelayAndOneReplicaAtATimeNeverBelowMin) {
  FakeClock clock;
  Autoscaler a(Spec(), clock);
  Feed(a, clock, 8, 60, 4, 4);  // 4 wanted
  // The load goes away: the stable window soon wants 1, but 4 was wanted within 300 s.
  Autoscaler::Decision d = Feed(a, clock, 0, 120, 4, 4);
  EXPECT_EQ(d.wanted, 0);
  EXPECT_EQ(d.desired, 4);
  EXPECT_NE(d.held.find("300 s scale-down delay"), std::string::npos) << d.held;
  // 4 was last wanted about 76 s in (the 60 s mean above 6); 300 s after that the count goes
  // down, one replica per decision, to min.
  d = Feed(a, clock, 0, 240, 4, 4);
  EXPECT_EQ(d.desired, 3);
  EXPECT_EQ(a.Decide(3, 3).desired, 2);
  EXPECT_EQ(a.Decide(2, 2).desired, 1);
  d = a.Decide(1, 1);
  EXPECT_EQ(d.desired, 1);
  EXPECT_NE(d.Describe().find("1 -> 1"), std::string::npos) << d.Describe();
}

TEST(AutoscalerTest, ZeroDelayScalesDownAtTheNextDecision) {
  spec::Autoscale s = Spec();
  s.scale_down_delay_secs = 0;
  s.stable_window_secs = 6;
  FakeClock clock;
  Autoscaler a(s, clock);
  Feed(a, clock, 8, 6, 4, 4);
  EXPECT_EQ(Feed(a, clock, 0, 6, 4, 4).desired, 3);
}

TEST(AutoscalerTest, PanicFollowsTheShortWindowAndNeverScalesDownUntilAStableWindowPasses) {
  FakeClock clock;
  Autoscaler a(Spec(), clock);
  Feed(a, clock, 2, 60, 1, 1);  // 1 replica on target
  // A burst to 10 in flight: the 6 s window's mean (2, 2, 10: 4.67) wants 3, 300% of the 1
  // ready -> panic, 3 at once, while the 60 s mean (2.27) would want only 2.
  clock.Advance(seconds(2));
  a.Observe(10);
  Autoscaler::Decision d = a.Decide(1, 1);
  EXPECT_TRUE(d.panic);
  EXPECT_EQ(d.wanted, 3);
  EXPECT_EQ(d.desired, 3);
  EXPECT_NE(d.Describe().find("panic mode"), std::string::npos);
  // The burst ends: in panic the count does not go down.
  d = Feed(a, clock, 0, 20, 3, 3);
  EXPECT_TRUE(d.panic);
  EXPECT_EQ(d.desired, 3);
  EXPECT_NE(d.held.find("no scale-down in panic mode"), std::string::npos) << d.held;
  // 60 s after the panic condition last held, panic mode ends (the delay still holds 3).
  d = Feed(a, clock, 0, 42, 3, 3);
  EXPECT_FALSE(d.panic);
  EXPECT_EQ(d.desired, 3);
}

TEST(AutoscalerTest, PanicCountsReadyReplicasNotThoseStillStarting) {
  FakeClock clock;
  Autoscaler a(Spec(), clock);
  // 3 replicas asked for, 1 ready, 6 in flight: 3 wanted = 300% of the ready one: panic,
  // and it stays at 3 (nothing more wanted).
  clock.Advance(seconds(2));
  a.Observe(6);
  Autoscaler::Decision d = a.Decide(3, 1);
  EXPECT_TRUE(d.panic);
  EXPECT_EQ(d.desired, 3);
}

}  // namespace
}  // namespace tarn::service
