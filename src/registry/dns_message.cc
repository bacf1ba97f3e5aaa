#include "registry/dns_message.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace tarn::registry {
namespace {

constexpr uint16_t kFlagQr = 0x8000;
constexpr uint16_t kFlagAa = 0x0400;
constexpr uint16_t kFlagTc = 0x0200;
constexpr uint16_t kFlagRd = 0x0100;
constexpr uint16_t kFlagRa = 0x0080;
constexpr uint16_t kFlagCd = 0x0010;
constexpr uint8_t kOpcodeQuery = 0;

// Backward-only pointers and the 255-byte bound already make decompression terminate; the
// jump limit only caps the work on a pathological (but finite) chain.
constexpr int kMaxPointerJumps = 128;
constexpr size_t kMaxLabels = 128;
constexpr size_t kCompressionEntries = 256;
constexpr size_t kMaxPointerTarget = 0x3FFF;
constexpr size_t kTxtChunk = 255;

uint16_t Get16(std::span<const uint8_t> m, size_t at) {
  return static_cast<uint16_t>(m[at] << 8 | m[at + 1]);
}
uint32_t Get32(std::span<const uint8_t> m, size_t at) {
  return static_cast<uint32_t>(m[at]) << 24 | static_cast<uint32_t>(m[at + 1]) << 16 |
         static_cast<uint32_t>(m[at + 2]) << 8 | m[at + 3];
}

uint8_t Lower(uint8_t c) { return (c >= 'A' && c <= 'Z') ? static_cast<uint8_t>(c + 32) : c; }

// Reads the possibly compressed name at *pos into `wire` (uncompressed, kMaxWireName bytes
// at most) and moves *pos past it. False for a name that runs off the message, a pointer
// that does not point backwards, a label type other than 0 (lengths 64..191), or a name
// over 255 bytes.
bool ReadName(std::span<const uint8_t> msg, size_t* pos, uint8_t* wire, size_t* wire_size) {
  size_t p = *pos;
  size_t n = 0;
  size_t resume = 0;
  bool jumped = false;
  int jumps = 0;
  for (;;) {
    if (p >= msg.size()) return false;
    const uint8_t len = msg[p];
    if ((len & 0xC0) == 0xC0) {
      if (p + 1 >= msg.size()) return false;
      const size_t target = static_cast<size_t>(len & 0x3F) << 8 | msg[p + 1];
      if (target >= p || ++jumps > kMaxPointerJumps) return false;
      if (!jumped) {
        resume = p + 2;
        jumped = true;
      }
      p = target;
      continue;
    }
    if ((len & 0xC0) != 0) return false;
    if (len == 0) {
      wire[n++] = 0;  // room is guaranteed by the check below
      break;
    }
    if (n + len + 2 > kMaxWireName) return false;  // this label, then at least the root byte
    if (p + 1 + len > msg.size()) return false;
    wire[n] = len;
    std::memcpy(wire + n + 1, msg.data() + p + 1, len);
    n += 1 + static_cast<size_t>(len);
    p += 1 + static_cast<size_t>(len);
  }
  *pos = jumped ? resume : p + 1;
  *wire_size = n;
  return true;
}

// Writes the presentation form of an uncompressed wire name (as ReadName makes) into `out`,
// which holds kMaxTextName characters; returns the length.
size_t WireToText(const uint8_t* wire, char* out) {
  if (wire[0] == 0) {
    out[0] = '.';
    return 1;
  }
  static constexpr char kDigits[] = "0123456789";
  size_t n = 0;
  for (size_t p = 0; wire[p] != 0; p += 1 + wire[p]) {
    if (n > 0) out[n++] = '.';
    for (size_t i = 1; i <= wire[p]; ++i) {
      const uint8_t c = wire[p + i];
      if (c == '.' || c == '\\') {
        out[n++] = '\\';
        out[n++] = static_cast<char>(c);
      } else if (c < 0x21 || c > 0x7E) {
        out[n++] = '\\';
        out[n++] = kDigits[c / 100];
        out[n++] = kDigits[c / 10 % 10];
        out[n++] = kDigits[c % 10];
      } else {
        out[n++] = static_cast<char>(c);
      }
    }
  }
  return n;
}

std::string NameText(const uint8_t* wire) {
  char text[kMaxTextName];
  return std::string(text, WireToText(wire, text));
}

// Skips one resource record at *pos (name, fixed fields, RDATA); false when it overruns.
bool SkipRecord(std::span<const uint8_t> msg, size_t* pos) {
  uint8_t wire[kMaxWireName];
  size_t wire_size = 0;
  if (!ReadName(msg, pos, wire, &wire_size)) return false;
  if (*pos + 10 > msg.size()) return false;
  const size_t rdlength = Get16(msg, *pos + 8);
  if (*pos + 10 + rdlength > msg.size()) return false;
  *pos += 10 + rdlength;
  return true;
}

// Appends to a fixed buffer; any write past the capacity turns the writer !ok() and is
// dropped, so callers write a whole message and check once. Remembers where names were
// written, for compression.
class Writer {
 public:
  Writer(uint8_t* buf, size_t capacity) : buf_(buf), capacity_(capacity) {}

