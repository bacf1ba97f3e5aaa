#include "runtime/shim_runtime.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/file.h"
#include "common/proc_stat.h"

namespace tarn::runtime {
namespace {

struct ShimPid {
  pid_t pid = 0;
  std::string start_time;
};

std::optional<ShimPid> ReadShimPid(const std::string& shim_dir) {
  auto text = ReadFileToString(shim_dir + "/shim.pid", 4096);
  if (!text.ok()) return std::nullopt;
  ShimPid s;
  size_t space = text->find(' ');
  s.pid = static_cast<pid_t>(std::atoi(text->substr(0, space).c_str()));
  if (space != std::string::npos) {
    s.start_time = text->substr(space + 1);
    while (!s.start_time.empty() && s.start_time.back() == '\n') s.start_time.pop_back();
  }
  if (s.pid <= 0) return std::nullopt;
  return s;
}

// The shim is alive when its pid runs with the start time it recorded (not a reused pid)
// and is not a zombie waiting for whoever inherited it to reap it.
bool ShimAlive(const ShimPid& s) {
  auto stat = ReadProcStat(s.pid);
  if (!stat || stat->state == 'Z' || stat->state == 'X') return false;
  return stat->start_time == s.start_time;
}

// Waits, without blocking, for process `pid` if it is a zombie and `ours(its stat)` holds.
// Through a pidfd taken before the check, so that the wait is for the process checked and
// never for a later one that reused the pid (another thread may have reaped it meanwhile).
// ECHILD (not our child, or reaped already) is harmless.
template <typename Check>
void ReapZombie(pid_t pid, const Check& ours) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return;
  auto stat = ReadProcStat(pid);
  if (stat && stat->state == 'Z' && ours(*stat)) {
    siginfo_t info{};
    ::waitid(P_PIDFD, static_cast<id_t>(fd), &info, WEXITED | WNOHANG);
  }
  ::close(fd);
}

// The shim that recorded (pid, start time), once it has ended. One still exiting is left to
// ReapEnded().
void ReapIfEnded(pid_t pid, const std::string& start_time) {
  ReapZombie(pid, [&](const ProcStat& s) { return s.start_time == start_time; });
}

}  // namespace

namespace {

// posix_spawn of `binary ARG 3` with `fd` as its fd 3 and nothing else of ours above stderr
// (sockets, the store): an fd already numbered 3 would keep its close-on-exec flag through
// the dup2, so it moves up first. In a session of its own; with `null_stdio`, /dev/null as
// stdin and stdout. FailedPrecondition when it cannot be run.
StatusOr<pid_t> SpawnTarnShim(const std::string& binary, const char* arg, int fd, bool null_stdio) {
  int moved = -1;
  if (fd == 3) {
    moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 4);
    if (moved < 0) return InternalError(std::string("fcntl: ") + std::strerror(errno));
    fd = moved;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 3);
  if (null_stdio) {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  }
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  const char* argv[] = {binary.c_str(), arg, "3", nullptr};
  pid_t pid = 0;
  const int spawned =
      ::posix_spawn(&pid, argv[0], &actions, &attr, const_cast<char* const*>(argv), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (moved >= 0) ::close(moved);
  if (spawned != 0) {
    return FailedPreconditionError("cannot run " + binary + ": " + std::strerror(spawned));
  }
  return pid;
}

}  // namespace

ShimRuntime::ShimRuntime(Options options) : options_(std::move(options)) {
  if (options_.reap_shims) ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  shim_comm_ = options_.shim_binary.substr(options_.shim_binary.rfind('/') + 1).substr(0, 15);
}

ShimRuntime::~ShimRuntime() {
  std::lock_guard lock(fork_mu_);
  StopForkServer();
}

pid_t ShimRuntime::fork_server_pid() const {
  std::lock_guard lock(fork_mu_);
  return fork_pid_;
}

