// Runs the real `tarn` binary on the examples and on broken files, and compares what it
// prints with golden files that were written and checked by hand. Nothing here rewrites a
// golden file: a difference is a failure to look at.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/file.h"
#include "tarn_process.h"

namespace {

const std::string kSource = TARN_SOURCE_DIR;

std::string ReadAll(const std::string& path) { return tarn::ReadFileToString(path).value_or(""); }

using tarn::testing::CommandResult;

// Runs tarn with `args` in directory `cwd`, with extra environment entries "K=V".
CommandResult RunTarn(const std::vector<std::string>& args, const std::string& cwd,
                      const std::vector<std::string>& env = {}) {
  return tarn::testing::RunTarn(args, env, cwd);
}

TEST(ValidateTest, AcceptsEveryExample) {
  for (const char* file : {"sleeper/sleeper.json", "sleeper/sleeper.yaml", "httpd/httpd.json",
                           "fashion-mnist/assembly.json"}) {
    CommandResult run = RunTarn({"validate", "--user", "alice", file}, kSource + "/examples");
    EXPECT_EQ(run.exit_code, 0) << file << "\n" << run.err;
    EXPECT_EQ(run.err, "") << file;  // not even a warning
    EXPECT_NE(run.out.find(std::string(file) + ": valid: assembly "), std::string::npos) << run.out;
  }
}

TEST(ValidateTest, SeveralFilesInOneCall) {
  CommandResult run = RunTarn({"validate", "--user", "alice", "sleeper/sleeper.json",
                               "../tests/data/invalid/bad-name.json", "httpd/httpd.json"},
                              kSource + "/examples");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("sleeper/sleeper.json: valid"), std::string::npos);
  EXPECT_NE(run.out.find("httpd/httpd.json: valid"), std::string::npos);
  EXPECT_NE(run.err.find("bad-name.json: name: \"My_Service\" is not a DNS label"),
            std::string::npos)
      << run.err;
}

class InvalidFileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(InvalidFileTest, RejectedWithOneLinePerError) {
  const std::string dir = kSource + "/tests/data/invalid";
  const std::string file = GetParam();
  CommandResult run = RunTarn({"validate", "--user", "alice", file}, dir);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.out, "");
  std::string stem = file.substr(0, file.rfind('.'));
  EXPECT_EQ(run.err, ReadAll(dir + "/" + stem + ".expected"));
}

INSTANTIATE_TEST_SUITE_P(Files, InvalidFileTest,
                         ::testing::Values("bad-name.json", "cycle.json", "unknown-field.json",
                                           "bad-memory.json", "bad-restart-policy.json",
                                           "many-errors.yaml"),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.rfind('.'));
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

TEST(ValidateTest, MissingFileIsAClearError) {
  CommandResult run = RunTarn({"validate", "--user", "alice", "no-such.json"}, "/tmp");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err, "no-such.json: cannot open: No such file or directory\n");
}

TEST(ValidateTest, SyntaxErrorNamesLineAndColumn) {
  char path[] = "/tmp/tarn-syntax-XXXXXX.json";
  int fd = ::mkstemps(path, 5);
  ASSERT_GE(fd, 0);
  std::string text = "{\n  \"name\": \"x\",\n  \"version\": 1,,\n}\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  CommandResult run = RunTarn({"validate", "--user", "alice", path}, "/tmp");
  std::remove(path);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("not valid JSON: parse error at line 3, column 16"), std::string::npos)
      << run.err;
}

TEST(ValidateTest, UsageErrorExitsTwo) {
  CommandResult run = RunTarn({"validate"}, "/tmp");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("FILE is required"), std::string::npos) << run.err;
}

TEST(ValidateTest, UnknownCommandIsNamed) {
  CommandResult run = RunTarn({"lanch", "x.json"}, "/tmp");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(
      run.err,
      "tarn: unknown command \"lanch\" (commands: validate, explain, launch, list, status, "
      "flex, upgrade, stop, start, destroy, logs, nodes, queues, events, whoami, token, audit, ui, "
      "server, run; see tarn "
      "--help)\n");
}

TEST(ExplainTest, MatchesGoldenFiles) {
  struct Case {
    const char* file;
    const char* golden;
  };
  for (const Case& c : {Case{"sleeper/sleeper.json", "sleeper.explain.txt"},
                        Case{"sleeper/sleeper.yaml", "sleeper.explain.txt"},
                        Case{"httpd/httpd.json", "httpd.explain.txt"},
                        Case{"fashion-mnist/assembly.json", "fashion-mnist.explain.txt"}}) {
    CommandResult run = RunTarn({"explain", "--user", "alice", c.file}, kSource + "/examples");
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.out, ReadAll(kSource + "/tests/golden/" + c.golden)) << c.file;
  }
}

TEST(ExplainTest, UserComesFromTarnUserAsADnsLabel) {
  CommandResult run =
      RunTarn({"explain", "sleeper/sleeper.json"}, kSource + "/examples", {"TARN_USER=Bob_Dev"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("sleeper-0.sleeper-service.bob-dev.tarn"), std::string::npos);
}

TEST(ExplainTest, JsonCarriesTfConfigAsTensorFlowReadsIt) {
  CommandResult run =
      RunTarn({"explain", "--user", "alice", "-o", "json", "fashion-mnist/assembly.json"},
              kSource + "/examples");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json plan = nlohmann::json::parse(run.out);
  ASSERT_EQ(plan["instances"].size(), 6u);
  nlohmann::json worker1;
  for (const auto& inst : plan["instances"]) {
    if (inst["component_instance_name"] == "worker-1") worker1 = inst;
  }
  ASSERT_FALSE(worker1.is_null());
  nlohmann::json tf = nlohmann::json::parse(worker1["env"]["TF_CONFIG"].get<std::string>());
  nlohmann::json expected = {
      {"cluster",
       {{"ps", {"ps-0.fmnist.alice.tarn:2222", "ps-1.fmnist.alice.tarn:2222"}},
        {"worker", {"worker-0.fmnist.alice.tarn:2222", "worker-1.fmnist.alice.tarn:2222"}}}},
      {"task", {{"type", "worker"}, {"index", 1}}}};
  EXPECT_EQ(tf, expected);
  EXPECT_EQ(plan["start_order"], nlohmann::json({{"ps", "serving"}, {"worker"}}));
  EXPECT_EQ(plan["gang"], nlohmann::json({"ps", "worker"}));
}

}  // namespace
