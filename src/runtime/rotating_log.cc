#include "runtime/rotating_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tarn::runtime {

StatusOr<RotatingLog> RotatingLog::Open(std::string path, int64_t max_bytes, int keep) {
  if (max_bytes <= 0) return InvalidArgumentError("log size limit must be positive");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return InternalError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  return RotatingLog(std::move(path), max_bytes, std::max(0, keep), fd, st.st_size);
}

RotatingLog::RotatingLog(std::string path, int64_t max_bytes, int keep, int fd, int64_t size)
    : path_(std::move(path)), max_bytes_(max_bytes), keep_(keep), fd_(fd), size_(size) {}

RotatingLog::RotatingLog(RotatingLog&& o) noexcept
    : path_(std::move(o.path_)),
      max_bytes_(o.max_bytes_),
      keep_(o.keep_),
      fd_(o.fd_),
      size_(o.size_) {
  o.fd_ = -1;
}

RotatingLog& RotatingLog::operator=(RotatingLog&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    max_bytes_ = o.max_bytes_;
    keep_ = o.keep_;
    fd_ = o.fd_;
    size_ = o.size_;
    o.fd_ = -1;
  }
  return *this;
}

RotatingLog::~RotatingLog() {
  if (fd_ >= 0) ::close(fd_);
}

Status RotatingLog::Rotate() {
  ::close(fd_);
  fd_ = -1;
  if (keep_ == 0) {
    ::unlink(path_.c_str());
  } else {
    ::unlink((path_ + "." + std::to_string(keep_)).c_str());
    for (int i = keep_ - 1; i >= 1; --i) {
      ::rename((path_ + "." + std::to_string(i)).c_str(),
               (path_ + "." + std::to_string(i + 1)).c_str());
    }
    ::rename(path_.c_str(), (path_ + ".1").c_str());
  }
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640);
  if (fd_ < 0) return InternalError(path_ + ": cannot reopen: " + std::strerror(errno));
  size_ = 0;
  return OkStatus();
}

Status RotatingLog::Append(std::string_view data) {
  while (!data.empty()) {
    if (size_ >= max_bytes_) RETURN_IF_ERROR(Rotate());
    size_t room = static_cast<size_t>(max_bytes_ - size_);
    std::string_view chunk = data.substr(0, std::min(room, data.size()));
    ssize_t n = ::write(fd_, chunk.data(), chunk.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return InternalError(path_ + ": write failed: " + std::strerror(errno));
    }
    size_ += n;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return OkStatus();
}

}  // namespace tarn::runtime
