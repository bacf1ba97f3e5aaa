// AuditLog: the record of who did what to tarn (Kubernetes' audit events are the model): one
// JSON object per line, appended to a file only its owner reads (mode 0600, the server's
// account: root), rotated by size as logrotate would (audit.log -> audit.log.1 -> ... ->
// audit.log.<keep>, the oldest dropped). Each event gets "time" (RFC 3339, UTC, ms) and
// "time_ms" first; the caller fills the rest (who, how authenticated, what, the status).
//
// Thread-safe: Record() appends under a mutex with one write(2) per line, so lines never
// interleave; a failed write is reported once on stderr and never fails the request.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace tarn::auth {

class AuditLog {
 public:
  struct Options {
    std::string path;                  // required
    int64_t max_bytes = 16ll << 20;    // rotate once the file would grow past this
    int keep = 4;                      // rotated files kept besides the live one
    const Clock* clock = nullptr;      // required: the wall clock of "time"
  };

  static StatusOr<std::unique_ptr<AuditLog>> Open(Options options);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  void Record(const nlohmann::json& event);

  // The events at or after `since_ms`, oldest first, the newest `limit` of them, read from
  // the rotated files and the live one. Lines that are not JSON objects are skipped.
  std::vector<nlohmann::json> Read(int64_t since_ms, size_t limit) const;

  const std::string& path() const { return options_.path; }

 private:
  explicit AuditLog(Options options);
  void RotateLocked();

  const Options options_;
  mutable std::mutex mu_;
  int fd_ = -1;           // guarded by mu_
  int64_t size_ = 0;      // guarded by mu_
  bool warned_ = false;   // guarded by mu_
};

// "2026-12-02T07:01:02.123Z"
std::string Rfc3339Millis(int64_t wall_ms);
// Parses "2026-12-02T07:01:02Z" (fraction and offset optional: "+02:00") or milliseconds since
// the epoch; InvalidArgument naming the text otherwise.
StatusOr<int64_t> ParseTime(const std::string& text);

}  // namespace tarn::auth
