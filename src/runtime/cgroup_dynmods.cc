#include "runtime/cgroup_dynmods.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/file.h"
#include "common/strings.h"

namespace tarn::runtime {
namespace {

constexpr char kFlag[] = "favordynmods";

// mountinfo escapes space, tab, newline and backslash as \ooo (octal).
std::string Unescape(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() &&
        std::all_of(field.begin() + i + 1, field.begin() + i + 4,
                    [](char c) { return c >= '0' && c <= '7'; })) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

bool Has(const std::vector<std::string>& options, const std::string& option) {
  return std::find(options.begin(), options.end(), option) != options.end();
}

}  // namespace

std::vector<CgroupMount> CgroupMounts(const std::string& mountinfo) {
  std::vector<CgroupMount> mounts;
  std::stringstream lines(mountinfo);
  std::string line;
  while (std::getline(lines, line)) {
    // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FS_TYPE SOURCE SUPER_OPTIONS
    std::stringstream in(line);
    std::vector<std::string> fields;
    std::string f;
    while (in >> f) fields.push_back(f);
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 6 || dash == fields.end() || fields.end() - dash < 4) continue;
    CgroupMount m;
    m.mount_point = Unescape(fields[4]);
    m.fs_type = *(dash + 1);
    if (m.fs_type != "cgroup" && m.fs_type != "cgroup2") continue;
    m.super_options = SplitCommas(*(dash + 3));
    mounts.push_back(std::move(m));
  }
  return mounts;
}

bool FavorsDynmods(const std::vector<CgroupMount>& mounts) {
  return std::any_of(mounts.begin(), mounts.end(),
                     [](const CgroupMount& m) { return Has(m.super_options, kFlag); });
}

StatusOr<DynmodsPlan> PlanFavorDynmods(const std::vector<CgroupMount>& mounts) {
  for (const CgroupMount& m : mounts) {
    if (m.fs_type != "cgroup2") continue;
    DynmodsPlan plan;
    plan.mount_point = m.mount_point;
    for (const std::string& o : m.super_options) {
      // The superblock's read-only state is not ours to change; the rest are cgroup2's own
      // flags, which a reconfiguration clears unless given again.
      if (o != "rw" && o != "ro" && o != kFlag) plan.flags.push_back(o);
    }
    plan.flags.push_back(kFlag);
    return plan;
  }
  return NotFoundError(
      "no cgroup2 hierarchy is mounted, so favordynmods cannot be turned on by reconfiguring "
      "one; boot with cgroup_favordynmods=true instead");
}

StatusOr<std::string> FavorDynmods(const std::string& mountinfo_path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(mountinfo_path, 4 << 20));
  std::vector<CgroupMount> mounts = CgroupMounts(text);
  if (FavorsDynmods(mounts)) return std::string("cgroup favordynmods already on");
  ASSIGN_OR_RETURN(DynmodsPlan plan, PlanFavorDynmods(mounts));
  const int fd = ::fspick(AT_FDCWD, plan.mount_point.c_str(), FSPICK_CLOEXEC | FSPICK_NO_AUTOMOUNT);
  if (fd < 0) {
    return InternalError("favordynmods: fspick " + plan.mount_point + ": " + std::strerror(errno));
  }
  std::string given;
  for (const std::string& flag : plan.flags) {
    if (::fsconfig(fd, FSCONFIG_SET_FLAG, flag.c_str(), nullptr, 0) != 0) {
      const int err = errno;
      ::close(fd);
      return InternalError("favordynmods: the cgroup2 mount at " + plan.mount_point +
                           " does not take \"" + flag + "\": " + std::strerror(err) +
                           (flag == kFlag ? " (Linux 6.0 or later has it)" : ""));
    }
    given += (given.empty() ? "" : ",") + flag;
  }
  if (::fsconfig(fd, FSCONFIG_CMD_RECONFIGURE, nullptr, nullptr, 0) != 0) {
    const int err = errno;
    ::close(fd);
    return InternalError("favordynmods: reconfiguring the cgroup2 mount at " + plan.mount_point +
                         " with " + given + ": " + std::strerror(err));
  }
  ::close(fd);
  return "cgroup favordynmods turned on (the cgroup2 mount at " + plan.mount_point +
         " reconfigured with " + given + ")";
}

}  // namespace tarn::runtime
