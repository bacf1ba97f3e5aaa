// TempDir: a fresh directory under /tmp (mkdtemp), removed with everything in it when the
// object is destroyed. For tests. Movable, not copyable; not thread-safe.
#pragma once

#include <string>

namespace tarn {

class TempDir {
 public:
  // "/tmp/<prefix>-XXXXXX"; aborts when /tmp is unusable (a test cannot go on anyway).
  explicit TempDir(const std::string& prefix = "tarn-test");
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&&) = delete;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tarn