Status ShimRuntime::StartForkServer() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return InternalError(std::string("socketpair: ") + std::strerror(errno));
  }
  // /dev/null as stdin and stdout, our stderr for its own troubles; in a session of its
  // own, so that a terminal's ^C to the server's process group does not reach it.
  StatusOr<pid_t> pid = SpawnTarnShim(options_.shim_binary, "--fork-server", sv[1],
                                      /*null_stdio=*/true);
  ::close(sv[1]);
  if (!pid.ok()) {
    ::close(sv[0]);
    // One that cannot be run: each shim is exec'd instead (and says why if it cannot be).
    if (pid.status().code() == StatusCode::kFailedPrecondition) {
      return UnavailableError(pid.status().message());
    }
    return pid.status();
  }
  fork_pid_ = *pid;
  fork_sock_ = sv[0];
  // Waited for through its pidfd, never by a pid that ReapEnded() may have freed for reuse.
  fork_pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, *pid, 0));
  return OkStatus();
}

void ShimRuntime::StopForkServer() {
  if (fork_sock_ < 0) return;
  ::close(fork_sock_);  // it exits at the end of its socket; its shims go on
  fork_sock_ = -1;
  // Reaped here, or, if it takes longer than 100 ms, by ReapEnded() later.
  if (fork_pidfd_ >= 0) {
    pollfd p{fork_pidfd_, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      siginfo_t info{};
      ::waitid(P_PIDFD, static_cast<id_t>(fork_pidfd_), &info, WEXITED | WNOHANG);
    }
    ::close(fork_pidfd_);
    fork_pidfd_ = -1;
  }
  fork_pid_ = -1;
}

StatusOr<pid_t> ShimRuntime::ForkShim(const std::string& shim_dir, int ready_fd) {
  std::lock_guard lock(fork_mu_);
  std::string why;
  // A second try with a fresh fork server when the one we had is gone before it took the
  // request.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (fork_sock_ < 0) RETURN_IF_ERROR(StartForkServer());
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    iovec iov{const_cast<char*>(shim_dir.data()), shim_dir.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &ready_fd, sizeof(int));
    ssize_t sent;
    do {
      sent = ::sendmsg(fork_sock_, &msg, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent != static_cast<ssize_t>(shim_dir.size())) {
      // Not taken (it is gone): no shim was forked, so a fresh fork server may be asked.
      why = sent < 0 ? std::strerror(errno) : "a short send";
      StopForkServer();
      continue;
    }
    // A fork takes a millisecond; a fork server that answers nothing in 10 s is stuck.
    pollfd p{fork_sock_, POLLIN, 0};
    int ready;
    do {
      ready = ::poll(&p, 1, 10000);
    } while (ready < 0 && errno == EINTR);
    char reply[512];
    const ssize_t got = ready > 0 ? ::recv(fork_sock_, reply, sizeof reply, 0) : -1;
    if (got > 0) {
      const std::string text(reply, static_cast<size_t>(got));
      if (text.rfind("ok ", 0) == 0) return static_cast<pid_t>(std::atoi(text.c_str() + 3));
      return FailedPreconditionError(text.rfind("error ", 0) == 0 ? text.substr(6) : text);
    }
    // Taken, but no answer (it died, or is stuck and is killed now): it may have forked the
    // shim, so the request is never sent again; the ready pipe tells whether a shim runs
    // (its "ok") or not (its end, without a word). The next start gets a fresh fork server.
    if (ready == 0) ::kill(fork_pid_, SIGKILL);
    StopForkServer();
    return 0;
  }
  return UnavailableError("the shims' fork server: " + why);
}

Status ShimRuntime::SpawnShim(const std::string& shim_dir, int ready_fd, pid_t* pid) {
  // In a session of its own from the start, the shim need not fork again to detach
  // (tarn-shim detaches itself only when it is not a session leader); it stays our child.
  ASSIGN_OR_RETURN(*pid, SpawnTarnShim(options_.shim_binary, shim_dir.c_str(), ready_fd,
                                       /*null_stdio=*/false));
  return OkStatus();
}

