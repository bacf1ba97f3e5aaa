#include "shim/shim.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>

#include "common/file.h"
#include "common/proc_stat.h"
#include "common/subprocess.h"
#include "runtime/cgroups.h"
#include "runtime/container_spec.h"
#include "runtime/rotating_log.h"
#include "runtime/work_dir.h"

namespace tarn::shim {
namespace {

using runtime::ContainerSpec;
using runtime::ExitInfo;
using runtime::PrepareWorkDir;
using runtime::RotatingLog;

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The workload: becomes its own process group, takes the log pipes, drops to the run user
// and execs. Never returns.
[[noreturn]] void ExecWorkload(const ContainerSpec& spec, int out_fd, int err_fd) {
  ::setpgid(0, 0);
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s : kForwarded) ::signal(s, SIG_DFL);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  auto fail = [&](const std::string& what) {
    (void)WriteFully(2, "tarn-shim: " + what + ": " + std::strerror(errno) + "\n");
    ::_exit(127);
  };
  if (::chdir(spec.work_dir.c_str()) != 0) fail("cannot enter " + spec.work_dir);
  if (::geteuid() == 0 && spec.run_uid != 0) {
    if (::setgroups(0, nullptr) != 0) fail("setgroups");
    if (::setgid(spec.run_gid) != 0) fail("setgid " + std::to_string(spec.run_gid));
    if (::setuid(spec.run_uid) != 0) fail("setuid " + std::to_string(spec.run_uid));
  }
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  ::execvpe(argv[0], argv.data(), envp.data());
  fail("cannot run " + spec.argv[0]);
  ::_exit(127);  // not reached
}

// The container's init: PID 1 of its PID namespace when isolated. Starts the workload,
// forwards signals to its process group, reaps every child, and reports the workload's raw
// wait status on `status_fd` before exiting. Never returns.
[[noreturn]] void RunInit(const ContainerSpec& spec, int go_fd, int status_fd, int out_fd,
                          int err_fd) {
  char go = 0;
  if (::read(go_fd, &go, 1) != 1 || go != 'g') ::_exit(120);  // the shim gave up
  ::close(go_fd);
  if (spec.isolate || spec.user_namespace) {
    auto fail = [](const char* what) {
      (void)WriteFully(2,
                       std::string("tarn-shim init: ") + what + ": " + std::strerror(errno) + "\n");
      ::_exit(121);
    };
    if (::unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC) != 0) fail("unshare");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail("make / private");
    if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
      fail("mount /proc");
    }
    if (::sethostname(spec.hostname.data(), spec.hostname.size()) != 0) fail("sethostname");
    // The container's own resolver files. Read-only, so that a workload running as root
    // cannot change what every instance of its assembly reads; in a user namespace the
    // kernel may refuse the read-only remount (locked mount flags), and the workload owns
    // the file there anyway.
    const std::pair<const std::string*, const char*> binds[] = {
        {&spec.resolv_conf, "/etc/resolv.conf"}, {&spec.hosts_file, "/etc/hosts"}};
    for (const auto& [source, target] : binds) {
      if (source->empty()) continue;
      if (::mount(source->c_str(), target, nullptr, MS_BIND, nullptr) != 0) {
        // To the container's stderr: `tarn logs` shows why it never ran.
        (void)WriteFully(err_fd, "tarn-shim init: cannot bind " + *source + " over " + target +
                                     ": " + std::strerror(errno) + "\n");
        ::_exit(121);
      }
      if (::mount(nullptr, target, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0 &&
          !spec.user_namespace) {
        fail("make the resolver file read-only");
      }
    }
  }
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : kForwarded) sigaddset(&mask, s);
  sigaddset(&mask, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  int sfd = ::signalfd(-1, &mask, SFD_CLOEXEC);
  pid_t workload = ::fork();
  if (workload == 0) ExecWorkload(spec, out_fd, err_fd);
  if (workload < 0) ::_exit(122);
  ::setpgid(workload, workload);  // also done by the child; whichever runs first
  ::close(out_fd);
  ::close(err_fd);
  int workload_status = 0;
  bool done = false;
  while (!done) {
    signalfd_siginfo si{};
    if (::read(sfd, &si, sizeof si) != sizeof si) {
      if (errno == EINTR) continue;
      break;
    }
    if (si.ssi_signo == SIGCHLD) {
      int st = 0;
      pid_t p;
      while ((p = ::waitpid(-1, &st, WNOHANG)) > 0) {
        if (p == workload) {
          workload_status = st;
          done = true;
        }
      }
    } else {
      ::kill(-workload, static_cast<int>(si.ssi_signo));
    }
  }
  // Outside a PID namespace, nothing kills the workload's leftovers for us.
  if (!spec.isolate) ::kill(-workload, SIGKILL);
  (void)WriteFully(status_fd, std::to_string(workload_status) + "\n");
  ::_exit(0);
}

