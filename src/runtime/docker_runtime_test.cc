// DockerRuntime against a `docker` stub on PATH that records every command line and answers
// as an engine would. (No engine runs on the machines where tests run.)
#include "runtime/docker_runtime.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/file.h"

namespace tarn::runtime {
namespace {

using namespace std::chrono_literals;

class DockerRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tarn-docker-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    old_path_ = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", (dir_ + ":" + old_path_).c_str(), 1);
    ::setenv("STUB_LOG", (dir_ + "/calls").c_str(), 1);
    ::setenv("STUB_STATE", (dir_ + "/state").c_str(), 1);
    WriteStub(/*engine_up=*/true);
  }
  void TearDown() override {
    ::setenv("PATH", old_path_.c_str(), 1);
    std::system(("rm -rf " + dir_).c_str());
  }
  void WriteStub(bool engine_up) {
    std::ofstream f(dir_ + "/docker");
    f << "#!/bin/sh\n"
         "for a in \"$@\"; do printf '%s\\n' \"$a\" >> \"$STUB_LOG\"; done\n"
         "echo --END-- >> \"$STUB_LOG\"\n"
         "case \"$1\" in\n";
    if (engine_up) {
      f << "  info) echo 24.0.7 ;;\n";
    } else {
      f << "  info) echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
           "Is the docker daemon running?' >&2; exit 1 ;;\n";
    }
    f << "  run) echo 'Unable to find image locally'; echo 4f2a9c0d1e ;;\n"
         "  inspect) cat \"$STUB_STATE\" ;;\n"
         "  wait) echo 0 ;;\n"
         "  stop|rm) ;;\n"
         "esac\n";
    f.close();
    ::chmod((dir_ + "/docker").c_str(), 0755);
  }
  // The recorded calls, each a list of arguments.
  std::vector<std::vector<std::string>> Calls() {
    std::vector<std::vector<std::string>> calls(1);
    std::istringstream in(ReadFileToString(dir_ + "/calls").value_or(""));
    std::string line;
    while (std::getline(in, line)) {
      if (line == "--END--") {
        calls.emplace_back();
      } else {
        calls.back().push_back(line);
      }
    }
    calls.pop_back();
    return calls;
  }
  ContainerSpec Spec() {
    ContainerSpec s;
    s.id = "alice/fmnist/serving-1";
    s.shim_dir = dir_ + "/shim";
    s.work_dir = dir_ + "/work";
    s.hostname = "serving-1.fmnist.alice.tarn";
    s.image = "tensorflow/serving:2.14.0";
    s.argv = {"--rest_api_port=8501"};
    s.env = {"TARN_INSTANCE=serving-1", "MODEL_NAME=fmnist"};
    s.run_uid = 1001;
    s.run_gid = 1001;
    s.limits.memory_mib = 2048;
    s.limits.vcores = 2;
    s.limits.pids_max = 4096;
    s.gpus = {1, 3};
    s.bind_paths = {dir_ + "/work", "/srv/tarn/shared/alice/fmnist"};
    s.resolv_conf = "/var/lib/tarn/names/alice/fmnist/resolv.conf";
    s.stop_grace_ms = 10000;
    return s;
  }

  std::string dir_;
  std::string old_path_;
};

TEST_F(DockerRuntimeTest, RunsTheImageWithTheSameNameLimitsEnvAndGpus) {
  auto rt = DockerRuntime::Create({});
  ASSERT_TRUE(rt.ok()) << rt.status().ToString();
  EXPECT_EQ((*rt)->engine(), "docker");
  std::ofstream(dir_ + "/state") << "running 0 false\n";
  auto st = (*rt)->Start(Spec());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->phase, ContainerState::Phase::kRunning);
  EXPECT_EQ(ReadFileToString(dir_ + "/shim/docker.id").value_or(""), "4f2a9c0d1e\n");
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 3u);  // info, run, inspect
  std::vector<std::string> expected = {
      "run",
      "--detach",
      "--init",
      "--name",
      "tarn-alice-fmnist-serving-1",
      "--hostname",
      "serving-1.fmnist.alice.tarn",
      "--label",
      "tarn.id=alice/fmnist/serving-1",
      "--network",
      "host",
      "--user",
      "1001:1001",
      "--workdir",
      dir_ + "/work",
      "--stop-timeout",
      "10",
      "--memory",
      "2048m",
      "--memory-swap",
      "2048m",
      "--cpus",
      "2",
      "--pids-limit",
      "4096",
      "--gpus",
      "\"device=1,3\"",
      "--volume",
      dir_ + "/work:" + dir_ + "/work",
      "--volume",
      "/srv/tarn/shared/alice/fmnist:/srv/tarn/shared/alice/fmnist",
      "--volume",
      "/var/lib/tarn/names/alice/fmnist/resolv.conf:/etc/resolv.conf:ro",
      "--env",
      "TARN_INSTANCE=serving-1",
      "--env",
      "MODEL_NAME=fmnist",
      "tensorflow/serving:2.14.0",
      "--rest_api_port=8501"};
  EXPECT_EQ(calls[1], expected);
  EXPECT_EQ(calls[2], (std::vector<std::string>{"inspect", "--format",
                                                "{{.State.Status}} {{.State.ExitCode}} "
                                                "{{.State.OOMKilled}}",
                                                "4f2a9c0d1e"}));
}

TEST_F(DockerRuntimeTest, ReportsExitsSignalsAndOomKillsAsTheEngineDoes) {
  auto rt = DockerRuntime::Create({"docker", 10s});
  ASSERT_TRUE(rt.ok());
  std::ofstream(dir_ + "/state") << "running 0 false\n";
  ASSERT_TRUE((*rt)->Start(Spec()).ok());
  struct Case {
    const char* state;
    const char* diagnostics;
  };
  for (const Case& c : {Case{"exited 3 false", "exited with code 3"},
                        Case{"exited 143 false", "killed by signal 15 (SIGTERM)"},
                        Case{"exited 137 true", "killed: exceeded its 2048 MiB memory limit"}}) {
    std::ofstream(dir_ + "/state") << c.state << "\n";
    auto st = (*rt)->State(dir_ + "/shim");
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->phase, ContainerState::Phase::kExited);
    EXPECT_EQ(st->diagnostics, c.diagnostics);
  }
  ASSERT_TRUE((*rt)->Wait(dir_ + "/shim", 10s).ok());
  ASSERT_TRUE((*rt)->Remove(dir_ + "/shim").ok());
  EXPECT_EQ(Calls().back(), (std::vector<std::string>{"rm", "--force", "4f2a9c0d1e"}));
  EXPECT_EQ((*rt)->State(dir_ + "/shim").status().code(), StatusCode::kNotFound);
}

TEST_F(DockerRuntimeTest, NoEngineIsAClearError) {
  WriteStub(/*engine_up=*/false);
  auto rt = DockerRuntime::Create({"docker", 10s});
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().message(),
            "DOCKER artifacts need a container engine, and none answers (docker info: Cannot "
            "connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon "
            "running?). Install and start Docker or Podman, or give the component a TARBALL "
            "artifact or none");
}

}  // namespace
}  // namespace tarn::runtime
