// libFuzzer target for tarn's DNS wire codec: bytes in as a query over UDP and over TCP,
// answered from a small fixed registry. Beyond "no crash, no sanitizer report", it checks the
// responder's contract: only packets under 12 bytes or with QR set are dropped; every
// response decodes, echoes the ID and the question (in the client's case), has QR, reports
// the rcode it claims, fits the client's UDP size, and a truncated one carries no records.
// The whole-message decoder is also fed the raw bytes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "registry/dns_message.h"
#include "registry/dns_responder.h"
#include "registry/registry.h"

namespace {

using tarn::registry::DecodedMessage;
using tarn::registry::Query;
using tarn::registry::Registry;
using tarn::registry::Transport;

const Registry& FixedRegistry() {
  static const Registry* registry = [] {
    auto* r = new Registry("tarn", 5);
    for (int i = 0; i < 40; ++i) {
      tarn::registry::InstanceRecords instance;
      instance.user = "alice";
      instance.assembly = "fmnist";
      instance.component = i < 36 ? "worker" : "ps";
      instance.instance = instance.component + "-" + std::to_string(i < 36 ? i : i - 36);
      instance.ip = "127.42.0." + std::to_string(i + 1);
      instance.ready = i % 5 != 4;
      instance.container_id = "container_" + std::to_string(i);
      instance.ports = {{"grpc", 2222}, {"http", 8501}};
      r->Upsert(instance);
    }
    return r;
  }();
  return *registry;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Registry& registry = FixedRegistry();
  static auto* query = new Query();
  static auto* out = new std::vector<uint8_t>(tarn::registry::kMaxMessage);
  const std::span<const uint8_t> packet(data, size);

  for (Transport transport : {Transport::kUdp, Transport::kTcp}) {
    const tarn::registry::Response r =
        tarn::registry::Respond(registry, packet, transport, query, *out);
    const bool droppable = size < tarn::registry::kDnsHeaderSize || (data[2] & 0x80) != 0;
    if (r.dropped != droppable) __builtin_trap();
    if (r.dropped) continue;
    const size_t limit = transport == Transport::kUdp ? tarn::registry::UdpResponseLimit(*query)
                                                      : tarn::registry::kMaxMessage;
    if (r.size > limit) __builtin_trap();
    DecodedMessage m;
    if (!tarn::registry::DecodeMessage(std::span<const uint8_t>(out->data(), r.size), &m).ok()) {
      __builtin_trap();
    }
    if (!m.qr || m.ra || m.id != query->id || m.tc != r.truncated) __builtin_trap();
    if (m.rcode != static_cast<uint16_t>(r.rcode)) __builtin_trap();
    if (r.truncated && (!m.answers.empty() || !m.authority.empty())) __builtin_trap();
    if (transport == Transport::kTcp && r.truncated && r.rcode != tarn::registry::Rcode::kNoError) {
      __builtin_trap();  // an error response is small enough for any transport
    }
    if (m.questions.size() != (query->has_question ? 1u : 0u)) __builtin_trap();
    if (query->has_question &&
        (m.questions[0].name != query->qname() || m.questions[0].type != query->qtype)) {
      __builtin_trap();
    }
  }
  DecodedMessage any;
  (void)tarn::registry::DecodeMessage(packet, &any);
  return 0;
}
