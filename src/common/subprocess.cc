#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tarn {

std::string CommandResult::FirstErrorLine() const {
  const std::string& text = err.find_first_not_of(" \n\t") != std::string::npos ? err : out;
  size_t start = text.find_first_not_of(" \n\t");
  if (start == std::string::npos) return "(no output)";
  size_t end = text.find('\n', start);
  return text.substr(start, end == std::string::npos ? text.npos : end - start);
}

StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                   std::chrono::milliseconds timeout, size_t max_output) {
  if (argv.empty()) return InvalidArgumentError("RunCommand: no program");
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    return InternalError(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return InternalError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    // Nothing else of the caller's: a command that leaves a daemon behind (podman's conmon)
    // must not hold the server's sockets past its end.
    ::close_range(3, ~0U, 0);
    ::execvp(args[0], args.data());
    std::string msg = std::string("cannot run ") + argv[0] + ": " + std::strerror(errno) + "\n";
    ssize_t ignored = ::write(2, msg.data(), msg.size());
    (void)ignored;
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  CommandResult result;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int fds[2] = {out[0], err[0]};
  bool timed_out = false;
  while (fds[0] >= 0 || fds[1] >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    int r = ::poll(p, 2, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[16384];
      ssize_t n = ::read(fds[i], buf, sizeof buf);
      if (n > 0) {
        std::string& dst = i == 0 ? result.out : result.err;
        if (dst.size() < max_output)
          dst.append(buf, std::min(static_cast<size_t>(n), max_output - dst.size()));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return DeadlineExceededError(argv[0] + " did not finish within " +
                                 std::to_string(timeout.count()) + " ms");
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace tarn
