#include "serve/dir_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace tarn::serve {
namespace {

constexpr uint32_t kEvents =
    IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF;

}  // namespace

StatusOr<std::unique_ptr<DirWatch>> DirWatch::Create() {
  const int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (in < 0) return UnavailableError(std::string("inotify_init1: ") + std::strerror(errno));
  const int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    const int e = errno;
    ::close(in);
    return UnavailableError(std::string("eventfd: ") + std::strerror(e));
  }
  return std::unique_ptr<DirWatch>(new DirWatch(in, wake));
}

DirWatch::~DirWatch() {
  ::close(inotify_fd_);
  ::close(wake_fd_);
}

Status DirWatch::Watch(const std::vector<std::string>& dirs) {
  std::string errors;
  for (const std::string& dir : dirs) {
    bool known = false;
    for (const auto& [wd, d] : watched_) known = known || d == dir;
    if (known) continue;
    const int wd = ::inotify_add_watch(inotify_fd_, dir.c_str(), kEvents | IN_ONLYDIR);
    if (wd < 0) {
      if (errno == ENOENT) continue;  // not there yet: the next poll tries again
      errors += (errors.empty() ? "" : "; ") + dir +
                ": inotify_add_watch: " + std::strerror(errno) +
                (errno == ENOSPC ? " (fs.inotify.max_user_watches)" : "");
      continue;
    }
    watched_[wd] = dir;
  }
  if (!errors.empty()) return UnavailableError(errors);
  return OkStatus();
}

bool DirWatch::Drain() {
  alignas(inotify_event) char buf[16 * 1024];
  bool changed = false;
  while (true) {
    const ssize_t n = ::read(inotify_fd_, buf, sizeof(buf));
    if (n <= 0) break;  // EAGAIN: nothing more
    for (ssize_t off = 0; off < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      // A base path removed or moved away: watch it again once it is back.
      if (e->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
        if (e->mask & IN_MOVE_SELF) ::inotify_rm_watch(inotify_fd_, e->wd);
        watched_.erase(e->wd);
      }
      changed = changed || (e->mask & (kEvents | IN_Q_OVERFLOW)) != 0;
    }
  }
  return changed;
}

bool DirWatch::Wait(std::chrono::milliseconds timeout) {
  pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const int ms = static_cast<int>(std::min<int64_t>(timeout.count(), INT32_MAX));
  if (::poll(fds, 2, ms) <= 0) return false;  // the timeout (or EINTR: the caller polls)
  if (fds[1].revents & POLLIN) {
    uint64_t v;
    [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof(v));
    return false;
  }
  return (fds[0].revents & POLLIN) && Drain();
}

void DirWatch::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(wake_fd_, &one, sizeof(one));
}

}  // namespace tarn::serve
