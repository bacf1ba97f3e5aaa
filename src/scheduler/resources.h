// Resources: the vector the scheduler counts (vcores, memory in MiB, GPUs) and the node
// model it places on. Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tarn::scheduler {

struct Resources {
  int64_t vcores = 0;
  int64_t memory_mib = 0;
  int64_t gpus = 0;

  Resources& operator+=(const Resources& o) {
    vcores += o.vcores;
    memory_mib += o.memory_mib;
    gpus += o.gpus;
    return *this;
  }
  Resources& operator-=(const Resources& o) {
    vcores -= o.vcores;
    memory_mib -= o.memory_mib;
    gpus -= o.gpus;
    return *this;
  }
  friend Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend Resources operator-(Resources a, const Resources& b) { return a -= b; }
  friend bool operator==(const Resources&, const Resources&) = default;

  // True when every component of `r` is at most this one's.
  bool Fits(const Resources& r) const {
    return r.vcores <= vcores && r.memory_mib <= memory_mib && r.gpus <= gpus;
  }
};

// "2 vcores, 4096 MiB, 1 GPU"
std::string ToString(const Resources& r);

// The largest of r's shares of `total` in each resource that `total` has (Dominant Resource
// Fairness, Ghodsi et al. 2011). 0 when total is empty.
double DominantShare(const Resources& r, const Resources& total);

struct GpuDevice {
  int index = 0;
  std::string model;
  int64_t memory_mib = 0;

  friend bool operator==(const GpuDevice&, const GpuDevice&) = default;
};

struct NodeSpec {
  std::string name;
  int64_t vcores = 0;
  int64_t memory_mib = 0;
  std::vector<GpuDevice> gpus;

  Resources capacity() const { return {vcores, memory_mib, static_cast<int64_t>(gpus.size())}; }
  friend bool operator==(const NodeSpec&, const NodeSpec&) = default;
};

}  // namespace tarn::scheduler
