#include "runtime/container_spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "common/base64.h"
#include "common/file.h"

namespace tarn::runtime {

std::optional<std::string> EnvValue(const ContainerSpec& spec, std::string_view name) {
  for (const std::string& e : spec.env) {
    if (e.size() > name.size() && e[name.size()] == '=' && e.compare(0, name.size(), name) == 0) {
      return e.substr(name.size() + 1);
    }
  }
  return std::nullopt;
}

nlohmann::json ToJson(const ContainerSpec& s) {
  return {
      {"id", s.id},
      {"shim_dir", s.shim_dir},
      {"work_dir", s.work_dir},
      {"hostname", s.hostname},
      {"argv", s.argv},
      {"env", s.env},
      {"run_uid", s.run_uid},
      {"run_gid", s.run_gid},
      {"isolate", s.isolate},
      {"user_namespace", s.user_namespace},
      {"cgroup", s.cgroup},
      {"limits",
       {{"memory_mib", s.limits.memory_mib},
        {"vcores", s.limits.vcores},
        {"pids_max", s.limits.pids_max},
        {"restrict_devices", s.limits.restrict_devices},
        {"gpu_minors", s.limits.gpu_minors}}},
      {"log_max_bytes", s.log_max_bytes},
      {"log_keep", s.log_keep},
      {"stop_grace_ms", s.stop_grace_ms},
      {"image", s.image},
      {"bind_paths", s.bind_paths},
      {"gpus", s.gpus},
      {"files",
       [&] {
         nlohmann::json files = nlohmann::json::array();
         for (const WorkFile& f : s.files) {
           files.push_back({{"path", f.path}, {"base64", Base64Encode(f.content)}});
         }
         return files;
       }()},
      {"tarball", s.tarball},
      {"resolv_conf", s.resolv_conf},
      {"hosts_file", s.hosts_file},
  };
}

StatusOr<ContainerSpec> ContainerSpecFromJson(const nlohmann::json& j) {
  try {
    ContainerSpec s;
    s.id = j.at("id").get<std::string>();
    s.shim_dir = j.at("shim_dir").get<std::string>();
    s.work_dir = j.at("work_dir").get<std::string>();
    s.hostname = j.at("hostname").get<std::string>();
    s.argv = j.at("argv").get<std::vector<std::string>>();
    s.env = j.at("env").get<std::vector<std::string>>();
    s.run_uid = j.at("run_uid").get<uid_t>();
    s.run_gid = j.at("run_gid").get<gid_t>();
    s.isolate = j.at("isolate").get<bool>();
    s.user_namespace = j.value("user_namespace", false);
    s.cgroup = j.at("cgroup").get<std::string>();
    const auto& l = j.at("limits");
    s.limits.memory_mib = l.at("memory_mib").get<int64_t>();
    s.limits.vcores = l.at("vcores").get<int64_t>();
    s.limits.pids_max = l.at("pids_max").get<int64_t>();
    s.limits.restrict_devices = l.at("restrict_devices").get<bool>();
    s.limits.gpu_minors = l.at("gpu_minors").get<std::vector<int>>();
    s.log_max_bytes = j.at("log_max_bytes").get<int64_t>();
    s.log_keep = j.at("log_keep").get<int>();
    s.stop_grace_ms = j.at("stop_grace_ms").get<int64_t>();
    s.image = j.value("image", "");
    s.bind_paths = j.value("bind_paths", std::vector<std::string>{});
    s.gpus = j.value("gpus", std::vector<int>{});
    s.tarball = j.value("tarball", "");
    s.resolv_conf = j.value("resolv_conf", "");
    s.hosts_file = j.value("hosts_file", "");
    for (const auto& f : j.value("files", nlohmann::json::array())) {
      ASSIGN_OR_RETURN(std::string content, Base64Decode(f.at("base64").get<std::string>()));
      s.files.push_back({f.at("path").get<std::string>(), std::move(content)});
    }
    if (s.argv.empty() && s.image.empty()) {
      return InvalidArgumentError("container spec: argv is empty");
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("container spec: ") + e.what());
  }
}

nlohmann::json ToJson(const ExitInfo& e) {
  return {{"exit_code", e.exit_code},           {"signal", e.signal},
          {"oom_killed", e.oom_killed},         {"memory_limit_mib", e.memory_limit_mib},
          {"finished_at_ms", e.finished_at_ms}, {"diagnostics", e.diagnostics}};
}

StatusOr<ExitInfo> ExitInfoFromJson(const nlohmann::json& j) {
  try {
    ExitInfo e;
    e.exit_code = j.at("exit_code").get<int>();
    e.signal = j.at("signal").get<int>();
    e.oom_killed = j.at("oom_killed").get<bool>();
    e.memory_limit_mib = j.at("memory_limit_mib").get<int64_t>();
    e.finished_at_ms = j.at("finished_at_ms").get<int64_t>();
    e.diagnostics = j.at("diagnostics").get<std::string>();
    return e;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("exit status: ") + e.what());
  }
}

