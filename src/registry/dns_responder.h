// Respond: one DNS message in, its response out, from the registry. The glue between the
// wire codec (dns_message.h) and the registry, shared by the server's UDP and TCP paths and
// the fuzzer. Allocates nothing; thread-safe (it only reads the registry).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "registry/dns_message.h"
#include "registry/registry.h"
#include "registry/resource_record.h"

namespace tarn::registry {

enum class Transport { kUdp, kTcp };

struct Response {
  bool dropped = false;  // no response: the packet was not an answerable query
  size_t size = 0;       // bytes of the response in `out`
  Rcode rcode = Rcode::kNoError;
  bool truncated = false;     // UDP only: TC set, records left out
  bool outside_zone = false;  // REFUSED because the name is not in the registry's domain
};

// Answers `packet`: FORMERR, NOTIMP and BADVERS as ParseQuery says; REFUSED for classes
// other than IN and ANY and for zone transfers (AXFR, IXFR); otherwise the registry's
// answer. The UDP size limit is UdpResponseLimit(); over TCP it is 65535. `out` should hold
// kMaxUdpLimit bytes for UDP and kMaxMessage for TCP (smaller truncates sooner). `query` is
// scratch space the caller keeps (it is large) and holds the parsed query afterwards.
Response Respond(const Registry& registry, std::span<const uint8_t> packet, Transport transport,
                 Query* query, std::span<uint8_t> out);

}  // namespace tarn::registry
