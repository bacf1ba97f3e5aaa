#include "auth/audit_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <iostream>

#include "common/number.h"

namespace tarn::auth {
namespace {

int OpenForAppend(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) ::fchmod(fd, 0600);  // an older file keeps its mode otherwise
  return fd;
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

}  // namespace

std::string Rfc3339Millis(int64_t wall_ms) {
  const time_t secs = static_cast<time_t>(wall_ms / 1000);
  struct tm tm {};
  ::gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(wall_ms % 1000));
  return buf;
}

StatusOr<int64_t> ParseTime(const std::string& text) {
  if (auto ms = ParseInt64(text); ms && *ms >= 0) return *ms;
  auto bad = [&text] {
    return InvalidArgumentError("\"" + text +
                                "\" is not a time (use RFC 3339, e.g. 2026-12-02T07:00:00Z, or "
                                "milliseconds since the epoch)");
  };
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, used = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &used) != 6 ||
      used != 19) {
    return bad();
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return bad();
  std::string_view rest = std::string_view(text).substr(19);
  int64_t millis = 0;
  if (!rest.empty() && rest[0] == '.') {
    rest.remove_prefix(1);
    int digits = 0;
    while (!rest.empty() && rest[0] >= '0' && rest[0] <= '9') {
      if (digits < 3) millis = millis * 10 + (rest[0] - '0');
      ++digits;
      rest.remove_prefix(1);
    }
    if (digits == 0) return bad();
    for (int i = digits; i < 3; ++i) millis *= 10;
  }
  int64_t offset_s = 0;
  if (rest == "Z" || rest == "z") {
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':') {
    auto oh = ParseInt64(rest.substr(1, 2));
    auto om = ParseInt64(rest.substr(4, 2));
    if (!oh || !om) return bad();
    offset_s = (*oh * 3600 + *om * 60) * (rest[0] == '+' ? 1 : -1);
  } else {
    return bad();
  }
  const int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  return ((days * 86400 + h * 3600 + mi * 60 + s) - offset_s) * 1000 + millis;
}

StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(Options options) {
  std::unique_ptr<AuditLog> log(new AuditLog(std::move(options)));
  log->fd_ = OpenForAppend(log->options_.path);
  if (log->fd_ < 0) {
    return UnavailableError(log->options_.path + ": cannot open the audit log: " +
                            std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(log->fd_, &st) == 0) log->size_ = st.st_size;
  return log;
}

AuditLog::AuditLog(Options options) : options_(std::move(options)) {}

AuditLog::~AuditLog() {
  if (fd_ >= 0) ::close(fd_);
}

void AuditLog::RotateLocked() {
  const std::string& p = options_.path;
  for (int i = options_.keep; i >= 1; --i) {
    const std::string from = i == 1 ? p : p + "." + std::to_string(i - 1);
    const std::string to = p + "." + std::to_string(i);
    if (i == options_.keep) ::unlink(to.c_str());
    ::rename(from.c_str(), to.c_str());
  }
  if (options_.keep <= 0) ::unlink(p.c_str());
  ::close(fd_);
  fd_ = OpenForAppend(p);
  size_ = 0;
}

void AuditLog::Record(const nlohmann::json& event) {
  const int64_t now = options_.clock->WallMillis();
  // The time first, for readers of the file (nlohmann::json orders the other keys by name).
  std::string text = "{\"time\":\"" + Rfc3339Millis(now) + "\",\"time_ms\":" + std::to_string(now);
  const std::string rest = event.is_object() && !event.empty()
                               ? event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                               : "{}";
  text += rest.size() > 2 ? "," + rest.substr(1) : "}";
  text += "\n";
  std::lock_guard lock(mu_);
  if (size_ > 0 && size_ + static_cast<int64_t>(text.size()) > options_.max_bytes) RotateLocked();
  const ssize_t n = fd_ < 0 ? -1 : ::write(fd_, text.data(), text.size());
  if (n != static_cast<ssize_t>(text.size())) {
    if (!warned_) {
      std::cerr << "tarn server: warning: cannot append to the audit log " << options_.path
                << ": " << (n < 0 ? std::strerror(errno) : "short write") << "\n";
      warned_ = true;
    }
    return;
  }
  size_ += n;
}

std::vector<nlohmann::json> AuditLog::Read(int64_t since_ms, size_t limit) const {
  std::lock_guard lock(mu_);  // no rotation while the files are read
  std::deque<nlohmann::json> out;
  for (int i = options_.keep; i >= 0; --i) {
    std::ifstream in(i == 0 ? options_.path : options_.path + "." + std::to_string(i));
    std::string text;
    while (std::getline(in, text)) {
      nlohmann::json e = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!e.is_object()) continue;
      auto t = e.find("time_ms");
      if (t == e.end() || !t->is_number_integer() || t->get<int64_t>() < since_ms) continue;
      out.push_back(std::move(e));
      if (out.size() > limit) out.pop_front();
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace tarn::auth