void ShimRuntime::ReapEnded() {
  // Only shims: the server's other children (commands it runs) are waited for by whoever
  // started them. A zombie stays one until waited for, so its pid cannot be reused meanwhile.
  for (pid_t pid : ChildProcesses()) {
    ReapZombie(pid, [&](const ProcStat& s) { return s.comm == shim_comm_; });
  }
}

namespace {

// Whether this kernel lets an unprivileged process create a user namespace.
bool UserNamespacesAllowed() {
  auto max = ReadFileToString("/proc/sys/user/max_user_namespaces", 64);
  if (max.ok() && std::atoi(max->c_str()) == 0) return false;
  auto debian = ReadFileToString("/proc/sys/kernel/unprivileged_userns_clone", 64);
  if (debian.ok() && std::atoi(debian->c_str()) == 0) return false;
  return true;
}

}  // namespace

ShimRuntime::Isolation ShimRuntime::isolation() const {
  if (::geteuid() == 0) return Isolation::kFull;
  return UserNamespacesAllowed() ? Isolation::kUserNamespace : Isolation::kNone;
}

std::string ShimRuntime::Warning() const {
  if (::geteuid() == 0) return "";
  if (UserNamespacesAllowed()) {
    return "tarn is not running as root: containers get their own namespaces through a user "
           "namespace, but no cgroup limits (memory, CPU, pids) and always run as tarn's "
           "own user";
  }
  return "tarn is not running as root and this kernel does not allow unprivileged user "
         "namespaces: containers run as plain process groups, without namespaces or cgroup "
         "limits";
}

