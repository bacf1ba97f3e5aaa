#include "registry/dns_responder.h"

namespace tarn::registry {

Response Respond(const Registry& registry, std::span<const uint8_t> packet, Transport transport,
                 Query* query, std::span<uint8_t> out) {
  Response response;
  const ParseStatus status = ParseQuery(packet, query);
  LookupResult lookup;  // keeps the records `answer` points at alive until built
  DnsAnswer answer;
  switch (status) {
    case ParseStatus::kDrop:
      response.dropped = true;
      return response;
    case ParseStatus::kFormErr:
      answer.rcode = Rcode::kFormErr;
      break;
    case ParseStatus::kNotImp:
      answer.rcode = Rcode::kNotImp;
      break;
    case ParseStatus::kBadVers:
      answer.rcode = Rcode::kBadVers;
      break;
    case ParseStatus::kOk:
      if ((query->qclass != kClassIn && query->qclass != kClassAny) || query->qtype == kTypeAxfr ||
          query->qtype == kTypeIxfr) {
        answer.rcode = Rcode::kRefused;
      } else {
        lookup = registry.Lookup(query->qname(), query->qtype);
        answer = lookup.answer();
        response.outside_zone = answer.rcode == Rcode::kRefused;
      }
      break;
  }
  const size_t limit = transport == Transport::kTcp ? kMaxMessage : UdpResponseLimit(*query);
  const BuildResult built = BuildResponse(*query, answer, limit, out);
  if (built.size == 0) {
    response.dropped = true;
    return response;
  }
  response.size = built.size;
  response.truncated = built.truncated;
  response.rcode = answer.rcode;
  return response;
}

}  // namespace tarn::registry
