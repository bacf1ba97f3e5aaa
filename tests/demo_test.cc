// The README's first command, CI-sized: examples/fashion-mnist/demo.py runs the Fashion-MNIST
// assembly on a real tarn server (2 ps, 2 workers, 2 serving replicas as containers), two
// epochs, and must end with the served model answering the whole test set at >= 0.85 through
// the REST API while a client running all along saw no error. The plain run is also watched
// in the dashboard (demo.py --ui-check: web/test/ui_fmnist.mjs in headless Chromium): the
// training curves gain points, versions reach the timeline with their accuracy, and both
// replicas switch to a newer version. Needs root.
//
// Two epochs, not one: one epoch of asynchronous training lands too near the bar to be a
// test. Measured: 0.8645 alone, and 0.8496 in CI, where the other tests beside it make one
// worker lag (its stale pushes count less), on 2026-12-02.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/subprocess.h"
#include "common/temp_dir.h"
#include "dashboard_browser.h"
#include "tarn_process.h"

namespace {

using namespace std::chrono_literals;

// Release builds only (tests/CMakeLists.txt): workloads built with ASan hold far more memory
// (shadow, quarantine) than the example assembly's limits allow (1-2 GiB per instance), and
// the kernel OOM-kills them, which says nothing about tarn.

// demo.py with `extra` arguments, on a server of its own address range; its result.
tarn::StatusOr<tarn::CommandResult> RunDemo(std::vector<std::string> extra) {
  tarn::TempDir dir("tarn-demo-test");
  std::string range;
  const int lock = tarn::testing::LockAddressRange(&range);
  if (lock < 0) return tarn::UnavailableError("no free test address range");
  const std::string config = dir.path() + "/server.json";
  std::ofstream(config) << nlohmann::json{
      {"nodes", {{{"name", "local"}, {"vcores", 8}, {"memory_mb", 12288}}}},
      {"metrics", {{"scrape_interval_ms", 2000}}},
      {"address_range", range}};
  std::vector<std::string> args = {
      "/usr/bin/python3", TARN_SOURCE_DIR "/examples/fashion-mnist/demo.py",
      "--tarn",           TARN_BINARY,
      "--config",         config,
      "--min-accuracy",   "0.85",
      "--timeout",        "700"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto run = tarn::RunCommand(args, 800s);
  ::close(lock);
  return run;
}

// How many of the 10,000 test images the served model answered right, from demo.py's
// "served version V: N/10000 correct" line; -1 without one.
int ServedCorrect(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"(served version (\d+): (\d+)/10000 correct)"))) {
    return -1;
  }
  return std::stoi(m[2]);
}

TEST(DemoTest, TheFashionMnistAssemblyTrainsServesAndAnswersTheTestSet) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (tarn server starts containers)";
  std::vector<std::string> args = {"--epochs", "2"};
  const std::string missing = tarn::testing::DashboardBrowserMissing(TARN_SOURCE_DIR "/web");
  if (missing.empty()) {
    args.insert(args.end(), {"--ui-check", TARN_BINARY_DIR "/ui-screenshots"});
  } else {
    std::cout << "the dashboard's check of this run is skipped: " << missing << "\n";
  }
  auto run = RunDemo(args);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->exit_code, 0) << run->out << run->err;
  EXPECT_GE(ServedCorrect(run->out), 8500) << run->out;
  EXPECT_NE(run->out.find(", 0 errors,"), std::string::npos) << run->out;
  EXPECT_NE(run->out.find("Successfully destroyed service fmnist"), std::string::npos) << run->out;
  if (missing.empty()) {
    for (const char* line : {"ui: ok: the loss curve gains points",
                             "ui: ok: the replicas switch to a newer version, all of them",
                             "ui: ok: an exported version has its accuracy on the timeline",
                             "ui: PASS: the dashboard's checks (all held)"}) {
      EXPECT_NE(run->out.find(line), std::string::npos) << line << " missing from:\n" << run->out;
    }
    EXPECT_EQ(run->out.find("ui: FAILED"), std::string::npos) << run->out;
  }
}

// The same assembly from container images (assembly-docker.json: localhost/tarn-fmnist,
// which scripts/images makes from the release build before the release tests run): every
// instance a podman container, trained and served to the same accuracy.
TEST(DemoTest, TheFashionMnistAssemblyFromImagesTrainsAndServes) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (tarn server starts containers)";
  auto image = tarn::RunCommand({"podman", "image", "exists", "localhost/tarn-fmnist:latest"}, 60s);
  if (!image.ok() || !image->success()) {
    GTEST_SKIP() << "no image localhost/tarn-fmnist:latest (scripts/images makes it; "
                    "scripts/test does before the release tests)";
  }
  auto run = RunDemo({"--epochs", "2", "--assembly",
                      TARN_SOURCE_DIR "/examples/fashion-mnist/assembly-docker.json"});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->exit_code, 0) << run->out << run->err;
  EXPECT_GE(ServedCorrect(run->out), 8500) << run->out;
  EXPECT_NE(run->out.find("Successfully destroyed service fmnist"), std::string::npos) << run->out;
}

// Issue 8's faults, one at a time while the assembly trains and serves: kill -9 of a serving
// replica, a ps, the chief, and tarn server itself. demo.py checks that each comes back by
// its policy (and nothing else restarts, and no instance runs twice), that the chief restores
// its last checkpoint, and that a client retrying once on the other replica when a
// connection is refused or reset sees no failed request.
TEST(DemoTest, KillNineOfAReplicaAPsTheChiefAndTheServerLosesNoRequest) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (tarn server starts containers)";
  auto run = RunDemo({"--epochs", "3", "--faults"});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->exit_code, 0) << run->out << run->err;
  for (const char* line :
       {"kill -9 serving-0", "kill -9 ps-1", "kill -9 worker-0", "kill -9 tarn server",
        "serving-0 is back", "ps-1 is back", "worker-0 is back", ", 0 errors,", "PASS"}) {
    EXPECT_NE(run->out.find(line), std::string::npos) << line << " missing from:\n" << run->out;
  }
  EXPECT_EQ(run->out.find("<- WRONG"), std::string::npos) << run->out;
}

}  // namespace
