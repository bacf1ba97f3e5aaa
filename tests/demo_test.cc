// The README's first command, CI-sized: examples/fashion-mnist/demo.py runs the Fashion-MNIST
// assembly on a real tarn server (2 ps, 2 workers, 2 serving replicas as containers) for one
// or two epochs (demo.py compresses the learning-rate decay to them) and must end with the
// served model answering the whole test set above a bar through the REST API while a client
// running all along saw no error. The plain run is also watched in the dashboard (demo.py
// --ui-check: web/test/ui_fmnist.mjs in headless Chromium): the training curves gain points,
// versions reach the timeline with their accuracy, and both replicas switch to a newer
// version. Needs root.
//
// The bars, from cnn_bn measured on 2026-12-07: one epoch the demo's way reached 0.8871-0.8967
// over seeds 1-5 (0.8975 from images here); two epochs in this test 0.9084-0.9121 over three
// runs. In CI the tests beside it make one worker lag (its stale pushes count less), which
// cost the old `cnn` 0.015 in one epoch (0.8645 alone, 0.8496 in CI); each bar is the worst
// run less that and about 0.007 more for seeds: 0.865 for one epoch, 0.885 for two.
//
// The dashboard's run trains two epochs, not one: one epoch lasts about 10 s, and its two
// versions (the first export and the last) come and go before the page has seen the replicas
// switch. Both runs export every 4 s, so that they give the replicas several versions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

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
tarn::StatusOr<tarn::CommandResult> RunDemo(std::vector<std::string> extra,
                                            const char* min_accuracy) {
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
      "--min-accuracy",   min_accuracy,
      "--timeout",        "700"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto run = tarn::RunCommand(args, 800s);
  ::close(lock);
  // The figures a passing run would otherwise keep to itself (the served accuracy, the
  // versions, the time), for the test log.
  if (run.ok()) {
    std::istringstream lines(run->out);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("served version") || line.starts_with("training and serving") ||
          line.starts_with("client during")) {
        std::cout << "demo.py: " << line << "\n";
      }
    }
  }
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
  std::vector<std::string> args = {"--epochs", "2", "--export-every-secs", "4"};
  const std::string missing = tarn::testing::DashboardBrowserMissing(TARN_SOURCE_DIR "/web");
  if (missing.empty()) {
    args.insert(args.end(), {"--ui-check", TARN_BINARY_DIR "/ui-screenshots"});
  } else {
    std::cout << "the dashboard's check of this run is skipped: " << missing << "\n";
  }
  auto run = RunDemo(args, "0.885");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->exit_code, 0) << run->out << run->err;
  EXPECT_GE(ServedCorrect(run->out), 8850) << run->out;
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
// instance a podman container, trained for one epoch (no dashboard watches it) and served.
TEST(DemoTest, TheFashionMnistAssemblyFromImagesTrainsAndServes) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (tarn server starts containers)";
  auto image = tarn::RunCommand({"podman", "image", "exists", "localhost/tarn-fmnist:latest"}, 60s);
  if (!image.ok() || !image->success()) {
    GTEST_SKIP() << "no image localhost/tarn-fmnist:latest (scripts/images makes it; "
                    "scripts/test does before the release tests)";
  }
  auto run = RunDemo({"--epochs", "1", "--export-every-secs", "4", "--assembly",
                      TARN_SOURCE_DIR "/examples/fashion-mnist/assembly-docker.json"},
                     "0.865");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->exit_code, 0) << run->out << run->err;
  EXPECT_GE(ServedCorrect(run->out), 8650) << run->out;
  EXPECT_NE(run->out.find("Successfully destroyed service fmnist"), std::string::npos) << run->out;
}

// Issue 8's faults, one at a time while the assembly trains and serves: kill -9 of a serving
// replica, a ps, the chief, and tarn server itself. demo.py checks that each comes back by
// its policy (and nothing else restarts, and no instance runs twice), that the chief restores
// its last checkpoint, and that a client retrying once on the other replica when a
// connection is refused or reset sees no failed request.
TEST(DemoTest, KillNineOfAReplicaAPsTheChiefAndTheServerLosesNoRequest) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (tarn server starts containers)";
  auto run = RunDemo({"--epochs", "3", "--faults"}, "0.885");
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
