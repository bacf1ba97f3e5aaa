#include "registry/dns_message.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "registry/dns_wire_for_test.h"

namespace tarn::registry {
namespace {

using testing::Bytes;
using testing::Header;
using testing::MakeQuery;
using testing::Put16;
using testing::PutName;
using testing::PutOpt;

ParseStatus Parse(const Bytes& b, Query* q) { return ParseQuery(b, q); }

ResourceRecord A(std::string name, uint32_t ip) {
  ResourceRecord rr;
  rr.name = std::move(name);
  rr.type = kTypeA;
  rr.ttl = 5;
  rr.ipv4 = ip;
  return rr;
}

Bytes Build(const Query& q, const DnsAnswer& a, size_t limit, BuildResult* result = nullptr) {
  Bytes out(kMaxMessage);
  const BuildResult r = BuildResponse(q, a, limit, out);
  if (result) *result = r;
  out.resize(r.size);
  return out;
}

DecodedMessage Decode(const Bytes& b) {
  DecodedMessage m;
  const Status s = DecodeMessage(b, &m);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return m;
}

TEST(ParseQueryTest, ReadsHeaderQuestionAndKeepsCase) {
  Query q;
  ASSERT_EQ(Parse(MakeQuery("Worker-0.FMNIST.alice.tarn", kTypeA, 0xBEEF), &q), ParseStatus::kOk);
  EXPECT_EQ(q.id, 0xBEEF);
  EXPECT_EQ(q.opcode, 0);
  EXPECT_TRUE(q.recursion_desired);
  EXPECT_TRUE(q.has_question);
  EXPECT_EQ(q.qtype, kTypeA);
  EXPECT_EQ(q.qclass, kClassIn);
  EXPECT_EQ(q.qname(), "Worker-0.FMNIST.alice.tarn");
  EXPECT_EQ(q.qname_wire().size(), 28u);
  EXPECT_FALSE(q.has_edns);
}

TEST(ParseQueryTest, RootAndEscapedNames) {
  Query q;
  ASSERT_EQ(Parse(MakeQuery("", kTypeNs), &q), ParseStatus::kOk);
  EXPECT_EQ(q.qname(), ".");
  Bytes b = Header(1, 0, 1, 0, 0, 0);
  const uint8_t name[] = {5, 'a', '.', 'b', ' ', '\\', 4, 't', 'a', 'r', 'n', 0};
  b.insert(b.end(), std::begin(name), std::end(name));
  Put16(b, kTypeA);
  Put16(b, kClassIn);
  ASSERT_EQ(Parse(b, &q), ParseStatus::kOk);
  EXPECT_EQ(q.qname(), "a\\.b\\032\\\\.tarn");
}

TEST(ParseQueryTest, ReadsEdns) {
  Bytes b = MakeQuery("tarn", kTypeSoa);
  b[11] = 1;
  PutOpt(b, 1232, 0, /*dnssec_ok=*/true);
  Query q;
  ASSERT_EQ(Parse(b, &q), ParseStatus::kOk);
  EXPECT_TRUE(q.has_edns);
  EXPECT_EQ(q.edns_udp_size, 1232);
  EXPECT_EQ(q.edns_version, 0);
  EXPECT_TRUE(q.dnssec_ok);
}

TEST(ParseQueryTest, EdnsOptionsAndOtherAdditionalRecordsAreTolerated) {
  Bytes b = Header(7, 0, 1, 0, 0, 2);
  PutName(b, "tarn");
  Put16(b, kTypeA);
  Put16(b, kClassIn);
  // A TSIG-like record with a compressed owner pointing at the question, then an OPT
  // carrying a COOKIE option (what dig sends).
  b.push_back(0xC0);
  b.push_back(12);
  Put16(b, 250);
  Put16(b, 255);
  Put16(b, 0);
  Put16(b, 0);
  Put16(b, 2);
  Put16(b, 0xABCD);
  b.push_back(0);
  Put16(b, kTypeOpt);
  Put16(b, 4096);
  Put16(b, 0);
  Put16(b, 0);
  Put16(b, 12);
  Put16(b, 10);  // COOKIE
  Put16(b, 8);
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(i));
  Query q;
  ASSERT_EQ(Parse(b, &q), ParseStatus::kOk);
  EXPECT_TRUE(q.has_edns);
  EXPECT_EQ(q.edns_udp_size, 4096);
}

TEST(ParseQueryTest, DropsWhatCannotBeAnswered) {
  Query q;
  EXPECT_EQ(Parse({}, &q), ParseStatus::kDrop);
  EXPECT_EQ(Parse(Bytes(11, 0), &q), ParseStatus::kDrop);
  Bytes response = MakeQuery("tarn", kTypeA);
  response[2] |= 0x80;  // QR: a response; answering it could loop between two servers
  EXPECT_EQ(Parse(response, &q), ParseStatus::kDrop);
}

TEST(ParseQueryTest, QuestionCountOtherThanOneIsFormErr) {
  Query q;
  EXPECT_EQ(Parse(Header(9, 0, 0, 0, 0, 0), &q), ParseStatus::kFormErr);
  EXPECT_EQ(q.id, 9);
  EXPECT_FALSE(q.has_question);
  Bytes two = MakeQuery("tarn", kTypeA);
  two[5] = 2;
  PutName(two, "tarn");
  Put16(two, kTypeA);
  Put16(two, kClassIn);
  EXPECT_EQ(Parse(two, &q), ParseStatus::kFormErr);
}

TEST(ParseQueryTest, TruncatedQuestionsAreFormErr) {
  const Bytes full = MakeQuery("worker-0.fmnist.alice.tarn", kTypeA);
  Query q;
  for (size_t size = kDnsHeaderSize; size < full.size(); ++size) {
    EXPECT_EQ(Parse(Bytes(full.begin(), full.begin() + size), &q), ParseStatus::kFormErr) << size;
  }
  EXPECT_EQ(Parse(full, &q), ParseStatus::kOk);
}

TEST(ParseQueryTest, LabelOver63IsFormErr) {
  for (uint8_t length : {64, 0x80, 0xBF}) {
    Bytes b = Header(1, 0, 1, 0, 0, 0);
    b.push_back(length);
    b.insert(b.end(), 200, 'a');
    b.push_back(0);
    Put16(b, kTypeA);
    Put16(b, kClassIn);
    Query q;
    EXPECT_EQ(Parse(b, &q), ParseStatus::kFormErr) << int{length};
  }
  Query q;
  EXPECT_EQ(Parse(MakeQuery(std::string(63, 'a') + ".tarn", kTypeA), &q), ParseStatus::kOk);
}

TEST(ParseQueryTest, NameOver255IsFormErr) {
  const std::string l63(63, 'a');
  // 4 x (1 + 63) + 1 = 257 bytes on the wire.
  Query q;
  EXPECT_EQ(Parse(MakeQuery(l63 + "." + l63 + "." + l63 + "." + l63, kTypeA), &q),
            ParseStatus::kFormErr);
  // 3 x 64 + (1 + 61) + 1 = 255: the largest legal name.
  const std::string largest = l63 + "." + l63 + "." + l63 + "." + std::string(61, 'b');
  ASSERT_EQ(Parse(MakeQuery(largest, kTypeA), &q), ParseStatus::kOk);
  EXPECT_EQ(q.qname_wire().size(), 255u);
  EXPECT_EQ(q.qname(), largest);
}

TEST(ParseQueryTest, CompressionLoopsAreFormErr) {
  Query q;
  // A pointer to itself.
  Bytes self = Header(1, 0, 1, 0, 0, 0);
  self.push_back(0xC0);
  self.push_back(12);
  Put16(self, kTypeA);
  Put16(self, kClassIn);
  EXPECT_EQ(Parse(self, &q), ParseStatus::kFormErr);
  // A forward pointer (to a valid name after it).
  Bytes forward = Header(1, 0, 1, 0, 0, 0);
  forward.push_back(0xC0);
  forward.push_back(18);
  Put16(forward, kTypeA);
  Put16(forward, kClassIn);
  PutName(forward, "tarn");
  EXPECT_EQ(Parse(forward, &q), ParseStatus::kFormErr);
  // A label, then a pointer back to that label: a loop through backward pointers, stopped
  // by the 255-byte bound.
  Bytes loop = Header(1, 0, 1, 0, 0, 0);
  loop.push_back(1);
  loop.push_back('a');
  loop.push_back(0xC0);
  loop.push_back(12);
  Put16(loop, kTypeA);
  Put16(loop, kClassIn);
  EXPECT_EQ(Parse(loop, &q), ParseStatus::kFormErr);
  // A pointer past the end, and a pointer cut in half.
  Bytes past = Header(1, 0, 1, 0, 0, 0);
  past.push_back(0xFF);
  past.push_back(0xFF);
  EXPECT_EQ(Parse(past, &q), ParseStatus::kFormErr);
  Bytes half = Header(1, 0, 1, 0, 0, 0);
  half.push_back(0xC0);
  EXPECT_EQ(Parse(half, &q), ParseStatus::kFormErr);
}

TEST(ParseQueryTest, CompressedQuestionIsDecompressed) {
  // The additional record's owner points back into the question's name ("alice.tarn").
  Bytes b = Header(1, 0, 1, 0, 0, 1);
  PutName(b, "fmnist.alice.tarn");
  Put16(b, kTypeA);
  Put16(b, kClassIn);
  b.push_back(1);
  b.push_back('x');
  b.push_back(0xC0);
  b.push_back(12 + 7);
  Put16(b, kTypeA);
  Put16(b, kClassIn);
  Put16(b, 0);
  Put16(b, 0);
  Put16(b, 0);
  Query q;
  EXPECT_EQ(Parse(b, &q), ParseStatus::kOk);
}

TEST(ParseQueryTest, MalformedRecordsAfterTheQuestionAreFormErr) {
  Query q;
  Bytes an = MakeQuery("tarn", kTypeA);
  an[7] = 1;  // one answer record, missing
  EXPECT_EQ(Parse(an, &q), ParseStatus::kFormErr);
  EXPECT_TRUE(q.has_question);  // echoed in the FORMERR
  Bytes cut = MakeQuery("tarn", kTypeA, 1, /*edns=*/true);
  cut.pop_back();
  EXPECT_EQ(Parse(cut, &q), ParseStatus::kFormErr);
  Bytes two = MakeQuery("tarn", kTypeA, 1, /*edns=*/true);
  two[11] = 2;
  PutOpt(two, 512);
  EXPECT_EQ(Parse(two, &q), ParseStatus::kFormErr);
  Bytes owned = MakeQuery("tarn", kTypeA);
  owned[11] = 1;
  PutName(owned, "tarn");  // an OPT must be owned by the root
  Put16(owned, kTypeOpt);
  Put16(owned, 4096);
  Put16(owned, 0);
  Put16(owned, 0);
  Put16(owned, 0);
  EXPECT_EQ(Parse(owned, &q), ParseStatus::kFormErr);
}

TEST(ParseQueryTest, OtherOpcodesAreNotImp) {
  for (uint16_t opcode : {1, 2, 4, 5, 15}) {
    Bytes b = MakeQuery("tarn", kTypeSoa);
    b[2] = static_cast<uint8_t>(opcode << 3);
    Query q;
    EXPECT_EQ(Parse(b, &q), ParseStatus::kNotImp) << opcode;
    EXPECT_EQ(q.opcode, opcode);
    EXPECT_TRUE(q.has_question);
  }
}

TEST(ParseQueryTest, EdnsVersionOtherThanZeroIsBadVers) {
  Bytes b = MakeQuery("tarn", kTypeSoa);
  b[11] = 1;
  PutOpt(b, 4096, /*version=*/1);
  Query q;
  EXPECT_EQ(Parse(b, &q), ParseStatus::kBadVers);
  EXPECT_EQ(q.edns_version, 1);
}

TEST(UdpResponseLimitTest, HonoursEdnsWithin512To4096) {
  Query q;
  ASSERT_EQ(Parse(MakeQuery("tarn", kTypeA), &q), ParseStatus::kOk);
  EXPECT_EQ(UdpResponseLimit(q), 512u);
  for (auto [advertised, limit] : std::vector<std::pair<uint16_t, size_t>>{
           {0, 512}, {100, 512}, {512, 512}, {1232, 1232}, {4096, 4096}, {65000, 4096}}) {
    ASSERT_EQ(Parse(MakeQuery("tarn", kTypeA, 1, true, advertised), &q), ParseStatus::kOk);
    EXPECT_EQ(UdpResponseLimit(q), limit) << advertised;
  }
}

TEST(BuildResponseTest, ExactBytesOfAnAAnswer) {
  Query q;
  ASSERT_EQ(Parse(MakeQuery("w.a.b.tarn", kTypeA, 0x1234), &q), ParseStatus::kOk);
  const std::vector<ResourceRecord> answers = {A("w.a.b.tarn", 0x7F2A0003)};
  const Bytes got = Build(q, {Rcode::kNoError, true, answers, {}}, 512);
  Bytes want = Header(0x1234, 0x8500, 1, 1, 0, 0);  // QR AA RD
  PutName(want, "w.a.b.tarn");
  Put16(want, kTypeA);
  Put16(want, kClassIn);
  const uint8_t answer[] = {0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 127, 42, 0, 3};
  want.insert(want.end(), std::begin(answer), std::end(answer));
  EXPECT_EQ(got, want);
}

TEST(BuildResponseTest, CompressesSuffixesButNotSrvTargets) {
  Query q;
  ASSERT_EQ(Parse(MakeQuery("_grpc._tcp.worker.fmnist.alice.tarn", kTypeSrv), &q),
            ParseStatus::kOk);
  ResourceRecord srv;
  srv.name = "_grpc._tcp.worker.fmnist.alice.tarn";
  srv.type = kTypeSrv;
  srv.ttl = 5;
  srv.weight = 1;
  srv.port = 2222;
  srv.target = "worker-0.fmnist.alice.tarn";
  ResourceRecord soa;
  soa.name = "tarn";
  soa.type = kTypeSoa;
  soa.ttl = 5;
  soa.soa = {"tarn", "hostmaster.tarn", 7, 3600, 600, 86400, 5};
  const std::vector<ResourceRecord> answers = {srv}, authority = {soa};
  const Bytes got = Build(q, {Rcode::kNoError, true, answers, authority}, 512);

  const size_t question_end = 12 + 37 + 4;
  Bytes want(got.begin(), got.begin() + question_end);
  // SRV: owner = the question; target written in full (RFC 2782).
  const uint8_t srv_fixed[] = {0xC0, 12, 0,      33, 0, 1, 0, 0,    0,
                               5,    0,  6 + 28, 0,  0, 0, 1, 0x08, 0xAE};
  want.insert(want.end(), std::begin(srv_fixed), std::end(srv_fixed));
  PutName(want, "worker-0.fmnist.alice.tarn");
  // SOA: owner "tarn" points into the question (offset 12 + 31), as does MNAME; RNAME is
  // "hostmaster" + that pointer.
  const uint8_t tarn_at = 12 + 31;
  const uint8_t soa_fixed[] = {0xC0, tarn_at, 0, 6, 0, 1, 0, 0, 0, 5};
  want.insert(want.end(), std::begin(soa_fixed), std::end(soa_fixed));
  Put16(want, 2 + 13 + 20);
  want.push_back(0xC0);
  want.push_back(tarn_at);
  want.push_back(10);
  for (char c : std::string("hostmaster")) want.push_back(static_cast<uint8_t>(c));
  want.push_back(0xC0);
  want.push_back(tarn_at);
  for (uint32_t v : {7u, 3600u, 600u, 86400u, 5u}) {
    Put16(want, static_cast<uint16_t>(v >> 16));
    Put16(want, static_cast<uint16_t>(v));
  }
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(Bytes(got.begin() + question_end, got.end()),
            Bytes(want.begin() + question_end, want.end()));
}

TEST(BuildResponseTest, LaterNamesPointAtEarlierRecords) {
  Query q;
  ASSERT_EQ(Parse(MakeQuery("4.3.2.1.in-addr.arpa", kTypePtr), &q), ParseStatus::kOk);
  ResourceRecord p1, p2;
  p1.name = p2.name = "4.3.2.1.in-addr.arpa";
  p1.type = p2.type = kTypePtr;
  p1.target = "worker-0.fmnist.alice.tarn";
  p2.target = "ps-0.fmnist.alice.tarn";
  const std::vector<ResourceRecord> answers = {p1, p2};
  const Bytes got = Build(q, {Rcode::kNoError, true, answers, {}}, 512);
  // p2's target is "ps-0" + a pointer to p1's "fmnist.alice.tarn".
  const size_t p1_rdata = 12 + 22 + 4 + 12;
  const size_t p2_rdata = p1_rdata + 28 + 12;
  ASSERT_EQ(got.size(), p2_rdata + 7);
  EXPECT_EQ(got[p2_rdata], 4);
  EXPECT_EQ(got[p2_rdata + 5], 0xC0);
  EXPECT_EQ(got[p2_rdata + 6], p1_rdata + 9);
  const DecodedMessage m = Decode(got);
  ASSERT_EQ(m.answers.size(), 2u);
  EXPECT_EQ(m.answers[1].target, "ps-0.fmnist.alice.tarn");
}

TEST(BuildResponseTest, RoundTripsEveryRecordType) {
  Query q;
  ASSERT_EQ(Parse(MakeQuery("Worker-0.FMNIST.alice.tarn", kTypeAny, 77, true, 4096), &q),
            ParseStatus::kOk);
  std::vector<ResourceRecord> answers;
  answers.push_back(A("worker-0.fmnist.alice.tarn", 0x0A000001));
  ResourceRecord txt;
  txt.name = "worker-0.fmnist.alice.tarn";
  txt.type = kTypeTxt;
  txt.ttl = 9;
  txt.text = std::string(300, 'c');  // two character-strings: 255 + 45
  answers.push_back(txt);
  ResourceRecord ns;
  ns.name = "tarn";
  ns.type = kTypeNs;
  ns.target = "tarn";
  answers.push_back(ns);
  ResourceRecord ptr;
  ptr.name = "1.0.0.10.in-addr.arpa";
  ptr.type = kTypePtr;
  ptr.target = "worker-0.fmnist.alice.tarn";
  answers.push_back(ptr);
  ResourceRecord srv;
  srv.name = "_http._tcp.worker-0.fmnist.alice.tarn";
  srv.type = kTypeSrv;
  srv.priority = 3;
  srv.weight = 4;
  srv.port = 8501;
  srv.target = "worker-0.fmnist.alice.tarn";
  answers.push_back(srv);
  ResourceRecord soa;
  soa.name = "tarn";
  soa.type = kTypeSoa;
  soa.soa = {"tarn", "hostmaster.tarn", 1, 2, 3, 4, 5};
  const std::vector<ResourceRecord> authority = {soa};

  BuildResult result;
  const Bytes got = Build(q, {Rcode::kNoError, true, answers, authority}, 4096, &result);
  EXPECT_FALSE(result.truncated);
  const DecodedMessage m = Decode(got);
  EXPECT_EQ(m.id, 77);
  EXPECT_TRUE(m.qr);
  EXPECT_TRUE(m.aa);
  EXPECT_TRUE(m.rd);
  EXPECT_FALSE(m.ra);
  EXPECT_FALSE(m.tc);
  EXPECT_EQ(m.rcode, 0);
  ASSERT_EQ(m.questions.size(), 1u);
  EXPECT_EQ(m.questions[0].name, "Worker-0.FMNIST.alice.tarn");
  EXPECT_EQ(m.questions[0].type, kTypeAny);
  ASSERT_EQ(m.answers.size(), answers.size());
  // Owners equal to the question read back in the client's case.
  EXPECT_EQ(m.answers[0].name, "Worker-0.FMNIST.alice.tarn");
  EXPECT_EQ(m.answers[0].ipv4, 0x0A000001u);
  EXPECT_EQ(m.answers[1].text, txt.text);
  EXPECT_EQ(m.answers[1].ttl, 9u);
  EXPECT_EQ(m.answers[2].name, "tarn");
  EXPECT_EQ(m.answers[2].target, "tarn");
  EXPECT_EQ(m.answers[3].name, "1.0.0.10.in-addr.arpa");
  EXPECT_EQ(m.answers[3].target, "Worker-0.FMNIST.alice.tarn");
  EXPECT_EQ(m.answers[4].name, "_http._tcp.Worker-0.FMNIST.alice.tarn");
  EXPECT_EQ(m.answers[4].priority, 3);
  EXPECT_EQ(m.answers[4].weight, 4);
  EXPECT_EQ(m.answers[4].port, 8501);
  EXPECT_EQ(m.answers[4].target, "worker-0.fmnist.alice.tarn");  // uncompressed
  ASSERT_EQ(m.authority.size(), 1u);
  EXPECT_EQ(m.authority[0].soa.rname, "hostmaster.tarn");
  EXPECT_EQ(m.authority[0].soa.minimum, 5u);
  EXPECT_EQ(m.authority[0].soa.expire, 4u);
  EXPECT_TRUE(m.has_edns);
  EXPECT_EQ(m.edns_udp_size, 4096);
  EXPECT_EQ(m.edns_version, 0);
  EXPECT_TRUE(m.additional.empty());
}

TEST(BuildResponseTest, TruncatesPast512WithoutEdns) {
  std::vector<ResourceRecord> answers;
  for (uint32_t i = 0; i < 40; ++i)
    answers.push_back(A("worker.fmnist.alice.tarn", 0x7F2A0000 + i));
  // 12 + 30 + 40 x 16 = 682 bytes: over 512, within 4096.
  Query q;
  ASSERT_EQ(Parse(MakeQuery("worker.fmnist.alice.tarn", kTypeA), &q), ParseStatus::kOk);
  BuildResult r;
  Bytes got = Build(q, {Rcode::kNoError, true, answers, {}}, UdpResponseLimit(q), &r);
  EXPECT_TRUE(r.truncated);
  DecodedMessage m = Decode(got);
  EXPECT_TRUE(m.tc);
  EXPECT_TRUE(m.aa);
  EXPECT_EQ(m.questions.size(), 1u);
  EXPECT_TRUE(m.answers.empty());
  EXPECT_EQ(got.size(), 12u + 30u);

  ASSERT_EQ(Parse(MakeQuery("worker.fmnist.alice.tarn", kTypeA, 2, true, 4096), &q),
            ParseStatus::kOk);
  got = Build(q, {Rcode::kNoError, true, answers, {}}, UdpResponseLimit(q), &r);
  EXPECT_FALSE(r.truncated);
  m = Decode(got);
  EXPECT_EQ(m.answers.size(), 40u);
  EXPECT_EQ(got.size(), 12u + 30u + 640u + 11u);

  // The EDNS size is a real limit: 600 bytes truncates, and the OPT record stays.
  ASSERT_EQ(Parse(MakeQuery("worker.fmnist.alice.tarn", kTypeA, 3, true, 600), &q),
            ParseStatus::kOk);
  got = Build(q, {Rcode::kNoError, true, answers, {}}, UdpResponseLimit(q), &r);
  EXPECT_TRUE(r.truncated);
  m = Decode(got);
  EXPECT_TRUE(m.tc);
  EXPECT_TRUE(m.has_edns);
  EXPECT_TRUE(m.answers.empty());
}

TEST(BuildResponseTest, TcpTakesLargeAnswers) {
  std::vector<ResourceRecord> answers;
  for (uint32_t i = 0; i < 2000; ++i) answers.push_back(A("worker.fmnist.alice.tarn", i));
  Query q;
  ASSERT_EQ(Parse(MakeQuery("worker.fmnist.alice.tarn", kTypeA), &q), ParseStatus::kOk);
  BuildResult r;
  const Bytes got = Build(q, {Rcode::kNoError, true, answers, {}}, kMaxMessage, &r);
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(Decode(got).answers.size(), 2000u);
  // 4096 records (64 KiB of answers) do not fit even TCP: truncated, not corrupt.
  for (uint32_t i = 2000; i < 4096; ++i) answers.push_back(A("worker.fmnist.alice.tarn", i));
  const Bytes cut = Build(q, {Rcode::kNoError, true, answers, {}}, kMaxMessage, &r);
  EXPECT_TRUE(r.truncated);
  EXPECT_TRUE(Decode(cut).tc);
}

TEST(BuildResponseTest, ErrorResponses) {
  Query q;
  ASSERT_EQ(Parse(Header(5, 0x0100, 0, 0, 0, 0), &q), ParseStatus::kFormErr);
  DecodedMessage m = Decode(Build(q, {Rcode::kFormErr, false, {}, {}}, 512));
  EXPECT_EQ(m.id, 5);
  EXPECT_EQ(m.rcode, 1);
  EXPECT_FALSE(m.aa);
  EXPECT_TRUE(m.questions.empty());

  Bytes b = MakeQuery("tarn", kTypeSoa, 6);
  b[11] = 1;
  PutOpt(b, 4096, /*version=*/3);
  ASSERT_EQ(Parse(b, &q), ParseStatus::kBadVers);
  const Bytes badvers = Build(q, {Rcode::kBadVers, false, {}, {}}, 512);
  EXPECT_EQ(badvers[3] & 0xF, 0);  // the low bits; the high ones are in the OPT record
  m = Decode(badvers);
  EXPECT_EQ(m.rcode, 16);
  EXPECT_TRUE(m.has_edns);
  EXPECT_EQ(m.edns_version, 0);

  Bytes notify = MakeQuery("tarn", kTypeSoa, 8);
  notify[2] = 4 << 3;
  ASSERT_EQ(Parse(notify, &q), ParseStatus::kNotImp);
  m = Decode(Build(q, {Rcode::kNotImp, false, {}, {}}, 512));
  EXPECT_EQ(m.opcode, 4);
  EXPECT_EQ(m.rcode, 4);
  EXPECT_EQ(m.questions.size(), 1u);
}

TEST(BuildResponseTest, TooSmallABufferWritesNothing) {
  Query q;
  ASSERT_EQ(Parse(MakeQuery("tarn", kTypeA), &q), ParseStatus::kOk);
  uint8_t small[11];
  EXPECT_EQ(BuildResponse(q, {}, 512, small).size, 0u);
}

TEST(DecodeMessageTest, RejectsMalformedRdata) {
  Query q;
  ASSERT_EQ(Parse(MakeQuery("tarn", kTypeA), &q), ParseStatus::kOk);
  const std::vector<ResourceRecord> answers = {A("tarn", 1)};
  Bytes good = Build(q, {Rcode::kNoError, true, answers, {}}, 512);
  DecodedMessage m;
  ASSERT_TRUE(DecodeMessage(good, &m).ok());
  Bytes bad = good;
  bad[bad.size() - 5] = 3;  // RDLENGTH 3 for an A record
  bad.pop_back();
  EXPECT_FALSE(DecodeMessage(bad, &m).ok());
  for (size_t size = 0; size < good.size(); ++size) {
    EXPECT_FALSE(DecodeMessage(Bytes(good.begin(), good.begin() + size), &m).ok()) << size;
  }
}

}  // namespace
}  // namespace tarn::registry
