#include "registry/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "registry/instance_records_for_test.h"

namespace tarn::registry {
namespace {

// The answers of a lookup as "TYPE data" strings, in order.
std::vector<std::string> Rendered(std::span<const ResourceRecord> records) {
  std::vector<std::string> out;
  for (const ResourceRecord& rr : records) {
    std::string line = rr.name + " " + TypeName(rr.type) + " ";
    switch (rr.type) {
      case kTypeA:
        line += std::to_string(rr.ipv4 >> 24) + "." + std::to_string(rr.ipv4 >> 16 & 0xFF) + "." +
                std::to_string(rr.ipv4 >> 8 & 0xFF) + "." + std::to_string(rr.ipv4 & 0xFF);
        break;
      case kTypeSrv:
        line += std::to_string(rr.priority) + " " + std::to_string(rr.weight) + " " +
                std::to_string(rr.port) + " " + rr.target;
        break;
      case kTypeTxt:
        line += rr.text;
        break;
      case kTypeSoa:
        line += rr.soa.mname + " " + rr.soa.rname + " " + std::to_string(rr.soa.minimum);
        break;
      default:
        line += rr.target;
    }
    out.push_back(line);
  }
  return out;
}

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest() : registry_("tarn", 5) {
    registry_.Upsert(Instance("worker", 0, "127.42.0.3"));
    registry_.Upsert(Instance("worker", 1, "127.42.0.4"));
    registry_.Upsert(Instance("worker", 2, "127.42.0.5", /*ready=*/false));
    registry_.Upsert(Instance("worker", 3, "", /*ready=*/false));
    registry_.Upsert(Instance("ps", 0, "127.42.0.2"));
  }
  Registry registry_;
};

using Strings = std::vector<std::string>;

TEST_F(RegistryTest, InstanceA) {
  const LookupResult r = registry_.Lookup("worker-0.fmnist.alice.tarn", kTypeA);
  EXPECT_EQ(r.rcode(), Rcode::kNoError);
  EXPECT_TRUE(r.authoritative());
  EXPECT_EQ(Rendered(r.answers()), Strings{"worker-0.fmnist.alice.tarn A 127.42.0.3"});
  EXPECT_TRUE(r.authority().empty());
  EXPECT_EQ(r.answers()[0].ttl, 5u);
  // A not-ready instance still has its own address.
  EXPECT_EQ(Rendered(registry_.Lookup("worker-2.fmnist.alice.tarn", kTypeA).answers()),
            Strings{"worker-2.fmnist.alice.tarn A 127.42.0.5"});
}

TEST_F(RegistryTest, InstanceTxtIsTheContainerId) {
  const LookupResult r = registry_.Lookup("worker-1.fmnist.alice.tarn", kTypeTxt);
  EXPECT_EQ(Rendered(r.answers()), Strings{"worker-1.fmnist.alice.tarn TXT container_worker-1"});
}

TEST_F(RegistryTest, OtherTypesOfAnInstanceAreNodataWithSoa) {
  for (uint16_t type : {kTypeAaaa, kTypeNs, kTypeSrv, kTypePtr, uint16_t{99}}) {
    const LookupResult r = registry_.Lookup("worker-0.fmnist.alice.tarn", type);
    EXPECT_EQ(r.rcode(), Rcode::kNoError) << type;
    EXPECT_TRUE(r.authoritative());
    EXPECT_TRUE(r.answers().empty());
    EXPECT_EQ(Rendered(r.authority()), Strings{"tarn SOA tarn hostmaster.tarn 5"});
  }
  // An instance without an address yet exists, with no A record.
  const LookupResult r = registry_.Lookup("worker-3.fmnist.alice.tarn", kTypeA);
  EXPECT_EQ(r.rcode(), Rcode::kNoError);
  EXPECT_TRUE(r.answers().empty());
}

TEST_F(RegistryTest, ComponentIsMultiAOfReadyInstances) {
  const LookupResult r = registry_.Lookup("worker.fmnist.alice.tarn", kTypeA);
  EXPECT_EQ(r.rcode(), Rcode::kNoError);
  EXPECT_EQ(Rendered(r.answers()), (Strings{"worker.fmnist.alice.tarn A 127.42.0.3",
                                            "worker.fmnist.alice.tarn A 127.42.0.4"}));
}

TEST_F(RegistryTest, SrvOfComponentAndInstance) {
  LookupResult r = registry_.Lookup("_grpc._tcp.worker.fmnist.alice.tarn", kTypeSrv);
  EXPECT_EQ(r.rcode(), Rcode::kNoError);
  EXPECT_TRUE(r.authoritative());
  EXPECT_EQ(
      Rendered(r.answers()),
      (Strings{"_grpc._tcp.worker.fmnist.alice.tarn SRV 0 1 2222 worker-0.fmnist.alice.tarn",
               "_grpc._tcp.worker.fmnist.alice.tarn SRV 0 1 2222 worker-1.fmnist.alice.tarn"}));
  r = registry_.Lookup("_http._tcp.worker-2.fmnist.alice.tarn", kTypeSrv);
  EXPECT_EQ(
      Rendered(r.answers()),
      Strings{"_http._tcp.worker-2.fmnist.alice.tarn SRV 0 1 8501 worker-2.fmnist.alice.tarn"});
  // No address yet: the name exists, with no SRV.
  r = registry_.Lookup("_grpc._tcp.worker-3.fmnist.alice.tarn", kTypeSrv);
  EXPECT_EQ(r.rcode(), Rcode::kNoError);
  EXPECT_TRUE(r.answers().empty());
  EXPECT_EQ(registry_.Lookup("_ssh._tcp.worker.fmnist.alice.tarn", kTypeSrv).rcode(),
            Rcode::kNxDomain);
}

TEST_F(RegistryTest, ComponentWithNoReadyInstanceIsNodata) {
  registry_.Upsert(Instance("serving", 0, "127.42.0.9", /*ready=*/false));
  LookupResult r = registry_.Lookup("serving.fmnist.alice.tarn", kTypeA);
  EXPECT_EQ(r.rcode(), Rcode::kNoError);
  EXPECT_TRUE(r.answers().empty());
  EXPECT_EQ(r.authority().size(), 1u);
  r = registry_.Lookup("_http._tcp.serving.fmnist.alice.tarn", kTypeSrv);
  EXPECT_EQ(r.rcode(), Rcode::kNoError);
  EXPECT_TRUE(r.answers().empty());
}

TEST_F(RegistryTest, PtrOfEveryInstanceAddress) {
  LookupResult r = registry_.Lookup("3.0.42.127.in-addr.arpa", kTypePtr);
  EXPECT_EQ(r.rcode(), Rcode::kNoError);
  EXPECT_TRUE(r.authoritative());
  EXPECT_EQ(Rendered(r.answers()),
            Strings{"3.0.42.127.in-addr.arpa PTR worker-0.fmnist.alice.tarn"});
  r = registry_.Lookup("5.0.42.127.in-addr.arpa", kTypePtr);  // not ready: still its name
  EXPECT_EQ(Rendered(r.answers()),
            Strings{"5.0.42.127.in-addr.arpa PTR worker-2.fmnist.alice.tarn"});
  r = registry_.Lookup("3.0.42.127.in-addr.arpa", kTypeA);
  EXPECT_EQ(r.rcode(), Rcode::kNoError);
  EXPECT_TRUE(r.answers().empty());
  EXPECT_TRUE(r.authority().empty());  // tarn has no SOA for in-addr.arpa
  EXPECT_EQ(registry_.Lookup("99.0.42.127.in-addr.arpa", kTypePtr).rcode(), Rcode::kRefused);
  EXPECT_EQ(registry_.Lookup("42.127.in-addr.arpa", kTypePtr).rcode(), Rcode::kRefused);
}

TEST_F(RegistryTest, ApexSoaAndNs) {
  LookupResult r = registry_.Lookup("tarn", kTypeSoa);
  EXPECT_EQ(r.rcode(), Rcode::kNoError);
  EXPECT_TRUE(r.authoritative());
  ASSERT_EQ(r.answers().size(), 1u);
  const SoaData& soa = r.answers()[0].soa;
  EXPECT_EQ(soa.mname, "tarn");
  EXPECT_EQ(soa.rname, "hostmaster.tarn");
  EXPECT_EQ(soa.minimum, 5u);
  EXPECT_EQ(soa.serial, static_cast<uint32_t>(registry_.generation()));
  EXPECT_EQ(Rendered(registry_.Lookup("tarn", kTypeNs).answers()), Strings{"tarn NS tarn"});
  r = registry_.Lookup("tarn", kTypeA);
  EXPECT_EQ(r.rcode(), Rcode::kNoError);
  EXPECT_TRUE(r.answers().empty());
}

TEST_F(RegistryTest, EmptyNonTerminalsAreNodata) {
  for (const char* name : {"fmnist.alice.tarn", "alice.tarn", "_tcp.worker.fmnist.alice.tarn",
                           "_tcp.worker-0.fmnist.alice.tarn"}) {
    const LookupResult r = registry_.Lookup(name, kTypeA);
    EXPECT_EQ(r.rcode(), Rcode::kNoError) << name;
    EXPECT_TRUE(r.authoritative());
    EXPECT_TRUE(r.answers().empty());
    EXPECT_EQ(r.authority().size(), 1u);
  }
}

TEST_F(RegistryTest, UnknownNamesInTheDomainAreNxdomainWithSoa) {
  for (const char* name : {"worker-9.fmnist.alice.tarn", "bob.tarn", "x.worker-0.fmnist.alice.tarn",
                           "nope.fmnist.alice.tarn", "a.b.c.d.e.tarn"}) {
    const LookupResult r = registry_.Lookup(name, kTypeA);
    EXPECT_EQ(r.rcode(), Rcode::kNxDomain) << name;
    EXPECT_TRUE(r.authoritative());
    EXPECT_TRUE(r.answers().empty());
    EXPECT_EQ(Rendered(r.authority()), Strings{"tarn SOA tarn hostmaster.tarn 5"});
    EXPECT_EQ(r.authority()[0].ttl, 5u);
  }
}

TEST_F(RegistryTest, NamesOutsideAreRefused) {
  for (const char* name : {"example.com", "xtarn", "tarn.example.com", ".", "", "arpa",
                           "in-addr.arpa", "1.0.0.127.in-addr.arpa", "worker-0.fmnist.alice"}) {
    const LookupResult r = registry_.Lookup(name, kTypeA);
    EXPECT_EQ(r.rcode(), Rcode::kRefused) << name;
    EXPECT_FALSE(r.authoritative());
    EXPECT_TRUE(r.answers().empty());
    EXPECT_TRUE(r.authority().empty());
  }
}

TEST_F(RegistryTest, CaseInsensitiveWithOrWithoutTrailingDot) {
  for (const char* name : {"WORKER-0.Fmnist.ALICE.tarn", "worker-0.fmnist.alice.tarn.",
                           "Worker-0.FMNIST.alice.TARN."}) {
    EXPECT_EQ(Rendered(registry_.Lookup(name, kTypeA).answers()),
              Strings{"worker-0.fmnist.alice.tarn A 127.42.0.3"})
        << name;
  }
  EXPECT_EQ(registry_.Lookup("TARN", kTypeSoa).answers().size(), 1u);
}

TEST_F(RegistryTest, AnyAnswersEveryRecordOfTheName) {
  LookupResult r = registry_.Lookup("worker-0.fmnist.alice.tarn", kTypeAny);
  EXPECT_EQ(Rendered(r.answers()), (Strings{"worker-0.fmnist.alice.tarn A 127.42.0.3",
                                            "worker-0.fmnist.alice.tarn TXT container_worker-0"}));
  r = registry_.Lookup("tarn", kTypeAny);
  EXPECT_EQ(r.answers().size(), 2u);  // SOA and NS
  r = registry_.Lookup("alice.tarn", kTypeAny);
  EXPECT_TRUE(r.answers().empty());
  EXPECT_EQ(r.authority().size(), 1u);
}

TEST_F(RegistryTest, UsersAndAssembliesAreSeparate) {
  InstanceRecords bob = Instance("worker", 0, "127.43.0.3");
  bob.user = "bob";
  registry_.Upsert(bob);
  EXPECT_EQ(Rendered(registry_.Lookup("worker-0.fmnist.bob.tarn", kTypeA).answers()),
            Strings{"worker-0.fmnist.bob.tarn A 127.43.0.3"});
  EXPECT_EQ(Rendered(registry_.Lookup("worker.fmnist.bob.tarn", kTypeA).answers()),
            Strings{"worker.fmnist.bob.tarn A 127.43.0.3"});
  EXPECT_EQ(registry_.Lookup("worker.fmnist.alice.tarn", kTypeA).answers().size(), 2u);
}

TEST_F(RegistryTest, UpdatesRemovesAndGenerations) {
  const uint64_t g0 = registry_.generation();
  registry_.Upsert(Instance("worker", 0, "127.42.0.3"));  // identical: not a change
  EXPECT_EQ(registry_.generation(), g0);

  const LookupResult before = registry_.Lookup("worker.fmnist.alice.tarn", kTypeA);
  registry_.Upsert(Instance("worker", 2, "127.42.0.5", /*ready=*/true));
  EXPECT_EQ(registry_.generation(), g0 + 1);
  EXPECT_EQ(registry_.Lookup("worker.fmnist.alice.tarn", kTypeA).answers().size(), 3u);
  EXPECT_EQ(before.answers().size(), 2u);  // an earlier result keeps its snapshot

  registry_.Remove("alice", "fmnist", "worker-0");
  EXPECT_EQ(registry_.generation(), g0 + 2);
  EXPECT_EQ(registry_.Lookup("worker-0.fmnist.alice.tarn", kTypeA).rcode(), Rcode::kNxDomain);
  EXPECT_EQ(registry_.Lookup("3.0.42.127.in-addr.arpa", kTypePtr).rcode(), Rcode::kRefused);
  registry_.Remove("alice", "fmnist", "worker-0");  // absent: not a change
  EXPECT_EQ(registry_.generation(), g0 + 2);

  registry_.RemoveAssembly("alice", "fmnist");
  EXPECT_EQ(registry_.generation(), g0 + 3);
  EXPECT_EQ(registry_.Lookup("worker.fmnist.alice.tarn", kTypeA).rcode(), Rcode::kNxDomain);
  EXPECT_EQ(registry_.Lookup("fmnist.alice.tarn", kTypeA).rcode(), Rcode::kNxDomain);
  EXPECT_EQ(registry_.Lookup("alice.tarn", kTypeA).rcode(), Rcode::kNxDomain);
  EXPECT_EQ(registry_.Lookup("tarn", kTypeSoa).answers()[0].soa.serial, g0 + 3);
}

TEST_F(RegistryTest, RemoveAssemblyLeavesOthers) {
  InstanceRecords other = Instance("worker", 0, "127.44.0.3");
  other.assembly = "fmnist2";
  registry_.Upsert(other);
  registry_.RemoveAssembly("alice", "fmnist");
  EXPECT_EQ(registry_.Lookup("worker-0.fmnist2.alice.tarn", kTypeA).answers().size(), 1u);
  EXPECT_EQ(registry_.Lookup("alice.tarn", kTypeA).rcode(), Rcode::kNoError);
}

TEST_F(RegistryTest, HostsLines) {
  for (int i = 3; i <= 11; ++i) {
    registry_.Upsert(Instance("worker", i, "127.42.1." + std::to_string(i)));
  }
  registry_.Upsert(Instance("worker", 3, "", false));
  EXPECT_EQ(registry_.HostsLines("alice", "fmnist"),
            "127.42.0.2\tps-0.fmnist.alice.tarn ps-0\n"
            "127.42.0.3\tworker-0.fmnist.alice.tarn worker-0\n"
            "127.42.0.4\tworker-1.fmnist.alice.tarn worker-1\n"
            "127.42.0.5\tworker-2.fmnist.alice.tarn worker-2\n"
            "127.42.1.4\tworker-4.fmnist.alice.tarn worker-4\n"
            "127.42.1.5\tworker-5.fmnist.alice.tarn worker-5\n"
            "127.42.1.6\tworker-6.fmnist.alice.tarn worker-6\n"
            "127.42.1.7\tworker-7.fmnist.alice.tarn worker-7\n"
            "127.42.1.8\tworker-8.fmnist.alice.tarn worker-8\n"
            "127.42.1.9\tworker-9.fmnist.alice.tarn worker-9\n"
            "127.42.1.10\tworker-10.fmnist.alice.tarn worker-10\n"
            "127.42.1.11\tworker-11.fmnist.alice.tarn worker-11\n");
  EXPECT_EQ(registry_.HostsLines("alice", "other"), "");
  EXPECT_EQ(registry_.HostsLines("alice", "fmnis"), "");
}

TEST(RegistryDomainTest, MultiLabelDomainAndCase) {
  Registry registry("ML.Example.com.", 30);
  EXPECT_EQ(registry.domain(), "ml.example.com");
  InstanceRecords r = Instance("worker", 0, "10.1.2.3");
  registry.Upsert(r);
  LookupResult l = registry.Lookup("worker-0.fmnist.alice.ml.example.com", kTypeA);
  ASSERT_EQ(l.answers().size(), 1u);
  EXPECT_EQ(l.answers()[0].ttl, 30u);
  EXPECT_EQ(registry.Lookup("alice.ml.example.com", kTypeA).rcode(), Rcode::kNoError);
  EXPECT_EQ(registry.Lookup("example.com", kTypeA).rcode(), Rcode::kRefused);
  EXPECT_EQ(registry.Lookup("x.ml.example.com", kTypeA).rcode(), Rcode::kNxDomain);
  l = registry.Lookup("nope.ml.example.com", kTypeA);
  EXPECT_EQ(l.authority()[0].soa.minimum, 30u);
  EXPECT_EQ(l.authority()[0].name, "ml.example.com");
  EXPECT_EQ(registry.HostsLines("alice", "fmnist"),
            "10.1.2.3\tworker-0.fmnist.alice.ml.example.com worker-0\n");
}

TEST(CheckInstanceRecordsTest, NamesTheFieldThatWillNotPublish) {
  InstanceRecords r = Instance("worker", 0, "127.42.0.3");
  EXPECT_TRUE(CheckInstanceRecords(r).ok());
  r.ip = "";
  EXPECT_TRUE(CheckInstanceRecords(r).ok());
  r.ip = "127.42.0";
  EXPECT_NE(CheckInstanceRecords(r).message().find("ip \"127.42.0\""), std::string::npos);
  r.ip = "::1";
  EXPECT_FALSE(CheckInstanceRecords(r).ok());
  r = Instance("worker", 0, "127.42.0.3");
  r.user = "Alice";
  EXPECT_NE(CheckInstanceRecords(r).message().find("user \"Alice\""), std::string::npos);
  r = Instance("worker", 0, "127.42.0.3");
  r.ports = {{"grpc_x", 1}};
  EXPECT_FALSE(CheckInstanceRecords(r).ok());
  r.ports = {{"grpc", 0}};
  EXPECT_FALSE(CheckInstanceRecords(r).ok());
  r.ports = {{"grpc", 65536}};
  EXPECT_FALSE(CheckInstanceRecords(r).ok());
}

TEST(RegistryInvalidTest, InvalidRecordsPublishNothingBad) {
  Registry registry;
  InstanceRecords r = Instance("worker", 0, "not-an-ip");
  r.user = "Bad_User";
  registry.Upsert(r);
  EXPECT_EQ(registry.Lookup("worker-0.fmnist.bad_user.tarn", kTypeA).rcode(), Rcode::kNxDomain);
  r.user = "carol";
  r.ports = {{"bad_port", 1}, {"ok", 70000}, {"grpc", 2222}};
  registry.Upsert(r);
  LookupResult l = registry.Lookup("worker-0.fmnist.carol.tarn", kTypeA);
  EXPECT_EQ(l.rcode(), Rcode::kNoError);
  EXPECT_TRUE(l.answers().empty());  // no address
  EXPECT_EQ(registry.Lookup("_ok._tcp.worker.fmnist.carol.tarn", kTypeSrv).rcode(),
            Rcode::kNxDomain);
  EXPECT_EQ(registry.Lookup("_grpc._tcp.worker.fmnist.carol.tarn", kTypeSrv).rcode(),
            Rcode::kNoError);
  EXPECT_EQ(registry.HostsLines("carol", "fmnist"), "");
}

TEST(RegistryConcurrencyTest, LookupsDuringUpdatesSeeWholeSnapshots) {
  Registry registry;
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      size_t seen = 0;
      while (!done.load()) {
        const LookupResult r = registry.Lookup("worker.fmnist.alice.tarn", kTypeA);
        // Instances only arrive, each ready with an address: a reader sees the component's
        // A records grow, each one whole, never a half-built or shrinking set.
        if (r.rcode() == Rcode::kNoError) {
          if (r.answers().size() < seen) ++bad;
          seen = r.answers().size();
          for (size_t i = 0; i < r.answers().size(); ++i) {
            const ResourceRecord& rr = r.answers()[i];
            if (rr.type != kTypeA || rr.ipv4 != 0x7F2A0000u + i + 1) ++bad;
          }
        } else if (r.rcode() != Rcode::kNxDomain || seen != 0) {
          ++bad;
        }
      }
    });
  }
  for (int i = 0; i < 100; ++i) {
    registry.Upsert(Instance("worker", i, "127.42.0." + std::to_string(i + 1)));
  }
  done = true;
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(registry.Lookup("worker.fmnist.alice.tarn", kTypeA).answers().size(), 100u);
  EXPECT_EQ(registry.generation(), 100u);
}

}  // namespace
}  // namespace tarn::registry
