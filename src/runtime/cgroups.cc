#include "runtime/cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

#include "common/file.h"

namespace tarn::runtime {
namespace {

Status WriteFile(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError(path + ": cannot open: " + std::strerror(errno));
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return InternalError(path + ": cannot write \"" + value + "\": " + std::strerror(err));
  }
  return OkStatus();
}

bool PathExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// mkdir -p of a relative group name below an existing `base`.
Status MakeDirs(const std::string& base, const std::string& name) {
  if (name.empty() || name[0] == '/' || name.find("..") != std::string::npos) {
    return InvalidArgumentError("bad cgroup name " + name);
  }
  return MakeDirectories(base + "/" + name);
}

int64_t ParseKeyed(const std::string& text, const std::string& key) {
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string::npos) {
    bool line_start = at == 0 || text[at - 1] == '\n';
    size_t value = at + key.size();
    if (line_start && value < text.size() && text[value] == ' ') {
      int64_t v = 0;
      const char* b = text.data() + value + 1;
      std::from_chars(b, text.data() + text.size(), v);
      return v;
    }
    at = value;
  }
  return 0;
}

int64_t ParseNumber(const std::string& text) {
  int64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

StatusOr<std::vector<pid_t>> ReadProcs(const std::string& file) {
  auto text = ReadFileToString(file, 16 << 20);
  if (!text.ok()) return text.status();
  std::vector<pid_t> pids;
  size_t start = 0;
  while (start < text->size()) {
    size_t nl = text->find('\n', start);
    if (nl == std::string::npos) nl = text->size();
    if (nl > start)
      pids.push_back(static_cast<pid_t>(ParseNumber(text->substr(start, nl - start))));
    start = nl + 1;
  }
  return pids;
}

Status KillUntilEmpty(const std::string& procs_file) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto pids = ReadProcs(procs_file);
    if (!pids.ok()) return pids.status();
    if (pids->empty()) return OkStatus();
    for (pid_t p : *pids) {
      if (p > 0) ::kill(p, SIGKILL);
    }
    // Killed processes leave the group once they are reaped; give the kernel a moment.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return InternalError(procs_file + ": processes remain after SIGKILL");
}

// Removes the now empty groups between `base` and a removed `name` ("tarn/alice/fmnist"
// after "tarn/alice/fmnist/worker-0"); a group still in use by a sibling stays (rmdir fails).
void PruneParents(const std::string& base, const std::string& name) {
  std::string rest = name;
  size_t slash;
  while ((slash = rest.rfind('/')) != std::string::npos) {
    rest = rest.substr(0, slash);
    if (rest.empty() || ::rmdir((base + "/" + rest).c_str()) != 0) break;
  }
}

class CgroupsV1 final : public Cgroups {
 public:
  explicit CgroupsV1(std::map<std::string, std::string> bases) : bases_(std::move(bases)) {}

  std::string Describe() const override {
    std::string out = "cgroup v1 (";
    bool first = true;
    for (const auto& [c, base] : bases_) {
      out += (first ? "" : ", ") + c;
      first = false;
    }
    return out + ")";
  }

  Status Create(const std::string& name, const CgroupLimits& l) override {
    for (const auto& [controller, base] : bases_) RETURN_IF_ERROR(MakeDirs(base, name));
    if (Has("memory") && l.memory_mib > 0) {
      std::string bytes = std::to_string(l.memory_mib << 20);
      RETURN_IF_ERROR(WriteFile(Dir("memory", name) + "/memory.limit_in_bytes", bytes));
      // memsw is memory + swap: equal to the limit means no swap beyond it.
      std::string memsw = Dir("memory", name) + "/memory.memsw.limit_in_bytes";
      if (PathExists(memsw)) RETURN_IF_ERROR(WriteFile(memsw, bytes));
    }
    if (Has("cpu") && l.vcores > 0) {
      std::string dir = Dir("cpu", name);
      RETURN_IF_ERROR(WriteFile(dir + "/cpu.shares", std::to_string(1024 * l.vcores)));
      RETURN_IF_ERROR(WriteFile(dir + "/cpu.cfs_period_us", "100000"));
      RETURN_IF_ERROR(WriteFile(dir + "/cpu.cfs_quota_us", std::to_string(100000 * l.vcores)));
    }
    if (Has("pids") && l.pids_max > 0) {
      RETURN_IF_ERROR(WriteFile(Dir("pids", name) + "/pids.max", std::to_string(l.pids_max)));
    }
    if (Has("devices") && l.restrict_devices) {
      std::string dir = Dir("devices", name);
      RETURN_IF_ERROR(WriteFile(dir + "/devices.deny", "a"));
      // The devices every container needs (runc's defaults), then the GPUs it was given.
      for (const char* rule :
           {"c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm", "c 1:9 rwm", "c 5:0 rwm",
            "c 5:1 rwm", "c 5:2 rwm", "c 136:* rwm", "c 195:255 rwm", "c 195:254 rwm"}) {
        RETURN_IF_ERROR(WriteFile(dir + "/devices.allow", rule));
      }
      for (int minor : l.gpu_minors) {
        RETURN_IF_ERROR(
            WriteFile(dir + "/devices.allow", "c 195:" + std::to_string(minor) + " rwm"));
      }
    }
    return OkStatus();
  }

