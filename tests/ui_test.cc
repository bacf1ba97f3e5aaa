// The dashboard in a real headless Chromium (web/test/ui_test.mjs, driven by playwright-core
// through Debian's binary) against a real `tarn server` with real instances: log in with a
// token (and, as a second user, by `tarn ui`'s one-time URL), launch the sleeper from the page and
// see it STABLE, flex it to 3, follow an instance's log and see a line it writes after the page
// opened, search it, a second user who sees nothing of the first's, the server lost (the
// browser taken offline) and found again, destroy, log out; and for a 1,000-instance
// assembly every answer behind the page stays bounded, and its instances page. The training
// and serving pages are checked on the Fashion-MNIST example assembly itself, in DemoTest
// (demo.py --ui-check). Screenshots
// of each page go to build/.../ui-screenshots. Needs root (containers), the built dashboard
// (scripts/web), Node and Chromium (scripts/setup installs them); without them it skips saying why.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/subprocess.h"
#include "dashboard_browser.h"
#include "server_process.h"
#include "tarn_process.h"

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST(UiTest, TheDashboardLaunchesFlexesFollowsLogsAndShowsEachUserOnlyTheirs) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (containers)";
  const std::string web = TARN_SOURCE_DIR "/web";
  if (const std::string missing = tarn::testing::DashboardBrowserMissing(web); !missing.empty()) {
    GTEST_SKIP() << missing;
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
  auto run = tarn::RunCommand({"node", web + "/test/ui_test.mjs", origin, alice, bob_url,
                               dir + "/uisleeper.json", dir + "/uimany.json", shots},
                              240s);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  std::cout << run->out;  // the browser's checks, one line each
  EXPECT_EQ(run->exit_code, 0) << run->out << run->err << "\nserver log:\n" << server.log();
  EXPECT_NE(run->out.find("ok: logged in"), std::string::npos) << run->out;
  for (const char* shot : {"login", "overview", "assembly", "log", "overview-phone", "many"}) {
    EXPECT_TRUE(Exists(shots + "/" + shot + ".png")) << shot;
  }
  // Whatever the page left behind goes.
  for (const std::string name : {"uisleeper", "uimany"}) {
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
