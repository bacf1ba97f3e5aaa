// DirWatch: wakes the model poll when a version directory appears in, or leaves, a model's
// base path, through inotify, instead of after the rest of a poll interval. Exporters rename
// a finished version directory into place (tarn-train does), so the rename itself (or a
// deletion) is the event watched: IN_MOVED_TO, IN_MOVED_FROM, IN_CREATE and IN_DELETE on the
// base path. Changes inside a version directory (a model.pt replaced in place) and base paths
// on file systems whose changes come from other machines (NFS, a Slurm shared directory)
// raise no event: the poll interval still bounds those, as it bounds everything when inotify
// is unavailable (Create fails, or the kernel's watch limit is reached: Watch says so).
//
// Thread-safe: Wait from one thread, Wake from any.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::serve {

class DirWatch {
 public:
  static StatusOr<std::unique_ptr<DirWatch>> Create();
  ~DirWatch();
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;

  // Watches each of `dirs` not watched yet (again, once one that was missing exists). A
  // directory that cannot be watched is named in the error; the others are still watched.
  Status Watch(const std::vector<std::string>& dirs);

  // Blocks until a watched directory changes (true), Wake is called or `timeout` passes
  // (false). Events that came together are read as one.
  bool Wait(std::chrono::milliseconds timeout);
  void Wake();

 private:
  DirWatch(int inotify_fd, int wake_fd) : inotify_fd_(inotify_fd), wake_fd_(wake_fd) {}
  // Reads every pending event; whether one was a change to a watched directory.
  bool Drain();

  const int inotify_fd_;
  const int wake_fd_;                   // an eventfd
  std::map<int, std::string> watched_;  // watch descriptor -> directory; Wait's thread only
};

}  // namespace tarn::serve
