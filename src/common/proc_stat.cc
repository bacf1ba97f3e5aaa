#include "common/proc_stat.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "common/file.h"

namespace tarn {

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  auto text = ReadFileToString("/proc/" + std::to_string(pid) + "/stat", 1 << 16);
  if (!text.ok()) return std::nullopt;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so count from the
  // last ')'.
  size_t paren = text->rfind(')');
  if (paren == std::string::npos || paren + 2 >= text->size()) return std::nullopt;
  ProcStat st;
  if (size_t open = text->find('('); open != std::string::npos && open < paren) {
    st.comm = text->substr(open + 1, paren - open - 1);
  }
  st.state = (*text)[paren + 2];
  st.ppid = static_cast<pid_t>(std::atoi(text->c_str() + paren + 3));
  size_t pos = paren + 2;  // field 3
  for (int field = 3; field < 22 && pos != std::string::npos; ++field) {
    pos = text->find(' ', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos) return std::nullopt;
  st.start_time = text->substr(pos, text->find(' ', pos) - pos);
  return st;
}

std::vector<pid_t> ChildProcesses() {
  std::vector<pid_t> out;
  bool listed = false;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end;
       it.increment(ec)) {
    auto children = ReadFileToString(it->path().string() + "/children", 1 << 20);
    if (!children.ok()) continue;
    listed = true;
    std::istringstream in(*children);
    for (pid_t pid; in >> pid;) out.push_back(pid);
  }
  if (listed) return out;
  const pid_t self = ::getpid();
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atoi(name.c_str()));
    if (auto st = ReadProcStat(pid); st && st->ppid == self) out.push_back(pid);
  }
  return out;
}

}  // namespace tarn
