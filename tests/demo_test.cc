// The README's first command, CI-sized: examples/fashion-mnist/demo.py runs the Fashion-MNIST
// assembly on a real tarn server (2 ps, 2 workers, 2 serving replicas as containers), one
// epoch, and must end with the served model answering the whole test set at >= 0.85 through
// the REST API while a client running all along saw no error. Needs root.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/subprocess.h"
#include "common/temp_dir.h"
#include "tarn_process.h"

namespace {

using namespace std::chrono_literals;

TEST(DemoTest, TheFashionMnistAssemblyTrainsServesAndAnswersTheTestSet) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (tarn server starts containers)";
  tarn::TempDir dir("tarn-demo-test");
  std::string range;
  const int lock = tarn::testing::LockAddressRange(&range);
  ASSERT_GE(lock, 0) << "no free test address range";
  const std::string config = dir.path() + "/server.json";
  std::ofstream(config) << nlohmann::json{
      {"nodes", {{{"name", "local"}, {"vcores", 8}, {"memory_mb", 12288}}}},
      {"address_range", range}};
  auto run = tarn::RunCommand({"/usr/bin/python3", TARN_SOURCE_DIR "/examples/fashion-mnist/demo.py",
                               "--tarn", TARN_BINARY, "--config", config, "--epochs", "1",
                               "--min-accuracy", "0.85", "--timeout", "600"},
                              700s);
  ::close(lock);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->exit_code, 0) << run->out << run->err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run->out, m,
                                std::regex(R"(served version (\d+): (\d+)/10000 correct)")))
      << run->out;
  EXPECT_GE(std::stoi(m[2]), 8500) << run->out;
  EXPECT_NE(run->out.find(", 0 errors,"), std::string::npos) << run->out;
  EXPECT_NE(run->out.find("Successfully destroyed service fmnist"), std::string::npos)
      << run->out;
}

}  // namespace
