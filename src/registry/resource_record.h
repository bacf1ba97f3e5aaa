// The DNS data model shared by the registry (which makes records) and the wire codec (which
// encodes them): record types, response codes, one resource record, and the sections of one
// answer. Plain values; safe to share between threads like any const value.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tarn::registry {

// Record types tarn serves or recognises (RFC 1035, 2782, 3596, 6891, 1995).
inline constexpr uint16_t kTypeA = 1;
inline constexpr uint16_t kTypeNs = 2;
inline constexpr uint16_t kTypeSoa = 6;
inline constexpr uint16_t kTypePtr = 12;
inline constexpr uint16_t kTypeTxt = 16;
inline constexpr uint16_t kTypeAaaa = 28;
inline constexpr uint16_t kTypeSrv = 33;
inline constexpr uint16_t kTypeOpt = 41;
inline constexpr uint16_t kTypeIxfr = 251;
inline constexpr uint16_t kTypeAxfr = 252;
inline constexpr uint16_t kTypeAny = 255;

inline constexpr uint16_t kClassIn = 1;
inline constexpr uint16_t kClassAny = 255;

// Response codes. Values above 15 exist only with EDNS0 (the high bits travel in the OPT
// record); BADVERS is the only one tarn sends.
enum class Rcode : uint16_t {
  kNoError = 0,
  kFormErr = 1,
  kServFail = 2,
  kNxDomain = 3,
  kNotImp = 4,
  kRefused = 5,
  kBadVers = 16,
};

// Every rcode tarn can send, in the order metrics list them.
inline constexpr std::array<Rcode, 7> kAllRcodes = {
    Rcode::kNoError, Rcode::kFormErr, Rcode::kServFail, Rcode::kNxDomain,
    Rcode::kNotImp,  Rcode::kRefused, Rcode::kBadVers};

// "NOERROR", "NXDOMAIN"...: the mnemonic dig prints; "RCODE<n>" for others.
std::string RcodeName(Rcode rcode);

// "A", "SRV"...; "TYPE<n>" (RFC 3597) for others.
std::string TypeName(uint16_t type);

struct SoaData {
  std::string mname;  // primary server
  std::string rname;  // mailbox of the responsible person, as a name
  uint32_t serial = 0;
  uint32_t refresh = 0;
  uint32_t retry = 0;
  uint32_t expire = 0;
  uint32_t minimum = 0;  // TTL of negative answers (RFC 2308)
};

// One resource record of class IN. Names are LDH labels joined by '.', without the
// trailing dot (the registry makes only lowercase ones; the wire decoder may produce any
// case, with RFC 1035 escapes such as "\." and "\032" for other bytes). Only the fields of
// `type` are meaningful.
struct ResourceRecord {
  std::string name;  // owner
  uint16_t type = 0;
  uint32_t ttl = 0;
  uint32_t ipv4 = 0;      // A: the address in host byte order (127.0.0.1 is 0x7f000001)
  std::string target;     // NS, PTR: the name pointed to; SRV: the target host
  std::string text;       // TXT: the text (on the wire, 255-byte character-strings)
  uint16_t priority = 0;  // SRV
  uint16_t weight = 0;    // SRV
  uint16_t port = 0;      // SRV
  SoaData soa;            // SOA
};

// What one response says: its rcode, whether it is authoritative, and the records of its
// answer and authority sections. The spans point into storage owned elsewhere (a registry
// snapshot, a test's vectors), which must outlive the use of this value.
struct DnsAnswer {
  Rcode rcode = Rcode::kNoError;
  bool authoritative = false;
  std::span<const ResourceRecord> answers;
  std::span<const ResourceRecord> authority;
};

}  // namespace tarn::registry
