// Test-only: the records of one instance of alice's fmnist assembly. Header-only.
#pragma once

#include <string>
#include <utility>

#include "registry/registry.h"

namespace tarn::registry {

// `<component>-<index>`, with the ports grpc 2222 and http 8501.
inline InstanceRecords Instance(const std::string& component, int index, std::string ip,
                                bool ready = true) {
  InstanceRecords r;
  r.user = "alice";
  r.assembly = "fmnist";
  r.component = component;
  r.instance = component + "-" + std::to_string(index);
  r.ip = std::move(ip);
  r.ready = ready;
  r.container_id = "container_" + r.instance;
  r.ports = {{"grpc", 2222}, {"http", 8501}};
  return r;
}

}  // namespace tarn::registry
