#include "runtime/work_dir.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/file.h"
#include "common/subprocess.h"

namespace tarn::runtime {
namespace {

bool SafeRelative(const std::string& path) {
  if (path.empty() || path[0] == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string part = path.substr(start, slash == std::string::npos ? path.npos : slash - start);
    if (part == ".." || part.empty()) return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

}  // namespace

std::string PrepareWorkDir(const ContainerSpec& spec) {
  if (spec.files.empty() && spec.tarball.empty()) return "";
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  pid_t pid = ::fork();
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid == 0) {
    ::close(report[0]);
    auto fail = [&](const std::string& why) {
      (void)WriteFully(report[1], why);
      ::_exit(1);
    };
    if (::geteuid() == 0 && spec.run_uid != 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(spec.run_gid) != 0 ||
          ::setuid(spec.run_uid) != 0) {
        fail(std::string("cannot become the run user: ") + std::strerror(errno));
      }
    }
    for (const WorkFile& f : spec.files) {
      if (!SafeRelative(f.path)) fail("refusing to write " + f.path + " outside the work dir");
      std::string full = spec.work_dir + "/" + f.path;
      if (Status made = MakeDirectories(full.substr(0, full.rfind('/'))); !made.ok()) {
        fail(made.message());
      }
      int fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (fd < 0) fail(full + ": " + std::strerror(errno));
      size_t done = 0;
      while (done < f.content.size()) {
        ssize_t n = ::write(fd, f.content.data() + done, f.content.size() - done);
        if (n <= 0) fail(full + ": write failed");
        done += static_cast<size_t>(n);
      }
      ::close(fd);
    }
    std::string lib = spec.work_dir + "/lib";
    struct stat st {};
    if (!spec.tarball.empty() && ::stat(lib.c_str(), &st) != 0) {
      if (::mkdir(lib.c_str(), 0755) != 0) fail(lib + ": " + std::strerror(errno));
      auto r = RunCommand(
          {"tar", "-xf", spec.tarball, "-C", lib, "--no-same-owner", "--no-same-permissions"},
          std::chrono::minutes(10));
      if (!r.ok() || !r->success()) {
        ::rmdir(lib.c_str());
        fail("cannot unpack " + spec.tarball + ": " +
             (r.ok() ? r->FirstErrorLine() : r.status().message()));
      }
    }
    ::_exit(0);
  }
  ::close(report[1]);
  std::string why;
  char buf[1024];
  ssize_t n;
  while ((n = ::read(report[0], buf, sizeof buf)) > 0) why.append(buf, n);
  ::close(report[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (why.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    why = "preparing the work dir failed";
  }
  return why;
}

}  // namespace tarn::runtime
