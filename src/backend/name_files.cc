#include "backend/name_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace tarn::backend {
namespace {

std::string BlockStart(const std::string& user, const std::string& assembly) {
  return "# tarn: the names of assembly " + assembly + " of " + user +
         ", kept current by tarn server\n";
}

}  // namespace

std::string ModeName(NameResolution::Mode mode) {
  switch (mode) {
    case NameResolution::Mode::kResolvConf:
      return "resolv-conf";
    case NameResolution::Mode::kHosts:
      return "hosts";
    case NameResolution::Mode::kNone:
      break;
  }
  return "none";
}

std::string RenderResolvConf(const std::string& resolver_ip, const std::string& user,
                             const std::string& assembly, const std::string& domain) {
  const std::string user_domain = user + "." + domain;
  return "# tarn: names of this machine's assemblies resolve through tarn server's DNS\n"
         "nameserver " +
         resolver_ip + "\nsearch " + assembly + "." + user_domain + " " + user_domain + " " +
         domain + "\noptions ndots:2\n";
}

std::string RenderHostsFile(const std::string& machine_hosts, const std::string& tarn_lines,
                            const std::string& user, const std::string& assembly) {
  std::string out = machine_hosts;
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out + BlockStart(user, assembly) + tarn_lines;
}

std::vector<std::string> NameserversOf(const std::string& resolv_conf) {
  std::vector<std::string> out;
  std::istringstream lines(resolv_conf);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string key, value;
    if (words >> key >> value && key == "nameserver") out.push_back(value);
  }
  return out;
}

Status RewriteInPlace(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError(path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n =
        ::pwrite(fd, content.data() + done, content.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      return InternalError(path + ": write: " + std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (::ftruncate(fd, static_cast<off_t>(content.size())) != 0) {
    const int e = errno;
    ::close(fd);
    return InternalError(path + ": truncate: " + std::strerror(e));
  }
  ::fchmod(fd, 0644);
  ::close(fd);
  return OkStatus();
}

}  // namespace tarn::backend
