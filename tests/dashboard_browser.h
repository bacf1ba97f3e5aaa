// Whether this machine can run the dashboard's browser checks (web/test/*.mjs): the built
// dashboard, playwright-core in web/, Node.js 20 or later, and Debian's Chromium. Used by
// UiTest, which skips without them, and DemoTest, which then runs the demo without its
// dashboard check and says so.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "common/subprocess.h"

namespace tarn::testing {

// Empty when the browser checks can run here; else why not.
inline std::string DashboardBrowserMissing(const std::string& web) {
  using namespace std::chrono_literals;
  auto exists = [](const std::string& path) { return ::access(path.c_str(), F_OK) == 0; };
  if (!exists(web + "/dist/index.html")) {
    return "the dashboard is not built (scripts/web; scripts/setup runs it)";
  }
  if (!exists(web + "/node_modules/playwright-core")) {
    return "playwright-core is not installed in web/ (scripts/web)";
  }
  // playwright-core 1.65 needs Node.js 20 or later (Debian 12's own is 18).
  auto node = tarn::RunCommand({"node", "--version"}, 10s);
  if (!node.ok() || !node->success()) return "no Node.js (node) on PATH";
  if (std::atoi(node->out.c_str() + (node->out.rfind('v', 0) == 0 ? 1 : 0)) < 20) {
    return "playwright-core needs Node.js >= 20; this machine's is " + node->out;
  }
  if (!exists("/usr/bin/chromium-headless-shell") && !exists("/usr/bin/chromium")) {
    return "no Chromium (Debian's chromium-headless-shell; scripts/setup installs it)";
  }
  return "";
}

}  // namespace tarn::testing
