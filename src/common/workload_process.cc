#include "common/workload_process.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace tarn {

void PinBlasThreads(char** argv) {
  if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr) return;
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  ::execv("/proc/self/exe", argv);
}

void KeepLargeBuffersInHeap() {
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum on 64-bit
  ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

int InstanceCores() {
  if (const char* v = std::getenv("TARN_VCORES"); v != nullptr && std::atoi(v) > 0) {
    return std::atoi(v);
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace tarn
