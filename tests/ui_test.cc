// The dashboard in a real headless Chromium (web/test/ui_test.mjs, driven by playwright-core
// through Debian's binary) against a real `tarn server` with real instances: log in with a
// token (and, as a second user, by `tarn ui`'s one-time URL), launch the sleeper from the page and
// see it STABLE, flex it to 3, follow an instance's log and see a line it writes after the page
// opened, search it, a second user who sees nothing of the first's, destroy, log out; on a
// small Fashion-MNIST assembly, the training curves gain points, versions appear on the
// timeline and the serving replicas switch to them; and for a 1,000-instance assembly every
// answer behind the page stays bounded, and its instances page. Screenshots
// of each page go to build/.../ui-screenshots. Needs root (containers), the built dashboard
// (scripts/web), Node and Chromium (scripts/setup installs them); without them it skips saying why.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/subprocess.h"
#include "server_process.h"
#include "tarn_process.h"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST(UiTest, TheDashboardLaunchesFlexesFollowsLogsAndShowsEachUserOnlyTheirs) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (containers)";
  const std::string web = TARN_SOURCE_DIR "/web";
  if (!Exists(web + "/dist/index.html")) {
    GTEST_SKIP() << "the dashboard is not built (scripts/web; scripts/setup runs it)";
  }
  if (!Exists(web + "/node_modules/playwright-core")) {
    GTEST_SKIP() << "playwright-core is not installed in web/ (scripts/web)";
  }
  // playwright-core 1.65 needs Node.js 20 or later (Debian 12's own is 18).
  auto node = tarn::RunCommand({"node", "--version"}, 10s);
  if (!node.ok() || !node->success()) GTEST_SKIP() << "no Node.js (node) on PATH";
  if (std::atoi(node->out.c_str() + (node->out.rfind('v', 0) == 0 ? 1 : 0)) < 20) {
    GTEST_SKIP() << "playwright-core needs Node.js >= 20; this machine's is " << node->out;
  }
  if (!Exists("/usr/bin/chromium-headless-shell") && !Exists("/usr/bin/chromium")) {
    GTEST_SKIP() << "no Chromium (Debian's chromium-headless-shell; scripts/setup installs it)";
  }
  const std::string data = "/usr/share/datasets/fashion-mnist";
  if (!Exists(data + "/t10k-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "no Fashion-MNIST in " << data << " (dataset-fashion-mnist; scripts/setup)";
  }
  char tmpl[] = "/tmp/tarn-ui-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  ::chmod(dir.c_str(), 0711);
  std::string range;
  const int range_lock = tarn::testing::LockAddressRange(&range);
  ASSERT_GE(range_lock, 0) << "no free test address range";
  const json config = {
      {"probe_interval_ms", 100},
      {"metrics", {{"scrape_interval_ms", 1000}, {"scrape_timeout_ms", 1000}}},
      {"address_range", range},
      {"dns_upstream", json::array()},
      {"nodes",
       json::array({{{"name", "node-1"}, {"vcores", 1100}, {"memory_mb", 262144}, {"gpus", 0}}})}};
  std::ofstream(dir + "/config.json") << config.dump(2);
  // A sleeper that says something every half second ("tick N"), for the live log.
  const json sleeper = {
      {"name", "uisleeper"},
      {"version", "1.0"},
      {"components",
       json::array({{{"name", "sleeper"},
                     {"number_of_containers", 1},
                     {"launch_command",
                      "sh -c 'i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.5; done'"},
                     {"resource", {{"cpus", 1}, {"memory", "64"}}}}})}};
  std::ofstream(dir + "/uisleeper.json") << sleeper.dump(2);
  ::chmod((dir + "/uisleeper.json").c_str(), 0644);
  // Fashion-MNIST, sized for the test: one tarn-train process (an MLP, exporting a version
  // every 3 s and at each epoch's end, for longer than the test looks) and two tarn-serve
  // replicas serving each new version; the worker's metrics port is what the page plots.
  const json fmnist = {
      {"name", "uifmnist"},
      {"version", "1.0"},
      {"configuration", {{"env", {{"OMP_NUM_THREADS", "1"}, {"OPENBLAS_NUM_THREADS", "1"}}}}},
      {"components",
       json::array({{{"name", "trainer"},
                     {"number_of_containers", 1},
                     {"launch_command",
                      "tarn-train --model mlp --data_dir " + data +
                          " --export_base $TARN_SHARED_DIR/models --model_name fmnist --epochs 100 "
                          "--export_every_secs 3 --keep_versions 4 --threads 1 --log_every_secs 1"},
                     {"resource", {{"cpus", 1}, {"memory", "1Gi"}}},
                     {"configuration", {{"properties", {{"tarn.ports", "metrics:9090"}}}}}},
                    {{"name", "serving"},
                     {"number_of_containers", 2},
                     {"launch_command",
                      "tarn-serve --rest_api_port $TARN_PORT_HTTP --model_name fmnist "
                      "--model_base_path $TARN_SHARED_DIR/models/fmnist "
                      "--file_system_poll_wait_seconds 1"},
                     {"resource", {{"cpus", 1}, {"memory", "512"}}},
                     {"configuration", {{"properties", {{"tarn.ports", "http:8501"}}}}}}})}};
  std::ofstream(dir + "/uifmnist.json") << fmnist.dump(2);
  ::chmod((dir + "/uifmnist.json").c_str(), 0644);
  // 1,000 instances, to check that what the page asks for stays bounded and pages.
  const json many = {
      {"name", "uimany"},
      {"version", "1.0"},
      {"components", json::array({{{"name", "many"},
                                   {"number_of_containers", 1000},
                                   {"launch_command", "sleep 3600"},
                                   {"resource", {{"cpus", 1}, {"memory", "64"}}}}})}};
  std::ofstream(dir + "/uimany.json") << many.dump(2);
  ::chmod((dir + "/uimany.json").c_str(), 0644);

  tarn::testing::ServerProcess server(dir + "/state", dir + "/config.json");
  ASSERT_TRUE(server.Start()) << server.log();
  const std::string alice = server.Token("alice");
  ASSERT_FALSE(alice.empty());
  // Bob logs in as `tarn ui` has him do: by a one-time URL, made over the socket.
  auto ui =
      tarn::testing::RunTarn({"ui", "--as", "bob", "--socket", server.socket()}, {}, "/tmp", 30s);
  ASSERT_EQ(ui.exit_code, 0) << ui.err;
  const std::string bob_url = ui.out.substr(0, ui.out.find('\n'));
  const std::string origin = "http://127.0.0.1:" + std::to_string(server.port());
  ASSERT_EQ(bob_url.rfind(origin + "/ui/login?code=", 0), 0u) << ui.out;
  EXPECT_NE(ui.err.find("as bob; it is good once, for a minute"), std::string::npos) << ui.err;
  const std::string shots = std::string(TARN_BINARY_DIR) + "/ui-screenshots";
  auto run = tarn::RunCommand(
      {"node", web + "/test/ui_test.mjs", origin, alice, bob_url, dir + "/uisleeper.json",
       dir + "/uifmnist.json", dir + "/uimany.json", shots},
      240s);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  std::cout << run->out;  // the browser's checks, one line each
  EXPECT_EQ(run->exit_code, 0) << run->out << run->err << "\nserver log:\n" << server.log();
  EXPECT_NE(run->out.find("ok: logged in"), std::string::npos) << run->out;
  for (const char* shot :
       {"login", "overview", "assembly", "log", "overview-phone", "training", "serving", "many"}) {
    EXPECT_TRUE(Exists(shots + "/" + shot + ".png")) << shot;
  }
  // Whatever the page left behind goes.
  for (const std::string name : {"uisleeper", "uifmnist", "uimany"}) {
    tarn::testing::CallApi(server, "DELETE", "/app/v1/services/" + name);
    tarn::testing::WaitFor(name + " gone", 120s, [&] {
      return tarn::testing::CallApi(server, "GET", "/app/v1/services/" + name).status == 404;
    });
  }
  EXPECT_TRUE(server.Terminate()) << server.log();
  std::filesystem::remove_all(dir);
  ::close(range_lock);
}

}  // namespace
