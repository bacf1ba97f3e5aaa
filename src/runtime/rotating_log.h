// RotatingLog: appends a container's output to `path`, and when the file would pass
// `max_bytes` renames it to path.1 (path.1 to path.2, ...), keeping `keep` old files, as
// logrotate or Docker's json-file driver do. Not thread-safe; one per stream.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tarn::runtime {

class RotatingLog {
 public:
  static StatusOr<RotatingLog> Open(std::string path, int64_t max_bytes, int keep);
  RotatingLog(RotatingLog&& other) noexcept;
  RotatingLog& operator=(RotatingLog&& other) noexcept;
  RotatingLog(const RotatingLog&) = delete;
  RotatingLog& operator=(const RotatingLog&) = delete;
  ~RotatingLog();

  Status Append(std::string_view data);

 private:
  RotatingLog(std::string path, int64_t max_bytes, int keep, int fd, int64_t size);
  Status Rotate();

  std::string path_;
  int64_t max_bytes_;
  int keep_;
  int fd_ = -1;
  int64_t size_ = 0;
};

}  // namespace tarn::runtime