  Status AddProcess(const std::string& name, pid_t pid) override {
    for (const auto& [controller, base] : bases_) {
      RETURN_IF_ERROR(WriteFile(Dir(controller, name) + "/cgroup.procs", std::to_string(pid)));
    }
    return OkStatus();
  }

  StatusOr<std::vector<pid_t>> Processes(const std::string& name) const override {
    return ReadProcs(Dir(Primary(), name) + "/cgroup.procs");
  }

  StatusOr<CgroupStats> Stats(const std::string& name) const override {
    CgroupStats s;
    if (!Has("memory")) return s;
    std::string dir = Dir("memory", name);
    ASSIGN_OR_RETURN(std::string oom, ReadFileToString(dir + "/memory.oom_control"));
    s.oom_kills = ParseKeyed(oom, "oom_kill");
    if (auto t = ReadFileToString(dir + "/memory.limit_in_bytes"); t.ok()) {
      s.memory_limit_bytes = ParseNumber(*t);
    }
    if (auto t = ReadFileToString(dir + "/memory.max_usage_in_bytes"); t.ok()) {
      s.memory_peak_bytes = ParseNumber(*t);
    }
    return s;
  }

  Status KillAll(const std::string& name) override {
    for (const auto& [controller, base] : bases_) {
      if (!PathExists(Dir(controller, name))) continue;
      RETURN_IF_ERROR(KillUntilEmpty(Dir(controller, name) + "/cgroup.procs"));
    }
    return OkStatus();
  }

  Status Remove(const std::string& name) override {
    for (const auto& [controller, base] : bases_) {
      std::string dir = Dir(controller, name);
      if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) {
        return InternalError(dir + ": cannot remove cgroup: " + std::strerror(errno));
      }
      PruneParents(base, name);
    }
    return OkStatus();
  }

  bool Exists(const std::string& name) const override {
    for (const auto& [controller, base] : bases_) {
      if (PathExists(Dir(controller, name))) return true;
    }
    return false;
  }

 private:
  bool Has(const std::string& c) const { return bases_.count(c) > 0; }
  std::string Dir(const std::string& c, const std::string& name) const {
    return bases_.at(c) + "/" + name;
  }
  std::string Primary() const { return Has("memory") ? "memory" : bases_.begin()->first; }

  std::map<std::string, std::string> bases_;
};

class CgroupsV2 final : public Cgroups {
 public:
  explicit CgroupsV2(std::string base) : base_(std::move(base)) {}

  std::string Describe() const override { return "cgroup v2 (" + base_ + ")"; }

  Status Create(const std::string& name, const CgroupLimits& l) override {
    // Enable the controllers at every level from the base down to the group's parent.
    std::string path = base_;
    size_t start = 0;
    while (true) {
      RETURN_IF_ERROR(EnableControllers(path));
      size_t slash = name.find('/', start);
      std::string part = name.substr(start, slash == std::string::npos ? name.npos : slash - start);
      if (part == "." || part == ".." || part.empty()) {
        return InvalidArgumentError("bad cgroup name " + name);
      }
      path += "/" + part;
      if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
        return InternalError(path + ": cannot create cgroup: " + std::strerror(errno));
      }
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (l.memory_mib > 0) {
      RETURN_IF_ERROR(WriteFile(path + "/memory.max", std::to_string(l.memory_mib << 20)));
      RETURN_IF_ERROR(WriteFile(path + "/memory.swap.max", "0"));
    }
    if (l.vcores > 0) {
      RETURN_IF_ERROR(
          WriteFile(path + "/cpu.weight", std::to_string(SharesToWeight(1024 * l.vcores))));
      RETURN_IF_ERROR(WriteFile(path + "/cpu.max", std::to_string(100000 * l.vcores) + " 100000"));
    }
    if (l.pids_max > 0) {
      RETURN_IF_ERROR(WriteFile(path + "/pids.max", std::to_string(l.pids_max)));
    }
    return OkStatus();
  }

  Status AddProcess(const std::string& name, pid_t pid) override {
    return WriteFile(base_ + "/" + name + "/cgroup.procs", std::to_string(pid));
  }

  StatusOr<std::vector<pid_t>> Processes(const std::string& name) const override {
    return ReadProcs(base_ + "/" + name + "/cgroup.procs");
  }

  StatusOr<CgroupStats> Stats(const std::string& name) const override {
    CgroupStats s;
    std::string dir = base_ + "/" + name;
    ASSIGN_OR_RETURN(std::string events, ReadFileToString(dir + "/memory.events"));
    s.oom_kills = ParseKeyed(events, "oom_kill");
    if (auto t = ReadFileToString(dir + "/memory.max"); t.ok() && *t != "max\n") {
      s.memory_limit_bytes = ParseNumber(*t);
    }
    if (auto t = ReadFileToString(dir + "/memory.peak"); t.ok()) {
      s.memory_peak_bytes = ParseNumber(*t);
    }
    return s;
  }