  bool ok() const { return ok_; }
  size_t size() const { return pos_; }

  void Put8(uint8_t v) {
    if (!Room(1)) return;
    buf_[pos_++] = v;
  }
  void Put16(uint16_t v) {
    if (!Room(2)) return;
    buf_[pos_++] = static_cast<uint8_t>(v >> 8);
    buf_[pos_++] = static_cast<uint8_t>(v);
  }
  void Put32(uint32_t v) {
    Put16(static_cast<uint16_t>(v >> 16));
    Put16(static_cast<uint16_t>(v));
  }
  void PutBytes(const void* data, size_t n) {
    if (!Room(n)) return;
    std::memcpy(buf_ + pos_, data, n);
    pos_ += n;
  }
  void Patch16(size_t at, uint16_t v) {
    if (at + 2 > pos_) return;
    buf_[at] = static_cast<uint8_t>(v >> 8);
    buf_[at + 1] = static_cast<uint8_t>(v);
  }

  // Writes an uncompressed wire name (the question's) and remembers its labels.
  void PutWireName(std::span<const uint8_t> wire) {
    for (size_t p = 0; p < wire.size() && wire[p] != 0; p += 1 + wire[p]) Remember(pos_ + p);
    PutBytes(wire.data(), wire.size());
  }

  // Writes a dotted name ("" or "." is the root). With `compress`, the longest suffix
  // already in the message becomes a pointer and the labels written are remembered. A name
  // with an empty label, a label over 63 bytes or over 255 bytes in all makes the writer
  // fail: records are made by the registry, so this is a bug, never client input.
  void PutName(std::string_view name, bool compress) {
    if (!name.empty() && name.back() == '.') name.remove_suffix(1);
    std::string_view labels[kMaxLabels];
    size_t count = 0;
    size_t wire_size = 1;
    while (!name.empty()) {
      const size_t dot = name.find('.');
      const std::string_view label = name.substr(0, dot);
      if (label.empty() || label.size() > 63 || count == kMaxLabels) return Fail();
      labels[count++] = label;
      wire_size += 1 + label.size();
      name = dot == std::string_view::npos ? std::string_view() : name.substr(dot + 1);
      if (dot != std::string_view::npos && name.empty()) return Fail();  // "a..b" or "a.."
    }
    if (wire_size > kMaxWireName) return Fail();
    for (size_t first = 0; first < count; ++first) {
      size_t offset = 0;
      if (compress && Find(labels + first, count - first, &offset)) {
        for (size_t i = 0; i < first; ++i) PutLabel(labels[i], compress);
        Put16(static_cast<uint16_t>(0xC000 | offset));
        return;
      }
    }
    for (size_t i = 0; i < count; ++i) PutLabel(labels[i], compress);
    Put8(0);
  }

 private:
  bool Room(size_t n) {
    if (!ok_ || capacity_ - pos_ < n) {
      ok_ = false;
      return false;
    }
    return true;
  }
  void Fail() { ok_ = false; }

  void PutLabel(std::string_view label, bool remember) {
    if (remember) Remember(pos_);
    Put8(static_cast<uint8_t>(label.size()));
    PutBytes(label.data(), label.size());
  }

  void Remember(size_t offset) {
    if (offset <= kMaxPointerTarget && entries_ < kCompressionEntries) {
      offsets_[entries_++] = static_cast<uint16_t>(offset);
    }
  }

  // Finds a remembered name equal (ASCII case-insensitively) to labels[0..count).
  bool Find(const std::string_view* labels, size_t count, size_t* offset) const {
    for (size_t e = 0; e < entries_; ++e) {
      if (MatchAt(offsets_[e], labels, count)) {
        *offset = offsets_[e];
        return true;
      }
    }
    return false;
  }

