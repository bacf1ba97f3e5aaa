#include "cli/identity.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include "common/file.h"
#include "common/local_paths.h"

namespace tarn::cli {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

StatusOr<std::string> AccountName() {
  struct passwd pw {};
  struct passwd* result = nullptr;
  char buf[4096];
  const uid_t uid = ::geteuid();
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &result) == 0 && result != nullptr) {
    return std::string(result->pw_name);
  }
  return NotFoundError("uid " + std::to_string(uid) + " has no account name");
}

StatusOr<std::string> CurrentUserName() {
  if (std::string u = Env("TARN_USER"); !u.empty()) return u;
  StatusOr<std::string> name = AccountName();
  if (!name.ok()) {
    return NotFoundError(name.status().message() + "; set TARN_USER to the name to plan for");
  }
  return name;
}

std::optional<std::string> ActingUser(const std::string& flag) {
  if (!flag.empty()) return flag;
  auto current = CurrentUserName();
  if (!current.ok()) {
    std::cerr << "tarn: " << current.status().message() << "\n";
    return std::nullopt;
  }
  return *current;
}

std::optional<Acting> ResolveActing(const std::string& as_flag, const std::string& user_flag) {
  StatusOr<std::string> account = AccountName();
  if (!account.ok()) {
    std::cerr << "tarn: " << account.status().message() << "\n";
    return std::nullopt;
  }
  Acting acting;
  const std::string user = !user_flag.empty() ? user_flag : Env("TARN_USER");
  if (!as_flag.empty()) {
    acting.as = as_flag;
  } else if (!user.empty() && user != *account) {
    if (::geteuid() == 0) {
      acting.as = user;  // root's --user / $TARN_USER mean --as, as they always did
    } else {
      std::cerr << "tarn: warning: " << (user_flag.empty() ? "$TARN_USER" : "--user") << " ("
                << user << ") is ignored: you act as " << *account
                << "; only an admin acts for another tenant (--as)\n";
    }
  }
  acting.name = acting.as.empty() ? *account : acting.as;
  return acting;
}

std::string TokenFilePath() {
  std::string base = Env("XDG_CONFIG_HOME");
  if (base.empty()) base = HomeDir() + "/.config";
  return base + "/tarn/token";
}

std::string BearerToken() {
  if (std::string t = Env("TARN_TOKEN"); !t.empty()) return t;
  std::ifstream in(TokenFilePath());
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

Status SaveToken(const std::string& token) {
  const std::string path = TokenFilePath();
  const std::string dir = path.substr(0, path.rfind('/'));
  RETURN_IF_ERROR(MakeDirectories(dir, 0700));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return UnavailableError(tmp + ": " + std::strerror(errno));
  ::fchmod(fd, 0600);
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return UnavailableError(path + ": cannot write the token: " + std::strerror(errno));
  }
  return OkStatus();
}

std::string SocketPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (std::string s = Env("TARN_SOCKET"); !s.empty()) return s;
  if (::geteuid() == 0 || Exists(kRootSocketPath)) return kRootSocketPath;
  // One's own server's, where it puts it when it is not root.
  const std::string own = DefaultSocketPath();
  return Exists(own) ? own : kRootSocketPath;
}

}  // namespace tarn::cli
