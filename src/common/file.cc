#include "common/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tarn {

namespace {

StatusOr<std::string> ReadWhole(const std::string& path, size_t max_bytes, int flags) {
  // O_NONBLOCK: a FIFO at `path` fails the regular-file check below instead of blocking.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | flags);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP && (flags & O_NOFOLLOW) != 0) {
      return PermissionDeniedError(path + ": is a symbolic link; not followed");
    }
    Status s(err == ENOENT ? StatusCode::kNotFound : StatusCode::kPermissionDenied,
             path + ": cannot open: " + std::strerror(err));
    return s;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + ": not a regular file");
  }
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return InvalidArgumentError(path + ": " + std::to_string(st.st_size) +
                                " bytes is larger than the limit of " + std::to_string(max_bytes));
  }
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return InternalError(path + ": read failed: " + std::strerror(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return InvalidArgumentError(path + ": larger than the limit of " + std::to_string(max_bytes) +
                                  " bytes");
    }
  }
  ::close(fd);
  return out;
}

}  // namespace

StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  return ReadWhole(path, max_bytes, 0);
}

StatusOr<std::string> ReadFileNoFollow(const std::string& path, size_t max_bytes) {
  return ReadWhole(path, max_bytes, O_NOFOLLOW);
}

Status MakeDatabaseFilePrivate(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return UnavailableError(path + ": cannot open: " + std::strerror(errno));
  const int rc = ::fchmod(fd, 0600);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return UnavailableError(path + ": chmod 0600: " + std::strerror(err));
  for (const char* suffix : {"-wal", "-shm"}) {
    const std::string f = path + suffix;
    if (::chmod(f.c_str(), 0600) != 0 && errno != ENOENT) {
      return UnavailableError(f + ": chmod 0600: " + std::strerror(errno));
    }
  }
  return OkStatus();
}

Status MakeDirectories(const std::string& path, mode_t mode) {
  if (path.empty()) return InvalidArgumentError("MakeDirectories: empty path");
  for (size_t at = 1;; ++at) {
    at = path.find('/', at);
    std::string dir = path.substr(0, at);
    if (::mkdir(dir.c_str(), at == std::string::npos ? mode : 0755) != 0 && errno != EEXIST) {
      return InternalError(dir + ": cannot create: " + std::strerror(errno));
    }
    if (at == std::string::npos) break;
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return InternalError(path + ": chmod: " + std::strerror(errno));
  }
  return OkStatus();
}

Status RemoveOutOfSight(const std::string& dir, const std::string& name) {
  const std::string from = dir + "/" + name;
  const std::string hidden = dir + "/.removing-" + name + "-" + std::to_string(::getpid());
  if (::rename(from.c_str(), hidden.c_str()) != 0) {
    if (errno == ENOENT) return OkStatus();
    return InternalError(from + ": cannot move out of sight: " + std::strerror(errno));
  }
  return RemoveTree(hidden);
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return InternalError(path + ": cannot remove: " + ec.message());
  return OkStatus();
}

bool WriteFully(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace tarn
