#include "scheduler/resources.h"

#include <algorithm>

namespace tarn::scheduler {

std::string ToString(const Resources& r) {
  std::string out = std::to_string(r.vcores) + (r.vcores == 1 ? " vcore, " : " vcores, ") +
                    std::to_string(r.memory_mib) + " MiB";
  if (r.gpus > 0) out += ", " + std::to_string(r.gpus) + (r.gpus == 1 ? " GPU" : " GPUs");
  return out;
}

double DominantShare(const Resources& r, const Resources& total) {
  double share = 0;
  if (total.vcores > 0) share = std::max(share, double(r.vcores) / double(total.vcores));
  if (total.memory_mib > 0) {
    share = std::max(share, double(r.memory_mib) / double(total.memory_mib));
  }
  if (total.gpus > 0) share = std::max(share, double(r.gpus) / double(total.gpus));
  return share;
}

}  // namespace tarn::scheduler