StatusOr<ContainerState> ShimRuntime::Start(const ContainerSpec& in) {
  ContainerSpec spec = in;
  if (::geteuid() != 0) {
    spec.isolate = false;
    spec.user_namespace = UserNamespacesAllowed();
    spec.run_uid = ::geteuid();
    spec.run_gid = ::getegid();
  }
  RETURN_IF_ERROR(MakeDirectories(spec.shim_dir, 0700));
  RETURN_IF_ERROR(MakeDirectories(spec.work_dir, 0750));
  if (::geteuid() == 0 && ::chown(spec.work_dir.c_str(), spec.run_uid, spec.run_gid) != 0) {
    return InternalError(spec.work_dir + ": chown: " + std::strerror(errno));
  }
  ::unlink((spec.shim_dir + "/exit.json").c_str());
  // Not fsync'ed (as DockerRuntime's): it describes a start that a machine crash ends anyway,
  // and a server crash leaves it in the page cache.
  RETURN_IF_ERROR(WriteFileAtomically(spec.shim_dir + "/spec.json", ToJson(spec).dump(2),
                                      /*durable=*/false));
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0)
    return InternalError(std::string("pipe: ") + std::strerror(errno));
  // Forked by the fork server (a third of an exec's cost here), or, when there is none,
  // exec'd by posix_spawn, never by fork(): glibc's posix_spawn clones the address space
  // (CLONE_VM | CLONE_VFORK) instead of copying it, so a start neither copies the server's
  // page tables nor leaves every page the server writes next to fault once more
  // (copy-on-write); measured in docs/runtime.md.
  pid_t child = 0;
  bool forked = false;  // by the fork server, whose children the kernel reaps
  if (options_.fork_server) {
    StatusOr<pid_t> pid = ForkShim(spec.shim_dir, ready[1]);
    if (pid.ok()) {
      child = *pid;
      forked = true;
    } else if (pid.status().code() != StatusCode::kUnavailable) {
      ::close(ready[0]);
      ::close(ready[1]);
      return FailedPreconditionError(spec.id + ": cannot start: " + pid.status().message());
    }
  }
  if (!forked) {
    if (Status s = SpawnShim(spec.shim_dir, ready[1], &child); !s.ok()) {
      ::close(ready[0]);
      ::close(ready[1]);
      return FailedPreconditionError(spec.id + ": cannot start: " + s.message());
    }
  }
  ::close(ready[1]);
  std::string reply;
  char buf[512];
  ssize_t n;
  while ((n = ::read(ready[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) reply.append(buf, n);
  }
  ::close(ready[0]);
  while (!reply.empty() && reply.back() == '\n') reply.pop_back();
  if (reply.rfind("ok ", 0) != 0) {
    // A shim that failed exits right after saying why; the fork server's are reaped for it.
    if (!forked) ::waitpid(child, nullptr, 0);
    std::string why =
        reply.rfind("error ", 0) == 0 ? reply.substr(6) : "the shim exited without a word";
    return FailedPreconditionError(spec.id + ": cannot start: " + why);
  }
  return State(spec.shim_dir);
}

StatusOr<ContainerState> ShimRuntime::State(const std::string& shim_dir) const {
  ContainerState st;
  ASSIGN_OR_RETURN(std::optional<ExitInfo> exit, ReadExitFile(shim_dir));
  if (exit) {
    st.exit = std::move(*exit);
    st.phase = ContainerState::Phase::kExited;
    st.diagnostics = st.exit.diagnostics;
    // The shim writes exit.json just before it exits: wait for it now or later, so that it
    // does not stay a zombie of ours once its directory is removed.
    if (auto pid = ReadShimPid(shim_dir)) ReapIfEnded(pid->pid, pid->start_time);
    return st;
  }
  auto pid = ReadShimPid(shim_dir);
  if (!pid) {
    if (::access(shim_dir.c_str(), F_OK) != 0) return NotFoundError(shim_dir + ": no container");
    st.phase = ContainerState::Phase::kLost;
    st.diagnostics = "its shim never started";
    return st;
  }
  st.shim_pid = pid->pid;
  if (ShimAlive(*pid)) return st;
  ReapIfEnded(pid->pid, pid->start_time);  // a shim re-parented to us (its subreaper) that ended
  // The shim may have written exit.json between our two reads.
  if (::access((shim_dir + "/exit.json").c_str(), F_OK) == 0) return State(shim_dir);
  st.phase = ContainerState::Phase::kLost;
  st.diagnostics =
      "its shim (pid " + std::to_string(pid->pid) + ") is gone without recording an exit status";
  return st;
}

Status ShimRuntime::Stop(const std::string& shim_dir) {
  ASSIGN_OR_RETURN(ContainerState st, State(shim_dir));
  if (st.phase != ContainerState::Phase::kRunning) return OkStatus();
  if (::kill(st.shim_pid, SIGTERM) != 0 && errno != ESRCH) {
    return InternalError("signal shim " + std::to_string(st.shim_pid) + ": " +
                         std::strerror(errno));
  }
  return OkStatus();
}

StatusOr<ContainerState> ShimRuntime::Wait(const std::string& shim_dir,
                                           std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(ContainerState st, State(shim_dir));
  if (st.phase != ContainerState::Phase::kRunning) return st;
  // A pidfd becomes readable when the shim exits; the shim is not our child.
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, st.shim_pid, 0));
  if (pidfd < 0) {
    if (errno == ESRCH) return State(shim_dir);
    return InternalError(std::string("pidfd_open: ") + std::strerror(errno));
  }
  // Re-check: the pid might have been reused between State() and pidfd_open().
  if (ReadProcStat(st.shim_pid).value_or(ProcStat{}).start_time !=
      ReadShimPid(shim_dir).value_or(ShimPid{}).start_time) {
    ::close(pidfd);
    return State(shim_dir);
  }
  pollfd p{pidfd, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  } while (r < 0 && errno == EINTR);
  ::close(pidfd);
  if (r == 0)
    return DeadlineExceededError(shim_dir + ": still running after " +
                                 std::to_string(timeout.count()) + " ms");
  return State(shim_dir);
}

Status ShimRuntime::Remove(const std::string& shim_dir) {
  ASSIGN_OR_RETURN(ContainerState st, State(shim_dir));
  if (st.phase == ContainerState::Phase::kRunning) {
    return FailedPreconditionError(shim_dir + ": still running; stop it first");
  }
  return RemoveTree(shim_dir);
}

}  // namespace tarn::runtime
