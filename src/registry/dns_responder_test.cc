#include "registry/dns_responder.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "registry/dns_wire_for_test.h"

namespace tarn::registry {
namespace {

using testing::Bytes;
using testing::MakeQuery;

class RespondTest : public ::testing::Test {
 protected:
  RespondTest() : query_(std::make_unique<Query>()), out_(kMaxMessage) {
    for (int i = 0; i < 60; ++i) {
      InstanceRecords r;
      r.user = "alice";
      r.assembly = "fmnist";
      r.component = "worker";
      r.instance = "worker-" + std::to_string(i);
      r.ip = "127.42.0." + std::to_string(i + 1);
      r.ready = true;
      registry_.Upsert(r);
    }
  }

  Response Ask(const Bytes& packet, Transport transport, DecodedMessage* m = nullptr) {
    const Response r = Respond(registry_, packet, transport, query_.get(), out_);
    if (m != nullptr && !r.dropped) {
      const Status s = DecodeMessage(std::span<const uint8_t>(out_.data(), r.size), m);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    return r;
  }

  Registry registry_;
  std::unique_ptr<Query> query_;
  Bytes out_;
};

TEST_F(RespondTest, AnswersFromTheRegistry) {
  DecodedMessage m;
  const Response r = Ask(MakeQuery("worker-0.fmnist.alice.tarn", kTypeA), Transport::kUdp, &m);
  EXPECT_FALSE(r.dropped);
  EXPECT_EQ(r.rcode, Rcode::kNoError);
  EXPECT_TRUE(m.aa);
  ASSERT_EQ(m.answers.size(), 1u);
  EXPECT_EQ(m.answers[0].ipv4, 0x7F2A0001u);
}

TEST_F(RespondTest, NxdomainCarriesTheSoa) {
  DecodedMessage m;
  EXPECT_EQ(Ask(MakeQuery("nope.tarn", kTypeA), Transport::kUdp, &m).rcode, Rcode::kNxDomain);
  EXPECT_EQ(m.rcode, 3);
  ASSERT_EQ(m.authority.size(), 1u);
  EXPECT_EQ(m.authority[0].type, kTypeSoa);
}

TEST_F(RespondTest, OtherClassesAndZoneTransfersAreRefused) {
  DecodedMessage m;
  EXPECT_EQ(
      Ask(MakeQuery("version.bind", 16, 0x1234, false, 4096, /*CH*/ 3), Transport::kUdp, &m).rcode,
      Rcode::kRefused);
  EXPECT_FALSE(m.aa);
  EXPECT_EQ(Ask(MakeQuery("tarn", kTypeAxfr), Transport::kTcp, &m).rcode, Rcode::kRefused);
  EXPECT_EQ(Ask(MakeQuery("tarn", kTypeIxfr), Transport::kTcp, &m).rcode, Rcode::kRefused);
  EXPECT_EQ(
      Ask(MakeQuery("tarn", kTypeSoa, 0x1234, false, 4096, kClassAny), Transport::kUdp, &m).rcode,
      Rcode::kNoError);
}

TEST_F(RespondTest, TruncatesOverUdpOnly) {
  // 60 A records of 16 bytes: over 512.
  const Bytes q = MakeQuery("worker.fmnist.alice.tarn", kTypeA);
  DecodedMessage m;
  Response r = Ask(q, Transport::kUdp, &m);
  EXPECT_TRUE(r.truncated);
  EXPECT_TRUE(m.tc);
  EXPECT_LE(r.size, 512u);
  r = Ask(q, Transport::kTcp, &m);
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(m.answers.size(), 60u);
}

TEST_F(RespondTest, DropsAndErrors) {
  EXPECT_TRUE(Ask(Bytes{1, 2, 3}, Transport::kUdp).dropped);
  Bytes response = MakeQuery("tarn", kTypeA);
  response[2] |= 0x80;
  EXPECT_TRUE(Ask(response, Transport::kUdp).dropped);
  Bytes garbage = MakeQuery("tarn", kTypeA);
  garbage[12] = 0x41;
  DecodedMessage m;
  EXPECT_EQ(Ask(garbage, Transport::kUdp, &m).rcode, Rcode::kFormErr);
  EXPECT_EQ(m.id, 0x1234);
}

}  // namespace
}  // namespace tarn::registry