  // Only names this writer wrote completely are remembered, and their pointers point
  // backwards, so the walk stays inside [0, pos_) and ends.
  bool MatchAt(size_t p, const std::string_view* labels, size_t count) const {
    for (size_t k = 0; k <= count; ++k) {
      while ((buf_[p] & 0xC0) == 0xC0) p = static_cast<size_t>(buf_[p] & 0x3F) << 8 | buf_[p + 1];
      const uint8_t len = buf_[p];
      if (k == count) return len == 0;
      if (len != labels[k].size()) return false;
      for (size_t i = 0; i < len; ++i) {
        if (Lower(buf_[p + 1 + i]) != Lower(static_cast<uint8_t>(labels[k][i]))) return false;
      }
      p += 1 + static_cast<size_t>(len);
    }
    return false;
  }

  uint8_t* buf_;
  size_t capacity_;
  size_t pos_ = 0;
  bool ok_ = true;
  uint16_t offsets_[kCompressionEntries];
  size_t entries_ = 0;
};

void PutRecord(Writer& w, const ResourceRecord& rr) {
  w.PutName(rr.name, /*compress=*/true);
  w.Put16(rr.type);
  w.Put16(kClassIn);
  w.Put32(rr.ttl);
  const size_t rdlength_at = w.size();
  w.Put16(0);
  switch (rr.type) {
    case kTypeA:
      w.Put32(rr.ipv4);
      break;
    case kTypeNs:
    case kTypePtr:
      w.PutName(rr.target, /*compress=*/true);
      break;
    case kTypeSrv:
      w.Put16(rr.priority);
      w.Put16(rr.weight);
      w.Put16(rr.port);
      w.PutName(rr.target, /*compress=*/false);
      break;
    case kTypeTxt: {
      std::string_view text = rr.text;
      do {
        const size_t n = std::min(text.size(), kTxtChunk);
        w.Put8(static_cast<uint8_t>(n));
        w.PutBytes(text.data(), n);
        text.remove_prefix(n);
      } while (!text.empty());
      break;
    }
    case kTypeSoa:
      w.PutName(rr.soa.mname, /*compress=*/true);
      w.PutName(rr.soa.rname, /*compress=*/true);
      w.Put32(rr.soa.serial);
      w.Put32(rr.soa.refresh);
      w.Put32(rr.soa.retry);
      w.Put32(rr.soa.expire);
      w.Put32(rr.soa.minimum);
      break;
    default:
      break;  // no RDATA
  }
  if (w.ok()) w.Patch16(rdlength_at, static_cast<uint16_t>(w.size() - rdlength_at - 2));
}

// Header, question and (for EDNS queries) OPT; counts of answer and authority are given.
void PutHeader(Writer& w, const Query& q, Rcode rcode, bool aa, bool tc, size_t an, size_t ns) {
  uint16_t code = static_cast<uint16_t>(rcode);
  if (code > 15 && !q.has_edns) code = static_cast<uint16_t>(Rcode::kServFail);
  uint16_t flags = kFlagQr | static_cast<uint16_t>((q.opcode & 0xF) << 11) | (code & 0xF);
  if (aa) flags |= kFlagAa;
  if (tc) flags |= kFlagTc;
  if (q.recursion_desired) flags |= kFlagRd;
  if (q.checking_disabled) flags |= kFlagCd;
  w.Put16(q.id);
  w.Put16(flags);
  w.Put16(q.has_question ? 1 : 0);
  w.Put16(static_cast<uint16_t>(an));
  w.Put16(static_cast<uint16_t>(ns));
  w.Put16(q.has_edns ? 1 : 0);
  if (q.has_question) {
    w.PutWireName(q.qname_wire());
    w.Put16(q.qtype);
    w.Put16(q.qclass);
  }
}

void PutOpt(Writer& w, const Query& q, Rcode rcode) {
  if (!q.has_edns) return;
  w.Put8(0);  // root
  w.Put16(kTypeOpt);
  w.Put16(static_cast<uint16_t>(kMaxUdpLimit));
  // Extended rcode (high 8 bits of 12), version 0, no DO: tarn does not sign.
  w.Put32(static_cast<uint32_t>(static_cast<uint16_t>(rcode) >> 4) << 24);
  w.Put16(0);
}

}  // namespace

