// Test-side DNS encoding for the registry's tests, written from RFC 1035 independently of
// the code under test (dns_message.h): names, headers, EDNS0 OPT records and whole queries.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "registry/resource_record.h"

namespace tarn::registry::testing {

using Bytes = std::vector<uint8_t>;

inline void Put16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}

inline void PutName(Bytes& b, std::string_view name) {
  while (!name.empty()) {
    const size_t dot = name.find('.');
    const std::string_view label = name.substr(0, dot);
    b.push_back(static_cast<uint8_t>(label.size()));
    b.insert(b.end(), label.begin(), label.end());
    name = dot == std::string_view::npos ? "" : name.substr(dot + 1);
  }
  b.push_back(0);
}

inline Bytes Header(uint16_t id, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns,
                    uint16_t ar) {
  Bytes b;
  for (uint16_t v : {id, flags, qd, an, ns, ar}) Put16(b, v);
  return b;
}

inline void PutOpt(Bytes& b, uint16_t udp_size, uint8_t version = 0, bool dnssec_ok = false) {
  b.push_back(0);
  Put16(b, kTypeOpt);
  Put16(b, udp_size);
  Put16(b, version);  // extended rcode 0, version
  Put16(b, dnssec_ok ? 0x8000 : 0);
  Put16(b, 0);
}

// One question, recursion desired, optionally with an OPT record.
inline Bytes MakeQuery(std::string_view name, uint16_t type, uint16_t id = 0x1234,
                       bool edns = false, uint16_t udp_size = 4096, uint16_t qclass = kClassIn) {
  Bytes b = Header(id, 0x0100, 1, 0, 0, edns ? 1 : 0);
  PutName(b, name);
  Put16(b, type);
  Put16(b, qclass);
  if (edns) PutOpt(b, udp_size);
  return b;
}

}  // namespace tarn::registry::testing
