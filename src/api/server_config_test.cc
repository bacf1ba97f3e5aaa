#include "api/server_config.h"

#include <gtest/gtest.h>

namespace tarn::api {
namespace {

using Mode = backend::NameResolution::Mode;

TEST(ServerConfigTest, DefaultsWhenEmpty) {
  auto c = ParseServerConfig("{}", "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->domain, "tarn");
  EXPECT_EQ(c->address_range, "127.42.0.0/16");
  EXPECT_FALSE(c->container_names.has_value());  // auto
  EXPECT_FALSE(c->dns_upstream.has_value());     // the machine's nameservers
  EXPECT_EQ(c->reservation_after, std::chrono::seconds(60));
  auto s = ParseServerConfig(R"({"scheduler": {"reservation_after_secs": 0}})", "config.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->reservation_after, std::chrono::seconds(0));
  EXPECT_TRUE(c->preemption);
  auto off = ParseServerConfig(R"({"scheduler": {"preemption": false}})", "config.json");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->preemption);
  EXPECT_FALSE(c->cgroup_favordynmods);  // the machine's kernel as it is
  auto dyn = ParseServerConfig(R"({"cgroup_favordynmods": true})", "config.json");
  ASSERT_TRUE(dyn.ok()) << dyn.status().ToString();
  EXPECT_TRUE(dyn->cgroup_favordynmods);
}

TEST(ServerConfigTest, ContainerNamesAndUpstreams) {
  auto c = ParseServerConfig(
      R"({"container_names": "hosts", "dns_upstream": ["10.0.0.2", "[::1]:5353"]})", "c.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->container_names, Mode::kHosts);
  EXPECT_EQ(c->dns_upstream, (std::vector<std::string>{"10.0.0.2", "[::1]:5353"}));
  c = ParseServerConfig(R"({"container_names": "auto", "dns_upstream": []})", "c.json");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->container_names.has_value());
  ASSERT_TRUE(c->dns_upstream.has_value());
  EXPECT_TRUE(c->dns_upstream->empty());
  EXPECT_EQ(ParseServerConfig(R"({"container_names": "resolv-conf"})", "c")->container_names,
            Mode::kResolvConf);
  EXPECT_EQ(ParseServerConfig(R"({"container_names": "none"})", "c")->container_names, Mode::kNone);
}

TEST(ServerConfigTest, SlurmBackend) {
  auto c = ParseServerConfig("{}", "c.json");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->backend.type, BackendConfig::Type::kLocal);
  c = ParseServerConfig(R"({"backend": {"type": "slurm", "shared_dir": "/shared/tarn",
      "slurm_conf": "/etc/slurm/slurm.conf", "partition": "gpu", "account": "ml", "qos": "high",
      "sbatch_options": ["--time=60"], "poll_interval_ms": 250,
      "priority_qos": [{"priority": 10, "qos": "urgent"}, {"priority": -5, "qos": "scavenger"}]}})",
                        "c.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->backend.type, BackendConfig::Type::kSlurm);
  EXPECT_EQ(c->backend.shared_dir, "/shared/tarn");
  EXPECT_EQ(c->backend.slurm_conf, "/etc/slurm/slurm.conf");
  EXPECT_EQ(c->backend.partition, "gpu");
  EXPECT_EQ(c->backend.account, "ml");
  EXPECT_EQ(c->backend.qos, "high");
  EXPECT_EQ(c->backend.sbatch_options, std::vector<std::string>{"--time=60"});
  EXPECT_EQ(c->backend.poll_interval.count(), 250);
  EXPECT_EQ(c->backend.priority_qos,
            (std::vector<backend::PriorityQos>{{10, "urgent"}, {-5, "scavenger"}}));
}