  Status KillAll(const std::string& name) override {
    std::string dir = base_ + "/" + name;
    if (!PathExists(dir)) return OkStatus();
    // cgroup.kill (Linux 5.14) kills the whole subtree at once; otherwise one by one.
    if (PathExists(dir + "/cgroup.kill")) {
      RETURN_IF_ERROR(WriteFile(dir + "/cgroup.kill", "1"));
    }
    return KillUntilEmpty(dir + "/cgroup.procs");
  }

  Status Remove(const std::string& name) override {
    std::string dir = base_ + "/" + name;
    if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) {
      return InternalError(dir + ": cannot remove cgroup: " + std::strerror(errno));
    }
    PruneParents(base_, name);
    return OkStatus();
  }

  bool Exists(const std::string& name) const override { return PathExists(base_ + "/" + name); }

 private:
  Status EnableControllers(const std::string& dir) {
    auto available = ReadFileToString(dir + "/cgroup.controllers");
    if (!available.ok()) return available.status();
    std::string want;
    for (const char* c : {"memory", "cpu", "pids"}) {
      if (available->find(c) != std::string::npos)
        want += std::string(want.empty() ? "" : " ") + "+" + c;
    }
    if (want.empty()) return OkStatus();
    Status s = WriteFile(dir + "/cgroup.subtree_control", want);
    if (!s.ok()) {
      return s.WithContext(
          "enabling controllers (a cgroup v2 group that holds processes cannot "
          "delegate them; start tarn in its own group or choose another "
          "parent)");
    }
    return OkStatus();
  }

  std::string base_;
};

}  // namespace

int64_t SharesToWeight(int64_t shares) {
  if (shares <= 0) return 100;
  if (shares < 2) shares = 2;
  if (shares > 262144) shares = 262144;
  return 1 + ((shares - 2) * 9999) / 262142;
}

std::unique_ptr<Cgroups> MakeCgroupsV1(std::map<std::string, std::string> bases) {
  return std::make_unique<CgroupsV1>(std::move(bases));
}

std::unique_ptr<Cgroups> MakeCgroupsV2(std::string base) {
  return std::make_unique<CgroupsV2>(std::move(base));
}

namespace {
// Groups under `v2_path` of a unified hierarchy at `mount_root`, else under each v1
// controller's path.
StatusOr<std::unique_ptr<Cgroups>> CgroupsAt(const std::string& mount_root,
                                             const std::map<std::string, std::string>& v1_paths,
                                             const std::string& v2_path) {
  if (PathExists(mount_root + "/cgroup.controllers")) {
    return MakeCgroupsV2(mount_root + v2_path);
  }
  std::map<std::string, std::string> bases;
  for (const char* c : {"memory", "cpu", "pids", "devices"}) {
    auto it = v1_paths.find(c);
    if (it == v1_paths.end()) continue;
    // "cpu" may be co-mounted as "cpu,cpuacct".
    std::string mount = mount_root + "/" + c;
    if (!PathExists(mount)) continue;
    bases[c] = mount + it->second;
  }
  if (bases.empty()) {
    return UnavailableError("no cgroup hierarchy found under " + mount_root +
                            " (neither v2 nor the v1 memory, cpu, pids controllers)");
  }
  return MakeCgroupsV1(std::move(bases));
}
}  // namespace

StatusOr<std::unique_ptr<Cgroups>> DetectCgroups(const std::string& mount_root,
                                                 const std::string& self_cgroup) {
  ASSIGN_OR_RETURN(std::string self, ReadFileToString(self_cgroup));
  // Lines are "id:controllers:path"; v2's is "0::path".
  std::map<std::string, std::string> v1_paths;
  std::string v2_path;
  size_t start = 0;
  while (start < self.size()) {
    size_t nl = self.find('\n', start);
    if (nl == std::string::npos) nl = self.size();
    std::string line = self.substr(start, nl - start);
    start = nl + 1;
    size_t c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    std::string path = line.substr(c2 + 1);
    if (path == "/") path.clear();
    if (controllers.empty()) {
      v2_path = path;
      continue;
    }
    size_t cs = 0;
    while (cs <= controllers.size()) {
      size_t comma = controllers.find(',', cs);
      v1_paths[controllers.substr(cs, comma == std::string::npos ? controllers.npos : comma - cs)] =
          path;
      if (comma == std::string::npos) break;
      cs = comma + 1;
    }
  }
  return CgroupsAt(mount_root, v1_paths, v2_path);
}

StatusOr<std::unique_ptr<Cgroups>> DetectRootCgroups(const std::string& mount_root) {
  std::map<std::string, std::string> v1_paths;
  for (const char* c : {"memory", "cpu", "pids", "devices"}) v1_paths[c] = "";
  return CgroupsAt(mount_root, v1_paths, "");
}

}  // namespace tarn::runtime
