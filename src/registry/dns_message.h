// The DNS wire format (RFC 1035) as an authoritative server needs it. ParseQuery reads a
// query: header, one question, name decompression bounded against loops and overruns, and
// EDNS0 (RFC 6891). BuildResponse writes the response: name compression, the OPT record,
// and truncation (TC) when the answer does not fit the client's UDP size. DecodeMessage
// reads any whole message, for tests, tools and the fuzzer.
//
// Pure functions. ParseQuery and BuildResponse allocate nothing (the server calls them per
// packet); all are thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "registry/resource_record.h"

namespace tarn::registry {

inline constexpr size_t kDnsHeaderSize = 12;
inline constexpr size_t kMaxWireName = 255;      // RFC 1035 2.3.4, including the root byte
inline constexpr size_t kMaxTextName = 1024;     // 255 wire bytes, each escaped as "\DDD"
inline constexpr size_t kClassicUdpLimit = 512;  // without EDNS0 (RFC 1035 4.2.1)
inline constexpr size_t kMaxUdpLimit = 4096;     // the EDNS0 size tarn advertises and honours
inline constexpr size_t kMaxMessage = 65535;     // over TCP (2-byte length prefix)

enum class ParseStatus {
  kOk,       // a query to answer
  kDrop,     // not answerable: shorter than a header, or a response (QR set)
  kFormErr,  // the header parsed but the rest is malformed: answer FORMERR
  kNotImp,   // an opcode other than QUERY: answer NOTIMP
  kBadVers,  // EDNS version other than 0: answer BADVERS (RFC 6891 6.1.3)
};

// A parsed query. Large (about 1.3 KiB, the name buffers are inline so parsing never
// allocates): keep one per thread rather than copying.
struct Query {
  uint16_t id = 0;
  uint8_t opcode = 0;
  bool recursion_desired = false;
  bool checking_disabled = false;

  bool has_question = false;  // false after FORMERR on the question itself
  uint16_t qtype = 0;
  uint16_t qclass = 0;

  bool has_edns = false;  // an OPT record was in the additional section
  uint8_t edns_version = 0;
  uint16_t edns_udp_size = 0;  // as advertised, not clamped
  bool dnssec_ok = false;

  // The question's name in presentation form, as the client spelled it (case kept), with
  // RFC 1035 escapes for '.', '\' and bytes outside 0x21..0x7e, without the trailing dot;
  // "." for the root.
  std::string_view qname() const { return {qname_text.data(), qname_text_size}; }
  // The question's name uncompressed in wire form (labels and the root byte).
  std::span<const uint8_t> qname_wire() const { return {qname_wire_bytes.data(), qname_wire_size}; }

  std::array<uint8_t, kMaxWireName> qname_wire_bytes;
  size_t qname_wire_size = 0;
  std::array<char, kMaxTextName> qname_text;
  size_t qname_text_size = 0;
};

// Reads the query in `packet` into `*query`. Other than kDrop, `query->id`, `opcode` and
// the flags are set, so that an error response can be built; the question is set when it
// parsed. Records in the answer and authority sections are skipped; the additional section
// may hold one OPT record (a second is FORMERR). Compression pointers must point backwards
// (this rules out loops), names stay within 255 bytes and labels within 63.
ParseStatus ParseQuery(std::span<const uint8_t> packet, Query* query);

// The largest response a UDP client accepts: 512 without EDNS0, else its advertised size
// clamped to [512, 4096].
size_t UdpResponseLimit(const Query& query);

struct BuildResult {
  size_t size = 0;         // bytes written to `out`; 0 only when `out` is under 512 bytes
  bool truncated = false;  // the records did not fit: TC set, header + question (+ OPT) only
};

// Writes the response to `query` with `answer`'s rcode, AA flag and records into `out`,
// within min(limit, out.size()) bytes. ID, opcode, RD and CD are copied from the query; RA
// is clear. The question is echoed when the query had one. When the query had EDNS0, an
// OPT record with tarn's size (4096) and the extended rcode is added. Names are compressed
// (SRV targets excepted, RFC 2782); owner names equal to the question's name point at it,
// so they read back in the client's case. A response whose records do not fit is replaced
// by the truncated one (RFC 2181 9: clients retry over TCP).
BuildResult BuildResponse(const Query& query, const DnsAnswer& answer, size_t limit,
                          std::span<uint8_t> out);

// A whole decoded message, for tests, tools and the fuzzer (not the serving path).
struct DecodedQuestion {
  std::string name;  // presentation form, as in Query::qname()
  uint16_t type = 0;
  uint16_t qclass = 0;
};
struct DecodedMessage {
  uint16_t id = 0;
  bool qr = false, aa = false, tc = false, rd = false, ra = false, cd = false;
  uint8_t opcode = 0;
  uint16_t rcode = 0;  // with the OPT record's extended bits when present
  std::vector<DecodedQuestion> questions;
  std::vector<ResourceRecord> answers, authority, additional;  // additional: OPT excluded
  bool has_edns = false;
  uint8_t edns_version = 0;
  uint16_t edns_udp_size = 0;
  size_t unknown_records = 0;  // records of types the decoder skips (their RDATA unread)
};

// Decodes every section of `packet`. A, NS, PTR, SOA, TXT, SRV and OPT RDATA are read and
// must be exactly RDLENGTH long; other types are skipped. INVALID_ARGUMENT names the first
// malformed part.
Status DecodeMessage(std::span<const uint8_t> packet, DecodedMessage* message);

}  // namespace tarn::registry
