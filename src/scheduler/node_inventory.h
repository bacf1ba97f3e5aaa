// What the local machine offers to instances: vcores (the CPUs this process may run on),
// memory (MemTotal minus a reserve for the OS and tarn), and GPUs (from nvidia-smi, else
// /proc/driver/nvidia/gpus, or a fake list for tests and GPU-less machines). Reads the
// machine; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "scheduler/resources.h"

namespace tarn::scheduler {

struct InventoryOptions {
  std::string name;                   // empty: the host name
  int64_t reserve_mib = 1024;         // kept back from MemTotal
  std::optional<int64_t> vcores;      // configured instead of detected
  std::optional<int64_t> memory_mib;  // configured instead of detected (no reserve applied)
  int fake_gpus = -1;                 // >= 0: this many fake GPUs instead of detection
  std::string proc_root = "/proc";
  std::string nvidia_smi = "nvidia-smi";  // empty: do not run it
};

StatusOr<NodeSpec> DetectLocalNode(const InventoryOptions& options);

// Parses `nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader,nounits`.
StatusOr<std::vector<GpuDevice>> ParseNvidiaSmiCsv(std::string_view text);
// Reads <proc_root>/driver/nvidia/gpus/*/information ("Model:", "Device Minor:").
std::vector<GpuDevice> ReadProcNvidiaGpus(const std::string& proc_root);
// "MemTotal:  24576000 kB" from /proc/meminfo text, in KiB.
StatusOr<int64_t> ParseMemTotalKib(std::string_view meminfo);
// n fake GPUs named "Fake GPU", 16 GiB each, indices 0..n-1.
std::vector<GpuDevice> FakeGpus(int n);

}  // namespace tarn::scheduler