struct Streams {
  RotatingLog out;
  RotatingLog err;
};

}  // namespace

namespace {

// The shim; `foreground` and `env` as RunShimForeground (shim.h).
int Run(const std::string& shim_dir, int ready_fd, bool foreground,
        const std::vector<std::string>& env) {
  std::function<void(const std::string&)> report = [&](const std::string& line) {
    if (ready_fd >= 0) {
      (void)WriteFully(ready_fd, line + "\n");
      ::close(ready_fd);
      ready_fd = -1;
    }
  };
  auto spec_text = ReadFileToString(shim_dir + "/spec.json");
  if (!spec_text.ok()) {
    report("error " + spec_text.status().message());
    return 1;
  }
  StatusOr<ContainerSpec> parsed = InvalidArgumentError("unparsed");
  try {
    parsed = runtime::ContainerSpecFromJson(nlohmann::json::parse(*spec_text));
  } catch (const nlohmann::json::exception& e) {
    parsed = InvalidArgumentError(std::string("spec.json: ") + e.what());
  }
  if (!parsed.ok()) {
    report("error " + parsed.status().message());
    return 1;
  }
  for (const std::string& var : env) {
    const std::string name = var.substr(0, var.find('=') + 1);
    auto& vars = parsed->env;
    vars.erase(std::remove_if(vars.begin(), vars.end(),
                              [&](const std::string& v) { return v.rfind(name, 0) == 0; }),
               vars.end());
    vars.push_back(var);
  }
  const ContainerSpec spec = std::move(parsed).value();

  if (!foreground) {
    // Detach: in a session of its own. ShimRuntime starts us as a session leader already
    // (posix_spawn's POSIX_SPAWN_SETSID), which saves a fork a start; else the caller's
    // child exits at once and the shim goes on in a new session.
    if (::getsid(0) != ::getpid()) {
      pid_t detached = ::fork();
      if (detached < 0) {
        report(std::string("error fork: ") + std::strerror(errno));
        return 1;
      }
      if (detached > 0) {
        ::close(ready_fd);
        return 0;
      }
      ::setsid();
    }
    int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      ::dup2(null_fd, 0);
      ::dup2(null_fd, 1);
    }
    // stderr goes to a file of the shim's own, for its own troubles.
    int shim_log = ::open((shim_dir + "/shim.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0640);
    if (shim_log >= 0) ::dup2(shim_log, 2);
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // In the foreground, troubles before the workload runs go to our stderr and end the shim
  // with 1 (report() has no ready fd to write to).
  if (foreground) {
    report = [](const std::string& line) {
      if (line.rfind("error ", 0) == 0) (void)WriteFully(2, "tarn-shim: " + line.substr(6) + "\n");
    };
  }

  pid_t self = ::getpid();
  // Not fsync'ed: after a machine crash there is no shim to find anyway.
  if (Status s = runtime::WriteFileAtomically(
          shim_dir + "/shim.pid",
          std::to_string(self) + " " + ReadProcStat(self).value_or(ProcStat{}).start_time + "\n",
          false);
      !s.ok()) {
    report("error " + s.message());
    _exit(1);
  }
  // In the foreground the workload writes to our own stdout and stderr (the files the
  // caller, e.g. Slurm's -o/-e, gave us); else to rotated files in the shim directory.
  std::optional<Streams> logs;
  if (!foreground) {
    auto out_log = RotatingLog::Open(shim_dir + "/stdout.log", spec.log_max_bytes, spec.log_keep);
    auto err_log = RotatingLog::Open(shim_dir + "/stderr.log", spec.log_max_bytes, spec.log_keep);
    if (!out_log.ok() || !err_log.ok()) {
      report("error " + (out_log.ok() ? err_log.status() : out_log.status()).message());
      _exit(1);
    }
    logs.emplace(Streams{std::move(out_log).value(), std::move(err_log).value()});
  }

  if (std::string why = PrepareWorkDir(spec); !why.empty()) {
    report("error " + why);
    _exit(1);
  }

  std::unique_ptr<runtime::Cgroups> cgroups;
  if (spec.isolate && foreground) {
    // The caller's cgroup (Slurm's job cgroup) limits and accounts for the container.
    if (::unshare(CLONE_NEWPID) != 0) {
      report(std::string("error unshare(CLONE_NEWPID): ") + std::strerror(errno));
      _exit(1);
    }
  } else if (spec.isolate) {
    auto detected = runtime::DetectCgroups();
    if (!detected.ok()) {
      report("error " + detected.status().message());
      _exit(1);
    }
    cgroups = std::move(detected).value();
    if (Status s = cgroups->Create(spec.cgroup, spec.limits); !s.ok()) {
      report("error " + s.message());
      cgroups->Remove(spec.cgroup).ok();
      _exit(1);
    }
    if (::unshare(CLONE_NEWPID) != 0) {
      report(std::string("error unshare(CLONE_NEWPID): ") + std::strerror(errno));
      cgroups->Remove(spec.cgroup).ok();
      _exit(1);
    }
  } else if (spec.user_namespace) {
    // Rootless: a user namespace mapping our own uid and gid to themselves gives us the
    // capabilities to create the other namespaces; the workload keeps its uid and, since it
    // is not 0 inside, loses those capabilities at exec.
    uid_t uid = ::geteuid();
    gid_t gid = ::getegid();
    if (::unshare(CLONE_NEWUSER) != 0) {
      report(std::string("error unshare(CLONE_NEWUSER): ") + std::strerror(errno));
      _exit(1);
    }
    auto write_map = [](const std::string& file, const std::string& line) {
      int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
      bool ok =
          fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
      if (fd >= 0) ::close(fd);
      return ok;
    };
    if (!write_map("/proc/self/setgroups", "deny") ||
        !write_map("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") ||
        !write_map("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1") ||
        ::unshare(CLONE_NEWPID) != 0) {
      report(std::string("error setting up the user namespace: ") + std::strerror(errno));
      _exit(1);
    }
  }

  int out_pipe[2], err_pipe[2], go_pipe[2], status_pipe[2];
  bool piped = foreground ? (out_pipe[1] = ::fcntl(1, F_DUPFD_CLOEXEC, 3)) >= 0 &&
                                (err_pipe[1] = ::fcntl(2, F_DUPFD_CLOEXEC, 3)) >= 0
                          : ::pipe2(out_pipe, O_CLOEXEC) == 0 && ::pipe2(err_pipe, O_CLOEXEC) == 0;
  if (foreground) out_pipe[0] = err_pipe[0] = -1;  // nothing to copy: the workload has them
  if (!piped || ::pipe2(go_pipe, O_CLOEXEC) != 0 || ::pipe2(status_pipe, O_CLOEXEC) != 0) {
    report(std::string("error pipe: ") + std::strerror(errno));
    _exit(1);
  }
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  pid_t init = ::fork();
  if (init == 0) {
    if (out_pipe[0] >= 0) ::close(out_pipe[0]);
    if (err_pipe[0] >= 0) ::close(err_pipe[0]);
    ::close(go_pipe[1]);
    ::close(status_pipe[0]);
    if (ready_fd >= 0) ::close(ready_fd);
    // The workload must get its pipes across exec.
    ::fcntl(out_pipe[1], F_SETFD, 0);
    ::fcntl(err_pipe[1], F_SETFD, 0);
    RunInit(spec, go_pipe[0], status_pipe[1], out_pipe[1], err_pipe[1]);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(go_pipe[0]);
  ::close(status_pipe[1]);
  if (init < 0) {
    report(std::string("error fork: ") + std::strerror(errno));
    if (cgroups) cgroups->Remove(spec.cgroup).ok();
    _exit(1);
  }
  if (cgroups) {
    if (Status s = cgroups->AddProcess(spec.cgroup, init); !s.ok()) {
      ::kill(init, SIGKILL);
      ::waitpid(init, nullptr, 0);
      cgroups->Remove(spec.cgroup).ok();
      report("error " + s.message());
      _exit(1);
    }
  }
  (void)WriteFully(go_pipe[1], "g");
  ::close(go_pipe[1]);
  report("ok " + std::to_string(init));

  int sfd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  bool init_done = false, stopping = false, killed = false;
  int init_status = 0;
  std::string status_text;
  std::optional<std::chrono::steady_clock::time_point> kill_at, drain_until;
  int fds[3] = {out_pipe[0], err_pipe[0], status_pipe[0]};
  while (true) {
    auto now = std::chrono::steady_clock::now();
    if (kill_at && now >= *kill_at && !killed) {
      ::kill(init, SIGKILL);  // the whole PID namespace goes with its init
      if (cgroups) cgroups->KillAll(spec.cgroup).ok();
      killed = true;
    }
    bool pipes_open = fds[0] >= 0 || fds[1] >= 0 || fds[2] >= 0;
    if (init_done && (!pipes_open || (drain_until && now >= *drain_until))) break;
    int timeout = -1;
    auto until = [&](std::chrono::steady_clock::time_point t) {
      int ms = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count() + 1);
      timeout = timeout < 0 ? std::max(ms, 0) : std::min(timeout, std::max(ms, 0));
    };
    if (kill_at && !killed) until(*kill_at);
    if (drain_until) until(*drain_until);
    pollfd p[4];
    int n = 0;
    for (int fd : fds) p[n++] = {fd, POLLIN, 0};
    p[n++] = {sfd, POLLIN, 0};
    if (::poll(p, n, timeout) < 0 && errno != EINTR) break;
    for (int i = 0; i < 3; ++i) {
      if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t got = ::read(fds[i], buf, sizeof buf);
      if (got > 0) {
        if (i == 0 && logs) logs->out.Append(std::string_view(buf, got)).ok();
        if (i == 1 && logs) logs->err.Append(std::string_view(buf, got)).ok();
        if (i == 2) status_text.append(buf, got);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
    if (p[3].revents & POLLIN) {
      signalfd_siginfo si{};
      while (::read(sfd, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGCHLD) {
          int st = 0;
          pid_t r;
          while ((r = ::waitpid(-1, &st, WNOHANG)) > 0) {
            if (r == init) {
              init_done = true;
              init_status = st;
              drain_until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
            }
          }
        } else if (!stopping) {  // SIGTERM or SIGINT: stop the container
          stopping = true;
          ::kill(init, SIGTERM);
          kill_at = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(std::max<int64_t>(0, spec.stop_grace_ms));
        }
      }
    }
  }

  ExitInfo info;
  info.finished_at_ms = NowMillis();
  info.memory_limit_mib = spec.limits.memory_mib;
  if (!status_text.empty()) {
    int st = std::atoi(status_text.c_str());
    if (WIFEXITED(st)) info.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) info.signal = WTERMSIG(st);
  } else if (WIFSIGNALED(init_status)) {
    info.signal = WTERMSIG(init_status);  // the init itself was killed (grace ran out)
  } else {
    info.exit_code = WIFEXITED(init_status) ? WEXITSTATUS(init_status) : -1;
  }
  if (cgroups) {
    auto stats = cgroups->Stats(spec.cgroup);
    // The kernel's OOM killer sends SIGKILL; a shell running the killed program reports 137.
    bool died_of_kill = info.signal == SIGKILL || info.exit_code == 128 + SIGKILL;
    if (stats.ok() && stats->oom_kills > 0 && died_of_kill && spec.limits.memory_mib > 0) {
      info.oom_killed = true;
    }
    cgroups->KillAll(spec.cgroup).ok();
    if (Status s = cgroups->Remove(spec.cgroup); !s.ok()) {
      (void)WriteFully(2, "tarn-shim: " + s.message() + "\n");
    }
  }
  info.diagnostics = runtime::DescribeExit(info);
  if (stopping && !info.oom_killed) info.diagnostics = "stopped (" + info.diagnostics + ")";
  runtime::WriteFileAtomically(shim_dir + "/exit.json", runtime::ToJson(info).dump() + "\n").ok();
  if (foreground) {
    // The caller (srun) sees how the workload ended, as a shell reports it.
    std::fflush(nullptr);
    _exit(info.signal > 0 ? 128 + info.signal : info.exit_code < 0 ? 1 : info.exit_code & 0xff);
  }
  _exit(0);
}

}  // namespace

int RunShim(const std::string& shim_dir, int ready_fd) {
  return Run(shim_dir, ready_fd, false, {});
}

int RunShimForeground(const std::string& shim_dir, const std::vector<std::string>& env) {
  return Run(shim_dir, -1, true, env);
}

int RunForkServer(int sock) {
  // The kernel reaps the shims this process forks (each sets SIGCHLD back at once): they
  // are in sessions of their own and outlive it.
  ::signal(SIGCHLD, SIG_IGN);
  for (;;) {
    char path[4097];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    iovec iov{path, sizeof path - 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;  // the server closed its end (it is gone): so are we
    int ready_fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
          c->cmsg_len == CMSG_LEN(sizeof(int))) {
        std::memcpy(&ready_fd, CMSG_DATA(c), sizeof(int));
      }
    }
    std::string reply;
    if (ready_fd < 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
      reply = "error the fork server got a request without a shim directory and a ready pipe";
    } else {
      const pid_t child = ::fork();
      if (child == 0) {
        ::close(sock);
        ::signal(SIGCHLD, SIG_DFL);
        ::setsid();  // a session leader, as ShimRuntime's posix_spawn makes it
        _exit(Run(std::string(path, static_cast<size_t>(n)), ready_fd, false, {}));
      }
      reply = child < 0 ? std::string("error fork: ") + std::strerror(errno)
                        : "ok " + std::to_string(child);
    }
    if (ready_fd >= 0) ::close(ready_fd);
    if (::send(sock, reply.data(), reply.size(), MSG_NOSIGNAL) < 0 && errno != EINTR) return 0;
  }
}

}  // namespace tarn::shim