TEST(ServerConfigTest, BadValuesNameTheKey) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& k : {
           Case{R"({"container_names": "dns"})",
                "c.json: container_names: expected \"auto\", \"resolv-conf\", \"hosts\" or "
                "\"none\", got \"dns\""},
           Case{R"({"container_names": 1})", "c.json: container_names: expected"},
           Case{R"({"dns_upstream": "10.0.0.2"})", "c.json: dns_upstream: expected a list"},
           Case{R"({"dns_upstream": ["10.0.0.2", "dns.google"]})",
                "c.json: dns_upstream[1]: DNS upstream \"dns.google\": expected a numeric"},
           Case{R"({"dns_upstream": [53]})", "c.json: dns_upstream[0]: expected"},
           Case{R"({"dns": {}})", "c.json: dns: unknown key"},
           Case{R"({"backend": {"type": "yarn"}})",
                "c.json: backend.type: expected \"local\" or \"slurm\", got \"yarn\""},
           Case{R"({"backend": {"type": "slurm"}})",
                "c.json: backend.shared_dir: required for the slurm backend"},
           Case{R"({"backend": {"type": "slurm", "shared_dir": "rel"}})",
                "c.json: backend.shared_dir: expected an absolute path"},
           Case{R"({"backend": {"type": "slurm", "shared_dir": "/s", "partiton": "x"}})",
                "c.json: backend.partiton: unknown field"},
           Case{R"({"backend": {"type": "slurm", "shared_dir": "/s", "sbatch_options": ["x"]}})",
                "c.json: backend.sbatch_options[0]: expected an option"},
           Case{R"({"backend": {"type": "slurm", "shared_dir": "/s", "priority_qos": {}}})",
                "c.json: backend.priority_qos: expected a list"},
           Case{R"({"backend": {"type": "slurm", "shared_dir": "/s",
                  "priority_qos": [{"priority": 1.5, "qos": "a"}]}})",
                "c.json: backend.priority_qos[0].priority: expected an integer from"},
           Case{R"({"backend": {"type": "slurm", "shared_dir": "/s",
                  "priority_qos": [{"priority": 1}]}})",
                "c.json: backend.priority_qos[0].qos: required"},
           Case{R"({"backend": {"type": "slurm", "shared_dir": "/s",
                  "priority_qos": [{"priority": 1, "qos": "a,b"}]}})",
                "c.json: backend.priority_qos[0].qos: expected a QOS name"},
           Case{R"({"backend": {"type": "slurm", "shared_dir": "/s",
                  "priority_qos": [{"priority": 1, "qos": "a"}, {"priority": 1, "qos": "b"}]}})",
                "c.json: backend.priority_qos[1].priority: priority 1 is listed twice"},
           Case{R"({"backend": {"type": "slurm", "shared_dir": "/s",
                  "priority_qos": [{"priority": 1, "qos": "a", "preempt": true}]}})",
                "c.json: backend.priority_qos[0].preempt: unknown field"},
           Case{R"({"backend": {"type": "local", "shared_dir": "/s"}})",
                "c.json: backend.shared_dir: unknown field"},
           Case{R"({"http": []})", "c.json: http: expected an object"},
           Case{R"({"http": {"max_connections": 0}})", "c.json: http.max_connections:"},
           Case{R"({"http": {"header_timeout_ms": 5}})", "c.json: http.header_timeout_ms:"},
           Case{R"({"http": {"max_conections": 10}})", "c.json: http.max_conections: unknown"},
           Case{R"({"scheduler": 60})", "c.json: scheduler: expected {\"reservation_after_secs\""},
           Case{R"({"cgroup_favordynmods": "yes"})",
                "c.json: cgroup_favordynmods: expected true or false, got \"yes\""},
           Case{R"({"scheduler": {"preemption": "no"}})",
                "c.json: scheduler.preemption: expected true or false, got \"no\""},
           Case{R"({"scheduler": {"reservation_after_secs": -1}})",
                "c.json: scheduler.reservation_after_secs: expected a whole number >= 0"},
           Case{R"({"scheduler": {"reservation_after_secs": 40000000}})",
                "c.json: scheduler.reservation_after_secs: at most 31536000"},
           Case{R"({"scheduler": {"reserve_after": 5}})",
                "c.json: scheduler.reserve_after: unknown field"},
       }) {
    auto c = ParseServerConfig(k.text, "c.json");
    ASSERT_FALSE(c.ok()) << k.text;
    EXPECT_EQ(c.status().message().rfind(k.error, 0), 0u) << c.status().message();
  }
}

TEST(ServerConfigTest, HttpLimitsKeepTheDefaultsTheyDoNotName) {
  auto c = ParseServerConfig(R"({"http": {"max_connections": 5000, "header_timeout_ms": 2000}})",
                             "c.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->http.max_connections, 5000u);
  EXPECT_EQ(c->http.header_timeout, std::chrono::milliseconds(2000));
  EXPECT_FALSE(c->http.body_timeout.has_value());
  EXPECT_FALSE(c->http.threads.has_value());
}

}  // namespace
}  // namespace tarn::api
