#include "common/proc_stat.h"

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
  st.state = (*text)[paren + 2];
  size_t pos = paren + 2;  // field 3
  for (int field = 3; field < 22 && pos != std::string::npos; ++field) {
    pos = text->find(' ', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos) return std::nullopt;
  st.start_time = text->substr(pos, text->find(' ', pos) - pos);
  return st;
}

}  // namespace tarn
