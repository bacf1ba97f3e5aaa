#include "scheduler/node_inventory.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "common/file.h"
#include "common/number.h"

namespace tarn::scheduler {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

StatusOr<std::string> RunNvidiaSmi(const std::string& command) {
  std::string cmd =
      command + " --query-gpu=index,name,memory.total --format=csv,noheader,nounits 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return UnavailableError("cannot run " + command);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = ::pclose(p);
  if (rc != 0) return UnavailableError(command + " failed or is not installed");
  return out;
}

}  // namespace

StatusOr<std::vector<GpuDevice>> ParseNvidiaSmiCsv(std::string_view text) {
  std::vector<GpuDevice> gpus;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = Trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (line.empty()) continue;
    size_t c1 = line.find(','), c2 = line.rfind(',');
    if (c1 == std::string_view::npos || c1 == c2) {
      return InvalidArgumentError("nvidia-smi line " + std::to_string(line_no) +
                                  ": expected index, name, memory");
    }
    auto index = ParseInt64(Trim(line.substr(0, c1)));
    auto memory = ParseInt64(Trim(line.substr(c2 + 1)));
    if (!index || !memory || *index < 0) {
      return InvalidArgumentError("nvidia-smi line " + std::to_string(line_no) + ": " +
                                  std::string(line));
    }
    gpus.push_back(
        {static_cast<int>(*index), std::string(Trim(line.substr(c1 + 1, c2 - c1 - 1))), *memory});
  }
  return gpus;
}

std::vector<GpuDevice> ReadProcNvidiaGpus(const std::string& proc_root) {
  std::vector<GpuDevice> gpus;
  std::string dir = proc_root + "/driver/nvidia/gpus";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return gpus;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    auto text = ReadFileToString(dir + "/" + e->d_name + "/information", 1 << 16);
    if (!text.ok()) continue;
    GpuDevice g;
    g.index = -1;
    std::string_view rest = *text;
    while (!rest.empty()) {
      size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string_view key = Trim(line.substr(0, colon)), value = Trim(line.substr(colon + 1));
      if (key == "Model") g.model = value;
      if (key == "Device Minor") g.index = static_cast<int>(ParseInt64(value).value_or(-1));
    }
    if (g.index >= 0) gpus.push_back(std::move(g));
  }
  ::closedir(d);
  std::sort(gpus.begin(), gpus.end(),
            [](const GpuDevice& a, const GpuDevice& b) { return a.index < b.index; });
  return gpus;
}

StatusOr<int64_t> ParseMemTotalKib(std::string_view meminfo) {
  size_t at = meminfo.find("MemTotal:");
  if (at == std::string_view::npos) return InvalidArgumentError("meminfo: no MemTotal line");
  std::string_view line = meminfo.substr(at + 9);
  line = line.substr(0, line.find('\n'));
  line = Trim(line);
  if (line.size() < 3 || line.substr(line.size() - 2) != "kB") {
    return InvalidArgumentError("meminfo: MemTotal is not in kB");
  }
  auto kib = ParseInt64(Trim(line.substr(0, line.size() - 2)));
  if (!kib || *kib <= 0) return InvalidArgumentError("meminfo: unreadable MemTotal");
  return *kib;
}

std::vector<GpuDevice> FakeGpus(int n) {
  std::vector<GpuDevice> gpus;
  for (int i = 0; i < n; ++i) gpus.push_back({i, "Fake GPU", 16384});
  return gpus;
}

StatusOr<NodeSpec> DetectLocalNode(const InventoryOptions& options) {
  NodeSpec node;
  node.name = options.name;
  if (node.name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) return InternalError("gethostname failed");
    node.name = host;
  }
  if (options.vcores) {
    node.vcores = *options.vcores;
  } else {
    cpu_set_t set;
    CPU_ZERO(&set);
    node.vcores = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                                : ::sysconf(_SC_NPROCESSORS_ONLN);
  }
  if (options.memory_mib) {
    node.memory_mib = *options.memory_mib;
  } else {
    ASSIGN_OR_RETURN(std::string meminfo, ReadFileToString(options.proc_root + "/meminfo"));
    ASSIGN_OR_RETURN(int64_t kib, ParseMemTotalKib(meminfo));
    node.memory_mib = std::max<int64_t>(0, kib / 1024 - options.reserve_mib);
  }
  if (options.fake_gpus >= 0) {
    node.gpus = FakeGpus(options.fake_gpus);
  } else {
    StatusOr<std::string> smi = options.nvidia_smi.empty()
                                    ? StatusOr<std::string>(UnavailableError("not run"))
                                    : RunNvidiaSmi(options.nvidia_smi);
    if (smi.ok()) {
      ASSIGN_OR_RETURN(node.gpus, ParseNvidiaSmiCsv(*smi));
    } else {
      node.gpus = ReadProcNvidiaGpus(options.proc_root);
    }
  }
  if (node.vcores <= 0) return InvalidArgumentError("the node has no vcores");
  return node;
}

}  // namespace tarn::scheduler