std::string DescribeExit(const ExitInfo& e) {
  if (e.oom_killed) {
    return "killed: exceeded its " + std::to_string(e.memory_limit_mib) + " MiB memory limit";
  }
  if (e.signal > 0) {
    const char* name = sigabbrev_np(e.signal);
    return "killed by signal " + std::to_string(e.signal) +
           (name ? std::string(" (SIG") + name + ")" : std::string());
  }
  return "exited with code " + std::to_string(e.exit_code);
}

std::string LastLogLine(const std::string& path) {
  constexpr off_t kTail = 4096;
  constexpr size_t kMaxLine = 200;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return "";
  struct stat st {};
  std::string tail;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    const off_t from = st.st_size > kTail ? st.st_size - kTail : 0;
    tail.resize(static_cast<size_t>(st.st_size - from));
    const ssize_t n = ::pread(fd, tail.data(), tail.size(), from);
    tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  auto blank = [](char c) { return c == '\n' || c == '\r' || c == ' ' || c == '\t'; };
  while (!tail.empty() && blank(tail.back())) tail.pop_back();
  const size_t start = tail.find_last_of('\n');
  const std::string raw = start == std::string::npos ? tail : tail.substr(start + 1);
  // Into JSON (tarn status) later: whole UTF-8 characters only, anything else as '?'.
  std::string line;
  for (size_t i = 0; i < raw.size() && line.size() < kMaxLine;) {
    const auto b = static_cast<unsigned char>(raw[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
    bool whole = n > 0 && i + n <= raw.size();
    uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1f) : n == 3 ? (b & 0x0f) : (b & 0x07);
    for (size_t k = 1; whole && k < n; ++k) {
      const auto c = static_cast<unsigned char>(raw[i + k]);
      whole = (c & 0xc0) == 0x80;
      cp = (cp << 6) | (c & 0x3f);
    }
    // Not overlong, not a surrogate, not beyond U+10FFFF.
    whole = whole && !(n == 2 && cp < 0x80) && !(n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) &&
            !(n == 4 && (cp < 0x10000 || cp > 0x10ffff));
    if (!whole || (n == 1 && (b < 0x20 || b == 0x7f))) {
      line += '?';
      ++i;
    } else {
      line.append(raw, i, n);
      i += n;
    }
  }
  if (line.size() >= kMaxLine) line += "...";
  return line;
}

Status WriteFileAtomically(const std::string& path, const std::string& content, bool durable,
                           mode_t mode) {
  std::string tmp = path + ".tmp";
  // A temporary file left by a crash is replaced; whatever else is at its name (a link an
  // account that can write the directory put there) is removed, not followed.
  ::unlink(tmp.c_str());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return InternalError(tmp + ": cannot create: " + std::strerror(errno));
  if (::fchmod(fd, mode) != 0) {  // the umask may have taken bits away
    int err = errno;
    ::close(fd);
    return InternalError(tmp + ": chmod failed: " + std::strerror(err));
  }
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return InternalError(tmp + ": write failed: " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if ((durable && ::fsync(fd) != 0) || ::close(fd) != 0) {
    return InternalError(tmp + ": fsync failed: " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return InternalError(path + ": rename failed: " + std::strerror(errno));
  }
  return OkStatus();
}

StatusOr<std::optional<ExitInfo>> ReadExitFile(const std::string& shim_dir) {
  auto text = ReadFileToString(shim_dir + "/exit.json", 1 << 16);
  if (!text.ok()) return std::optional<ExitInfo>();
  try {
    ASSIGN_OR_RETURN(ExitInfo exit, ExitInfoFromJson(nlohmann::json::parse(*text)));
    return std::optional<ExitInfo>(std::move(exit));
  } catch (const nlohmann::json::exception& e) {
    return DataLossError(shim_dir + "/exit.json: " + e.what());
  }
}

}  // namespace tarn::runtime