ParseStatus ParseQuery(std::span<const uint8_t> msg, Query* q) {
  if (msg.size() < kDnsHeaderSize) return ParseStatus::kDrop;
  const uint16_t flags = Get16(msg, 2);
  if (flags & kFlagQr) return ParseStatus::kDrop;
  q->id = Get16(msg, 0);
  q->opcode = static_cast<uint8_t>((flags >> 11) & 0xF);
  q->recursion_desired = flags & kFlagRd;
  q->checking_disabled = flags & kFlagCd;
  q->has_question = false;
  q->qtype = q->qclass = 0;
  q->has_edns = false;
  q->edns_version = 0;
  q->edns_udp_size = 0;
  q->dnssec_ok = false;
  q->qname_wire_size = q->qname_text_size = 0;

  const uint16_t qdcount = Get16(msg, 4);
  const uint16_t ancount = Get16(msg, 6);
  const uint16_t nscount = Get16(msg, 8);
  const uint16_t arcount = Get16(msg, 10);
  size_t pos = kDnsHeaderSize;
  if (qdcount == 1) {
    if (ReadName(msg, &pos, q->qname_wire_bytes.data(), &q->qname_wire_size) &&
        pos + 4 <= msg.size()) {
      q->qtype = Get16(msg, pos);
      q->qclass = Get16(msg, pos + 2);
      pos += 4;
      q->qname_text_size = WireToText(q->qname_wire_bytes.data(), q->qname_text.data());
      q->has_question = true;
    }
  }
  // Other opcodes (NOTIFY, UPDATE...) have other section layouts; answer before reading them.
  if (q->opcode != kOpcodeQuery) return ParseStatus::kNotImp;
  if (!q->has_question || qdcount != 1) return ParseStatus::kFormErr;
  for (uint32_t i = 0; i < static_cast<uint32_t>(ancount) + nscount; ++i) {
    if (!SkipRecord(msg, &pos)) return ParseStatus::kFormErr;
  }
  for (uint16_t i = 0; i < arcount; ++i) {
    uint8_t wire[kMaxWireName];
    size_t wire_size = 0;
    if (!ReadName(msg, &pos, wire, &wire_size) || pos + 10 > msg.size()) {
      return ParseStatus::kFormErr;
    }
    const uint16_t type = Get16(msg, pos);
    const size_t rdlength = Get16(msg, pos + 8);
    if (pos + 10 + rdlength > msg.size()) return ParseStatus::kFormErr;
    if (type == kTypeOpt) {
      // RFC 6891 6.1.1: one OPT, owned by the root.
      if (q->has_edns || wire_size != 1) return ParseStatus::kFormErr;
      const uint32_t ttl = Get32(msg, pos + 4);
      q->has_edns = true;
      q->edns_udp_size = Get16(msg, pos + 2);
      q->edns_version = static_cast<uint8_t>(ttl >> 16);
      q->dnssec_ok = ttl & 0x8000;
    }
    pos += 10 + rdlength;
  }
  if (q->has_edns && q->edns_version != 0) return ParseStatus::kBadVers;
  return ParseStatus::kOk;
}

size_t UdpResponseLimit(const Query& q) {
  if (!q.has_edns) return kClassicUdpLimit;
  return std::clamp<size_t>(q.edns_udp_size, kClassicUdpLimit, kMaxUdpLimit);
}

BuildResult BuildResponse(const Query& q, const DnsAnswer& a, size_t limit,
                          std::span<uint8_t> out) {
  const size_t capacity = std::min({limit, out.size(), kMaxMessage});
  {
    Writer w(out.data(), capacity);
    PutHeader(w, q, a.rcode, a.authoritative, false, a.answers.size(), a.authority.size());
    for (const ResourceRecord& rr : a.answers) PutRecord(w, rr);
    for (const ResourceRecord& rr : a.authority) PutRecord(w, rr);
    PutOpt(w, q, a.rcode);
    if (w.ok() && a.answers.size() <= 0xFFFF && a.authority.size() <= 0xFFFF) {
      return {w.size(), false};
    }
  }
  // Header + question + OPT is at most 12 + 259 + 11 bytes: it fits any client's 512.
  Writer w(out.data(), capacity);
  PutHeader(w, q, a.rcode, a.authoritative, true, 0, 0);
  PutOpt(w, q, a.rcode);
  if (!w.ok()) return {0, false};
  return {w.size(), true};
}

