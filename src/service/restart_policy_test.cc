#include "service/restart_policy.h"

#include <gtest/gtest.h>

namespace tarn::service {
namespace {

using namespace std::chrono_literals;
using Action = RestartDecision::Action;

TEST(InstanceRestarts, BackoffDoublesToFiveMinutesAndResetsAfterHealth) {
  FakeClock clock;
  InstanceRestarts r(spec::RestartPolicy::kAlways, {}, clock);
  std::vector<int64_t> delays;
  for (int i = 0; i < 12; ++i) {
    r.Started();
    clock.Advance(1s);
    RestartDecision d = r.Exited(false, "exited with code 1");
    ASSERT_EQ(d.action, Action::kRestart);
    delays.push_back(std::chrono::duration_cast<std::chrono::seconds>(d.delay).count());
    clock.Advance(d.delay);
  }
  EXPECT_EQ(delays, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300}));
  EXPECT_EQ(r.restarts(), 12);
  // Ten minutes of health: the next failure starts again at 1 s.
  r.Started();
  clock.Advance(10min);
  RestartDecision d = r.Exited(false, "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(d.delay, Duration(1s));
  EXPECT_EQ(d.reason, "killed by signal 9 (SIGKILL); restarting in 1 s");
}

TEST(InstanceRestarts, PoliciesDecideWhatAnExitMeans) {
  FakeClock clock;
  InstanceRestarts never(spec::RestartPolicy::kNever, {}, clock);
  never.Started();
  EXPECT_EQ(never.Exited(true, "exited with code 0").action, Action::kSucceeded);
  never.Started();
  RestartDecision d = never.Exited(false, "exited with code 2");
  EXPECT_EQ(d.action, Action::kFailed);
  EXPECT_EQ(d.reason, "exited with code 2 (restart_policy NEVER: not restarted)");

  InstanceRestarts on_failure(spec::RestartPolicy::kOnFailure, {}, clock);
  on_failure.Started();
  EXPECT_EQ(on_failure.Exited(false, "x").action, Action::kRestart);
  on_failure.Started();
  EXPECT_EQ(on_failure.Exited(true, "exited with code 0").action, Action::kSucceeded);

  InstanceRestarts always(spec::RestartPolicy::kAlways, {}, clock);
  always.Started();
  EXPECT_EQ(always.Exited(true, "exited with code 0").action, Action::kRestart);
}

TEST(InstanceRestarts, RetryMaxAndFixedIntervalAsYarn) {
  FakeClock clock;
  RestartOptions o = RestartOptions::FromProperties(
      {{"yarn.service.container-failure.retry.max", "2"},
       {"yarn.service.container-failure.retry-interval-ms", "30000"}});
  InstanceRestarts r(spec::RestartPolicy::kAlways, o, clock);
  for (int i = 0; i < 2; ++i) {
    r.Started();
    RestartDecision d = r.Exited(false, "exited with code 1");
    ASSERT_EQ(d.action, Action::kRestart);
    EXPECT_EQ(d.delay, Duration(30s));
    clock.Advance(30s);
  }
  r.Started();
  RestartDecision d = r.Exited(false, "exited with code 1");
  EXPECT_EQ(d.action, Action::kFailed);
  EXPECT_EQ(d.reason,
            "exited with code 1; not restarted: it failed 3 times and "
            "yarn.service.container-failure.retry.max is 2");
}

TEST(InstanceRestarts, OldFailuresOutsideTheValidityIntervalAreForgotten) {
  FakeClock clock;
  RestartOptions o = RestartOptions::FromProperties(
      {{"yarn.service.container-failure.retry.max", "1"},
       {"yarn.service.container-failure.validity-interval-ms", "60000"}});
  InstanceRestarts r(spec::RestartPolicy::kAlways, o, clock);
  r.Started();
  EXPECT_EQ(r.Exited(false, "x").action, Action::kRestart);
  clock.Advance(2min);  // the first failure is now too old to count
  r.Started();
  EXPECT_EQ(r.Exited(false, "x").action, Action::kRestart);
  clock.Advance(10s);
  r.Started();
  EXPECT_EQ(r.Exited(false, "x").action, Action::kFailed);
}

TEST(ComponentFailures, ThresholdFailsTheComponentWithinTheWindow) {
  FakeClock clock;
  RestartOptions o = RestartOptions::FromProperties(
      {{"yarn.service.container-failure-per-component.threshold", "3"},
       {"yarn.service.failure-count-reset.window", "3600"}});
  ComponentFailures f(o, clock);
  EXPECT_EQ(f.Failed("worker"), "");
  EXPECT_EQ(f.Failed("worker"), "");
  clock.Advance(2h);  // both are outside the window now
  EXPECT_EQ(f.Failed("worker"), "");
  EXPECT_EQ(f.count(), 1);
  EXPECT_EQ(f.Failed("worker"), "");
  EXPECT_EQ(f.Failed("worker"),
            "component worker failed 3 times, reaching "
            "yarn.service.container-failure-per-component.threshold (3)");
}

}  // namespace
}  // namespace tarn::service
