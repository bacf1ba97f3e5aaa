// Runs the tarn binary as a user would, for the tests under tests/: posix_spawn (the tests
// have threads, so no fork), stdout through a pipe the test can read while it runs, stderr
// to a file, and the caller's environment without any TARN_* variable plus `env` (whose
// entries replace the caller's of the same name).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/file.h"

extern char** environ;

namespace tarn::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// A spawned tarn whose stdout is a pipe the test reads; stderr goes to a file. With a
// `wrapper` ({"/usr/bin/setpriv", "--reuid=1001", ...}) tarn runs under that command.
class TarnProcess {
 public:
  TarnProcess(const std::vector<std::string>& args, const std::vector<std::string>& env,
              const std::string& cwd, const std::vector<std::string>& wrapper = {}) {
    char dir_template[] = "/tmp/tarn-client-test-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    err_path_ = dir_ + "/err";
    int out[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    out_fd_ = out[0];

    // Everything the child needs is built before spawning: the test process has threads.
    std::vector<std::string> env_strings;
    auto named_in_env = [&env](const std::string& entry) {
      const std::string key = entry.substr(0, entry.find('=') + 1);
      for (const std::string& e : env) {
        if (e.rfind(key, 0) == 0) return true;
      }
      return false;
    };
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (entry.rfind("TARN_", 0) != 0 && !named_in_env(entry)) env_strings.push_back(entry);
    }
    env_strings.insert(env_strings.end(), env.begin(), env.end());
    std::vector<char*> envp;
    for (std::string& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> arg_strings = wrapper;
    arg_strings.push_back(TARN_BINARY);
    arg_strings.insert(arg_strings.end(), args.begin(), args.end());
    const std::string program = arg_strings.front();
    std::vector<char*> argv;
    for (std::string& a : arg_strings) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
    int rc = ::posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    EXPECT_EQ(rc, 0) << "cannot spawn " << program;
  }

  ~TarnProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
    std::remove(err_path_.c_str());
    ::rmdir(dir_.c_str());
  }

  // Reads stdout until it contains `text` (empty: until it ends) or `timeout` passes (then
  // the process is killed); returns everything read so far.
  std::string ReadUntil(const std::string& text,
                        std::chrono::milliseconds timeout = std::chrono::minutes(2)) {
    char buf[4096];
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (text.empty() || out_.find(text) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{out_fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0) {
        ADD_FAILURE() << "tarn did not finish within " << timeout.count() << " ms";
        ::kill(pid_, SIGKILL);
        break;
      }
      ssize_t n = ::read(out_fd_, buf, sizeof buf);
      if (n <= 0) break;
      out_.append(buf, static_cast<size_t>(n));
    }
    return out_;
  }

  CommandResult Finish(std::chrono::milliseconds timeout = std::chrono::minutes(2)) {
    ReadUntil("", timeout);
    CommandResult result;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result.out = out_;
    result.err = ReadFileToString(err_path_).value_or("");
    return result;
  }

 private:
  std::string dir_, err_path_, out_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
};

inline CommandResult RunTarn(const std::vector<std::string>& args,
                             const std::vector<std::string>& env, const std::string& cwd = "/tmp",
                             std::chrono::milliseconds timeout = std::chrono::minutes(2)) {
  TarnProcess process(args, env, cwd);
  return process.Finish(timeout);
}

// Each test's tarn server gets an address range of its own, and with it its own DNS address
// on port 53 for containers: tests run side by side. A lock file per candidate range, held
// (flock) for the life of the test; closed on exec, so no server inherits it.
inline int LockAddressRange(std::string* cidr) {
  for (int n = 100; n < 250; ++n) {
    const std::string lock = "/tmp/tarn-test-range-" + std::to_string(n) + ".lock";
    const int fd = ::open(lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      *cidr = "127." + std::to_string(n) + ".0.0/16";
      return fd;
    }
    if (fd >= 0) ::close(fd);
  }
  return -1;
}

}  // namespace tarn::testing
