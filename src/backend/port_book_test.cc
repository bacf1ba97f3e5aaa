#include "backend/port_book.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "common/file.h"
#include "common/temp_dir.h"

namespace tarn::backend {
namespace {

using spec::NamedPort;

const std::vector<NamedPort> kGrpcHttp = {{"grpc", 2222}, {"http", 8501}};

TEST(ParsePortRange, AcceptsAndRejectsWithTheText) {
  auto r = ParsePortRange("20000-20009");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (PortRange{20000, 20009}));
  EXPECT_EQ(r->size(), 10);
  for (const char* bad : {"", "20000", "0-10", "10-70000", "30000-20000", "a-b", "1-2-3"}) {
    auto b = ParsePortRange(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find(std::string("\"") + bad + "\""), std::string::npos)
        << b.status().message();
  }
}

TEST(PortBook, AssignsDistinctStableNumbersAndRemembersThemAcrossALoad) {
  TempDir dir("port-book");
  std::vector<NamedPort> w0, w1, p0;
  {
    auto book = PortBook::Load({30000, 30099}, dir.path());
    ASSERT_TRUE(book.ok()) << book.status().ToString();
    w0 = *(*book)->Assign("alice", "fmnist", "worker-0", kGrpcHttp);
    w1 = *(*book)->Assign("alice", "fmnist", "worker-1", kGrpcHttp);
    p0 = *(*book)->Assign("bob", "fmnist", "ps-0", {{"grpc", 2222}});
    // Asking again changes nothing, whatever the order of the names.
    auto again = (*book)->Assign("alice", "fmnist", "worker-0", {{"http", 8501}, {"grpc", 2222}});
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)[0].port, w0[1].port);
    EXPECT_EQ((*again)[1].port, w0[0].port);
    EXPECT_EQ((*book)->assigned(), 5u);
  }
  std::set<int> all;
  for (const auto& v : {w0, w1, p0}) {
    for (const NamedPort& p : v) {
      EXPECT_GE(p.port, 30000);
      EXPECT_LE(p.port, 30099);
      all.insert(p.port);
    }
  }
  EXPECT_EQ(all.size(), 5u) << "numbers are unique across users and assemblies";
  EXPECT_EQ(w0[0].name, "grpc");

  // A new server reads them back, keeps them, and assigns others around them.
  auto book = PortBook::Load({30000, 30099}, dir.path());
  ASSERT_TRUE(book.ok()) << book.status().ToString();
  EXPECT_EQ((*book)->assigned(), 5u);
  EXPECT_EQ((*book)->Find("alice", "fmnist", "worker-1", "http"), w1[1].port);
  EXPECT_EQ((*book)->Find("alice", "fmnist", "worker-1", "nope"), std::nullopt);
  auto w2 = (*book)->Assign("alice", "fmnist", "worker-2", kGrpcHttp);
  ASSERT_TRUE(w2.ok());
  EXPECT_FALSE(all.count((*w2)[0].port));
  EXPECT_FALSE(all.count((*w2)[1].port));
}

TEST(PortBook, ReleaseGivesNumbersBackAndAFullRangeIsAClearError) {
  TempDir dir("port-book");
  auto book = PortBook::Load({40000, 40002}, dir.path());
  ASSERT_TRUE(book.ok());
  ASSERT_TRUE((*book)->Assign("u", "a", "x-0", kGrpcHttp).ok());
  ASSERT_TRUE((*book)->Assign("u", "a", "x-1", {{"grpc", 2222}}).ok());
  auto full = (*book)->Assign("u", "a", "x-2", {{"grpc", 2222}});
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("40000-40002"), std::string::npos);
  EXPECT_NE(full.status().message().find("u/a/x-2"), std::string::npos);
  EXPECT_EQ((*book)->assigned(), 3u) << "a failed assignment takes nothing";

  // Flexed down: x-0's two numbers are free again, also for a server started later.
  ASSERT_TRUE((*book)->Release("u", "a", "x-0").ok());
  EXPECT_EQ((*book)->assigned(), 1u);
  auto reloaded = PortBook::Load({40000, 40002}, dir.path());
  ASSERT_TRUE(reloaded.ok());
  EXPECT_EQ((*reloaded)->assigned(), 1u);
  EXPECT_TRUE((*book)->Assign("u", "a", "x-2", kGrpcHttp).ok());

  (*book)->ReleaseAssembly("u", "a");
  EXPECT_EQ((*book)->assigned(), 0u);
}

TEST(PortBook, AFileThatCannotBeReadStopsTheLoadNamingIt) {
  TempDir dir("port-book");
  ASSERT_TRUE(MakeDirectories(dir.path() + "/alice/fmnist").ok());
  std::ofstream(dir.path() + "/alice/fmnist/ports.json") << "{\"worker-0\": {\"grpc\": 99999}}";
  auto book = PortBook::Load({30000, 30099}, dir.path());
  ASSERT_FALSE(book.ok());
  EXPECT_NE(book.status().message().find("alice/fmnist/ports.json"), std::string::npos)
      << book.status().message();
  EXPECT_NE(book.status().message().find("worker-0.grpc"), std::string::npos);
  std::ofstream(dir.path() + "/alice/fmnist/ports.json") << "{trunc";
  EXPECT_FALSE(PortBook::Load({30000, 30099}, dir.path()).ok());
}

TEST(MapCheckPorts, DeclaredNumbersBecomeTheAssignedOnes) {
  const std::vector<NamedPort> assigned = {{"grpc", 20001}, {"http", 20002}};
  spec::ReadinessCheck port;
  port.type = spec::ReadinessType::kPort;
  port.properties["port"] = "2222";
  EXPECT_EQ(MapCheckPorts(port, kGrpcHttp, assigned).properties["port"], "20001");
  port.properties["port"] = "9999";  // not a declared port: as written
  EXPECT_EQ(MapCheckPorts(port, kGrpcHttp, assigned).properties["port"], "9999");

  spec::ReadinessCheck http;
  http.type = spec::ReadinessType::kHttp;
  auto url = [&](const std::string& u) {
    http.properties["url"] = u;
    return MapCheckPorts(http, kGrpcHttp, assigned).properties["url"];
  };
  EXPECT_EQ(url("http://serving-0.a.u.tarn:8501/v1/models/fmnist"),
            "http://serving-0.a.u.tarn:20002/v1/models/fmnist");
  EXPECT_EQ(url("http://h:8501"), "http://h:20002");
  EXPECT_EQ(url("http://h:8501?x=1"), "http://h:20002?x=1");
  EXPECT_EQ(url("http://h/a:8501"), "http://h/a:8501");  // a path, not a port
  EXPECT_EQ(url("http://h:7000/"), "http://h:7000/");
  EXPECT_EQ(url("http://[::1]/x"), "http://[::1]/x");
}

}  // namespace
}  // namespace tarn::backend