Status DecodeMessage(std::span<const uint8_t> msg, DecodedMessage* m) {
  *m = DecodedMessage{};
  if (msg.size() < kDnsHeaderSize) return InvalidArgumentError("message shorter than a header");
  m->id = Get16(msg, 0);
  const uint16_t flags = Get16(msg, 2);
  m->qr = flags & kFlagQr;
  m->aa = flags & kFlagAa;
  m->tc = flags & kFlagTc;
  m->rd = flags & kFlagRd;
  m->ra = flags & kFlagRa;
  m->cd = flags & kFlagCd;
  m->opcode = static_cast<uint8_t>((flags >> 11) & 0xF);
  m->rcode = flags & 0xF;
  const uint16_t counts[4] = {Get16(msg, 4), Get16(msg, 6), Get16(msg, 8), Get16(msg, 10)};
  size_t pos = kDnsHeaderSize;
  uint8_t wire[kMaxWireName];
  size_t wire_size = 0;
  for (uint16_t i = 0; i < counts[0]; ++i) {
    if (!ReadName(msg, &pos, wire, &wire_size) || pos + 4 > msg.size()) {
      return InvalidArgumentError("question " + std::to_string(i) + " is malformed");
    }
    m->questions.push_back({NameText(wire), Get16(msg, pos), Get16(msg, pos + 2)});
    pos += 4;
  }
  std::vector<ResourceRecord>* sections[3] = {&m->answers, &m->authority, &m->additional};
  static constexpr const char* kSectionNames[3] = {"answer", "authority", "additional"};
  for (int s = 0; s < 3; ++s) {
    for (uint16_t i = 0; i < counts[s + 1]; ++i) {
      const std::string where =
          std::string(kSectionNames[s]) + " record " + std::to_string(i) + ": ";
      if (!ReadName(msg, &pos, wire, &wire_size) || pos + 10 > msg.size()) {
        return InvalidArgumentError(where + "owner name or fixed fields overrun the message");
      }
      ResourceRecord rr;
      rr.name = NameText(wire);
      rr.type = Get16(msg, pos);
      const uint16_t rclass = Get16(msg, pos + 2);
      rr.ttl = Get32(msg, pos + 4);
      const size_t rdlength = Get16(msg, pos + 8);
      pos += 10;
      const size_t end = pos + rdlength;
      if (end > msg.size()) return InvalidArgumentError(where + "RDATA overruns the message");
      // Names inside RDATA may point anywhere earlier in the message but must end by `end`.
      auto read_name = [&](std::string* out) {
        if (!ReadName(msg.first(end), &pos, wire, &wire_size)) return false;
        *out = NameText(wire);
        return true;
      };
      bool good = true;
      switch (rr.type) {
        case kTypeA:
          good = rdlength == 4;
          if (good) rr.ipv4 = Get32(msg, pos);
          pos = end;
          break;
        case kTypeNs:
        case kTypePtr:
          good = read_name(&rr.target);
          break;
        case kTypeSrv:
          good = pos + 6 <= end;
          if (good) {
            rr.priority = Get16(msg, pos);
            rr.weight = Get16(msg, pos + 2);
            rr.port = Get16(msg, pos + 4);
            pos += 6;
            good = read_name(&rr.target);
          }
          break;
        case kTypeTxt:
          while (good && pos < end) {
            const size_t n = msg[pos];
            good = pos + 1 + n <= end;
            if (good) rr.text.append(reinterpret_cast<const char*>(msg.data() + pos + 1), n);
            pos += 1 + n;
          }
          good = good && rdlength > 0;
          break;
        case kTypeSoa:
          good = read_name(&rr.soa.mname) && read_name(&rr.soa.rname) && pos + 20 <= end;
          if (good) {
            rr.soa.serial = Get32(msg, pos);
            rr.soa.refresh = Get32(msg, pos + 4);
            rr.soa.retry = Get32(msg, pos + 8);
            rr.soa.expire = Get32(msg, pos + 12);
            rr.soa.minimum = Get32(msg, pos + 16);
            pos += 20;
          }
          break;
        case kTypeOpt:
          if (s != 2 || m->has_edns || wire_size != 1) {
            return InvalidArgumentError(where + "misplaced or repeated OPT record");
          }
          m->has_edns = true;
          m->edns_udp_size = rclass;
          m->edns_version = static_cast<uint8_t>(rr.ttl >> 16);
          m->rcode = static_cast<uint16_t>(m->rcode | (rr.ttl >> 24) << 4);
          pos = end;
          continue;
        default:
          ++m->unknown_records;
          pos = end;
          break;
      }
      if (!good || pos != end) {
        return InvalidArgumentError(where + TypeName(rr.type) + " RDATA is malformed");
      }
      sections[s]->push_back(std::move(rr));
    }
  }
  return OkStatus();
}

}  // namespace tarn::registry
