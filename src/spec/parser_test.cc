#include "spec/parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec/parser_checks_for_test.h"

namespace tarn::spec {
namespace {

// ---- minimal assemblies -----------------------------------------------------------------

TEST(ParserTest, MinimalJson) {
  ParseResult r = ParseJson(Base());
  ASSERT_TRUE(r.ok()) << Dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << Dump(r);
  const Assembly& a = *r.assembly;
  EXPECT_EQ(a.name, "app");
  EXPECT_EQ(a.version, "1.0");
  EXPECT_EQ(a.description, "");
  EXPECT_EQ(a.queue, "");
  EXPECT_FALSE(a.lifetime_seconds.has_value());
  EXPECT_FALSE(a.artifact.has_value());
  EXPECT_EQ(a.desired_state, DesiredState::kStarted);
  EXPECT_TRUE(a.gang);
  ASSERT_EQ(a.components.size(), 1u);
  const Component& c = a.components[0];
  EXPECT_EQ(c.name, "web");
  EXPECT_EQ(c.number_of_containers, 1);
  EXPECT_EQ(c.launch_command, "sleep 10");
  EXPECT_FALSE(c.artifact.has_value());
  EXPECT_EQ(c.resource.cpus, 1);
  EXPECT_EQ(c.resource.memory_mib, 256);
  EXPECT_FALSE(c.resource.gpus.has_value());
  EXPECT_EQ(c.restart_policy, RestartPolicy::kAlways);
  EXPECT_FALSE(c.readiness_check.has_value());
  EXPECT_FALSE(c.run_privileged_container);
  EXPECT_EQ(c.tf_role, TfRole::kNone);
  EXPECT_FALSE(c.tf_port.has_value());
  EXPECT_TRUE(c.ports.empty());
  EXPECT_TRUE(c.dependencies.empty());
}

TEST(ParserTest, MinimalYamlEqualsJson) {
  ParseResult y = ParseYaml(
      "name: app\n"
      "version: \"1.0\"\n"
      "components:\n"
      "  - name: web\n"
      "    number_of_containers: 1\n"
      "    launch_command: sleep 10\n"
      "    resource:\n"
      "      cpus: 1\n"
      "      memory: 256\n");
  ParseResult j = ParseJson(Base());
  ASSERT_TRUE(y.ok()) << Dump(y);
  ASSERT_TRUE(j.ok()) << Dump(j);
  EXPECT_EQ(*y.assembly, *j.assembly);
}

TEST(ParserTest, RequiredFields) {
  ParseResult r = ParseJson(json::parse(R"({"components": [{}]})"));
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(HasError(r, "name", "is required")) << Dump(r);
  EXPECT_TRUE(HasError(r, "version", "is required")) << Dump(r);
  EXPECT_TRUE(HasError(r, "components[0].name", "is required")) << Dump(r);
  EXPECT_TRUE(HasError(r, "components[0].number_of_containers", "is required")) << Dump(r);

  json none = Base();
  none.erase("components");
  ExpectOneError(none, "components", "is required");
  json empty = Base();
  empty["components"] = json::array();
  ExpectOneError(empty, "components", "at least one component");
}

TEST(ParserTest, NotAnObject) {
  ParseResult r = ParseAssembly("[1, 2]", DocumentFormat::kJson, {});
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(HasError(r, "", "expected an object, found a list")) << Dump(r);
}

TEST(ParserTest, WrongTypes) {
  json j = Base();
  Comp(j)["number_of_containers"] = "many";
  Comp(j)["launch_command"] = json::array({"a"});
  ParseResult r = ParseJson(j);
  EXPECT_TRUE(HasError(r, "components[0].number_of_containers", "expected a whole number"))
      << Dump(r);
  EXPECT_TRUE(HasError(r, "components[0].launch_command", "expected a string, found a list"))
      << Dump(r);
}

TEST(ParserTest, ContainerCountRange) {
  json j = Base();
  Comp(j)["number_of_containers"] = 10001;
  ExpectOneError(j, "components[0].number_of_containers", "out of range (0 to 10000)");
  Comp(j)["number_of_containers"] = -1;
  ExpectOneError(j, "components[0].number_of_containers", "out of range");
  Comp(j)["number_of_containers"] = 0;
  EXPECT_EQ(Ok(ParseJson(j)).components[0].number_of_containers, 0);
  Comp(j)["number_of_containers"] = "3";  // a number written as a string, as Jackson accepts
  EXPECT_EQ(Ok(ParseJson(j)).components[0].number_of_containers, 3);
}

// ---- service-level defaults -------------------------------------------------------------

TEST(ParserTest, ServiceDefaultsReachComponentsAndComponentValuesOverridePerField) {
  json j = json::parse(R"({
    "name": "app", "version": "1",
    "artifact": {"id": "img:1", "type": "DOCKER"},
    "resource": {"cpus": 2, "memory": "1Gi"},
    "configuration": {
      "properties": {"p1": "s1", "p2": "s2"},
      "env": {"A": "1", "B": "2"},
      "files": [
        {"type": "TEMPLATE", "dest_file": "a.conf", "properties": {"content": "service a"}},
        {"type": "TEMPLATE", "dest_file": "b.conf", "properties": {"content": "service b"}}
      ]
    },
    "components": [
      {"name": "one", "number_of_containers": 1},
      {"name": "two", "number_of_containers": 1, "launch_command": "run",
       "artifact": {"id": "/opt/app.tgz", "type": "TARBALL"},
       "resource": {"memory": "512"},
       "configuration": {
         "properties": {"p2": "c2", "p3": "c3"},
         "env": {"B": "3", "C": "4"},
         "files": [
           {"type": "TEMPLATE", "dest_file": "a.conf", "properties": {"content": "component a"}}
         ]
       }}
    ]
  })");
  ParseResult r = ParseJson(j);
  ASSERT_TRUE(r.ok()) << Dump(r);
  const Assembly& a = *r.assembly;

  // The service level is kept as written.
  ASSERT_TRUE(a.artifact.has_value());
  EXPECT_EQ(*a.artifact, (Artifact{"img:1", ArtifactType::kDocker, ""}));
  EXPECT_EQ(a.resource.cpus, 2);
  EXPECT_EQ(a.resource.memory_mib, 1024);

  ConfigFile sa{ConfigFileType::kTemplate, "a.conf", std::nullopt, {{"content", "service a"}}};
  ConfigFile sb{ConfigFileType::kTemplate, "b.conf", std::nullopt, {{"content", "service b"}}};
  ConfigFile ca{ConfigFileType::kTemplate, "a.conf", std::nullopt, {{"content", "component a"}}};

  const Component& one = a.components[0];
  ASSERT_TRUE(one.artifact.has_value());
  EXPECT_EQ(*one.artifact, (Artifact{"img:1", ArtifactType::kDocker, ""}));
  EXPECT_EQ(one.launch_command, "");  // allowed: DOCKER
  EXPECT_EQ(one.resource.cpus, 2);
  EXPECT_EQ(one.resource.memory_mib, 1024);
  EXPECT_EQ(one.configuration.properties,
            (std::map<std::string, std::string>{{"p1", "s1"}, {"p2", "s2"}}));
  EXPECT_EQ(one.configuration.env, (std::map<std::string, std::string>{{"A", "1"}, {"B", "2"}}));
  EXPECT_EQ(one.configuration.files, (std::vector<ConfigFile>{sa, sb}));

  const Component& two = a.components[1];
  ASSERT_TRUE(two.artifact.has_value());
  EXPECT_EQ(*two.artifact, (Artifact{"/opt/app.tgz", ArtifactType::kTarball, ""}));
  EXPECT_EQ(two.resource.cpus, 2);          // from the service
  EXPECT_EQ(two.resource.memory_mib, 512);  // its own
  EXPECT_EQ(two.configuration.properties,
            (std::map<std::string, std::string>{{"p1", "s1"}, {"p2", "c2"}, {"p3", "c3"}}));
  EXPECT_EQ(two.configuration.env,
            (std::map<std::string, std::string>{{"A", "1"}, {"B", "3"}, {"C", "4"}}));
  // a.conf of the service is replaced by the component's; b.conf is kept.
  EXPECT_EQ(two.configuration.files, (std::vector<ConfigFile>{sb, ca}));
}

TEST(ParserTest, MissingCpusAndMemoryAreReported) {
  json j = Base();
  Comp(j).erase("resource");
  ParseResult r = ParseJson(j);
  EXPECT_EQ(ErrorCount(r), 2) << Dump(r);
  EXPECT_TRUE(HasError(r, "components[0].resource", "cpus is required")) << Dump(r);
  EXPECT_TRUE(HasError(r, "components[0].resource", "memory is required")) << Dump(r);
}

TEST(ParserTest, MemoryForms) {
  json j = Base();
  Comp(j)["resource"]["memory"] = 4096;
  EXPECT_EQ(Ok(ParseJson(j)).components[0].resource.memory_mib, 4096);
  Comp(j)["resource"]["memory"] = "4Gi";
  EXPECT_EQ(Ok(ParseJson(j)).components[0].resource.memory_mib, 4096);
  Comp(j)["resource"]["memory"] = "1G";
  EXPECT_EQ(Ok(ParseJson(j)).components[0].resource.memory_mib, 954);
  Comp(j)["resource"]["memory"] = "4m";
  ExpectError(j, "components[0].resource.memory", "milli");
  Comp(j)["resource"]["memory"] = "0";
  ExpectError(j, "components[0].resource.memory", "less than 1 MiB");
  Comp(j)["resource"]["memory"] = "17Ti";
  ExpectError(j, "components[0].resource.memory", "more than the 16Ti");
  Comp(j)["resource"]["memory"] = true;
  ExpectError(j, "components[0].resource.memory", "found a boolean");
}

TEST(ParserTest, CpusRange) {
  json j = Base();
  Comp(j)["resource"]["cpus"] = 0;
  ExpectError(j, "components[0].resource.cpus", "out of range (1 to 4096)");
  Comp(j)["resource"]["cpus"] = 4097;
  ExpectError(j, "components[0].resource.cpus", "out of range");
}

// A memory or cpus value the parser refuses is one mistake and must be reported once; the
// validator is documented as "tolerant of components the parse could only partly fill".
TEST(ParserTest, RefusedResourceValueIsReportedOnce) {
  json j = Base();
  Comp(j)["resource"]["memory"] = "4X";
  ExpectOneError(j, "components[0].resource.memory", "is not a memory size");
  j = Base();
  Comp(j)["resource"]["cpus"] = 0;
  ExpectOneError(j, "components[0].resource.cpus", "out of range (1 to 4096)");
}

// ---- restart policy and readiness -------------------------------------------------------

TEST(ParserTest, RestartPolicy) {
  json j = Base();
  EXPECT_EQ(Ok(ParseJson(j)).components[0].restart_policy, RestartPolicy::kAlways);
  Comp(j)["restart_policy"] = "ALWAYS";
  EXPECT_EQ(Ok(ParseJson(j)).components[0].restart_policy, RestartPolicy::kAlways);
  Comp(j)["restart_policy"] = "ON_FAILURE";
  EXPECT_EQ(Ok(ParseJson(j)).components[0].restart_policy, RestartPolicy::kOnFailure);
  Comp(j)["restart_policy"] = "NEVER";
  EXPECT_EQ(Ok(ParseJson(j)).components[0].restart_policy, RestartPolicy::kNever);
  Comp(j)["restart_policy"] = "never";
  ExpectOneError(j, "components[0].restart_policy",
                 "\"never\" is not one of ALWAYS, ON_FAILURE or NEVER");
}

TEST(ParserTest, ReadinessDefault) {
  json j = Base();
  Comp(j)["readiness_check"] = {{"type", "DEFAULT"}};
  const Assembly& a = Ok(ParseJson(j));
  ASSERT_TRUE(a.components[0].readiness_check.has_value());
  EXPECT_EQ(a.components[0].readiness_check->type, ReadinessType::kDefault);
  EXPECT_TRUE(a.components[0].readiness_check->properties.empty());

  Comp(j)["readiness_check"] = {{"type", "DEFAULT"},
                                {"properties", {{"dns.check.enabled", "true"}}}};
  EXPECT_TRUE(ParseJson(j).ok());

  Comp(j)["readiness_check"] = {{"type", "DEFAULT"}, {"properties", {{"timeout", "5"}}}};
  ExpectOneError(j, "components[0].readiness_check.properties.timeout",
                 "is not a property of a DEFAULT readiness check");

  Comp(j)["readiness_check"] = {{"type", "DEFAULT"},
                                {"properties", {{"dns.check.enabled", "maybe"}}}};
  ExpectOneError(j, "components[0].readiness_check.properties[\"dns.check.enabled\"]",
                 "must be true or false");
}

TEST(ParserTest, ReadinessTypeRequiredAndKnown) {
  json j = Base();
  Comp(j)["readiness_check"] = json::object();
  ExpectOneError(j, "components[0].readiness_check.type", "is required");
  Comp(j)["readiness_check"] = {{"type", "TCP"}};
  ExpectOneError(j, "components[0].readiness_check.type", "is not one of DEFAULT, HTTP or PORT");
}

TEST(ParserTest, ReadinessHttp) {
  json j = Base();
  Comp(j)["readiness_check"] = {{"type", "HTTP"},
                                {"properties",
                                 {{"url", "http://${THIS_HOST}:8501/v1/models/m"},
                                  {"timeout", "5000"},
                                  {"min.success", "200"},
                                  {"max.success", "299"}}}};
  ParseResult r = ParseJson(j);
  ASSERT_TRUE(r.ok()) << Dump(r);
  EXPECT_EQ(WarningCount(r), 0) << Dump(r);
  const ReadinessCheck& rc = *r.assembly->components[0].readiness_check;
  EXPECT_EQ(rc.type, ReadinessType::kHttp);
  EXPECT_EQ(rc.properties.at("url"), "http://${THIS_HOST}:8501/v1/models/m");
  EXPECT_EQ(rc.properties.at("min.success"), "200");

  const std::string props = "components[0].readiness_check.properties";
  Comp(j)["readiness_check"]["properties"].erase("url");
  ExpectOneError(j, props + ".url", "is required for an HTTP readiness check");

  Comp(j)["readiness_check"]["properties"]["url"] = "https://x:8501/";
  ExpectOneError(j, props + ".url", "must start with http://");

  Comp(j)["readiness_check"]["properties"]["url"] = "http://x:8501/";
  Comp(j)["readiness_check"]["properties"]["min.success"] = "300";
  Comp(j)["readiness_check"]["properties"]["max.success"] = "200";
  ExpectOneError(j, props + "[\"min.success\"]", "is above max.success");

  Comp(j)["readiness_check"]["properties"]["min.success"] = "99";
  ExpectOneError(j, props + "[\"min.success\"]", "must be a whole number from 100 to 599");

  Comp(j)["readiness_check"]["properties"]["min.success"] = "200";
  Comp(j)["readiness_check"]["properties"]["timeout"] = "0";
  ExpectOneError(j, props + ".timeout", "must be a whole number from 1 to 3600000");

  Comp(j)["readiness_check"]["properties"]["timeout"] = "10";
  Comp(j)["readiness_check"]["properties"]["port"] = "80";
  ExpectOneError(j, props + ".port", "is not a property of a HTTP readiness check");
}

TEST(ParserTest, ReadinessPort) {
  json j = Base();
  const std::string props = "components[0].readiness_check.properties";
  Comp(j)["readiness_check"] = {{"type", "PORT"}, {"properties", {{"port", "8080"}}}};
  const Assembly& a = Ok(ParseJson(j));
  EXPECT_EQ(a.components[0].readiness_check->type, ReadinessType::kPort);
  EXPECT_EQ(a.components[0].readiness_check->properties.at("port"), "8080");

  Comp(j)["readiness_check"] = {{"type", "PORT"}, {"properties", {{"port", 8080}}}};
  EXPECT_TRUE(ParseJson(j).ok());  // a number is turned into its text

  Comp(j)["readiness_check"] = {{"type", "PORT"}};
  ExpectOneError(j, props + ".port", "is required for a PORT readiness check");
  Comp(j)["readiness_check"] = {{"type", "PORT"}, {"properties", {{"port", "70000"}}}};
  ExpectOneError(j, props + ".port", "from 1 to 65535");
  Comp(j)["readiness_check"] = {{"type", "PORT"}, {"properties", {{"port", "0"}}}};
  ExpectOneError(j, props + ".port", "from 1 to 65535");
  Comp(j)["readiness_check"] = {{"type", "PORT"},
                                {"properties", {{"port", "80"}, {"url", "http://x/"}}}};
  ExpectOneError(j, props + ".url", "is not a property of a PORT readiness check");
}

// ---- fields tarn refuses ----------------------------------------------------------------

TEST(ParserTest, ResourceProfileNotSupported) {
  json j = Base();
  Comp(j)["resource"]["profile"] = "small";
  ExpectOneError(j, "components[0].resource.profile", "not supported yet");
}

TEST(ParserTest, ServiceArtifactNotSupported) {
  json j = Base();
  Comp(j)["artifact"] = {{"id", "other-service"}, {"type", "SERVICE"}};
  ExpectOneError(j, "components[0].artifact.type", "SERVICE: not supported yet");
}

TEST(ParserTest, KerberosPrincipalNotSupported) {
  json j = Base();
  j["kerberos_principal"] = {{"principal_name", "app/_HOST@EXAMPLE.COM"}};
  ExpectOneError(j, "kerberos_principal", "not supported yet");
}

TEST(ParserTest, DockerClientConfigNotSupported) {
  json j = Base();
  j["docker_client_config"] = "hdfs:///user/app/config.json";
  ExpectOneError(j, "docker_client_config", "not supported yet");
}

TEST(ParserTest, DecommissionedInstancesNotSupported) {
  json j = Base();
  Comp(j)["decommissioned_instances"] = json::array({"web-0"});
  ExpectOneError(j, "components[0].decommissioned_instances", "not supported yet");
}

TEST(ParserTest, ServiceDependenciesNotSupported) {
  json j = Base();
  j["dependencies"] = json::array();
  EXPECT_TRUE(ParseJson(j).ok());  // an empty list is what YARN writes back
  j["dependencies"] = json::array({"other"});
  ExpectOneError(j, "dependencies", "not supported yet");
}

TEST(ParserTest, PlacementPolicyNotSupported) {
  json j = Base();
  Comp(j)["placement_policy"] = json::parse(R"({"constraints": [
      {"type": "ANTI_AFFINITY", "scope": "NODE", "target_tags": ["web"]}]})");
  ExpectOneError(j, "components[0].placement_policy", "not supported yet");
}

TEST(ParserTest, PlacementPolicyMistakesAreNamedToo) {
  json j = Base();
  Comp(j)["placement_policy"] = json::parse(R"({"constraints": [
      {"type": "NEAR", "scope": "NODE", "min_cardinality": 3, "max_cardinality": 1}]})");
  ParseResult r = ParseJson(j);
  EXPECT_TRUE(HasError(r, "components[0].placement_policy", "not supported yet")) << Dump(r);
  EXPECT_TRUE(HasError(r, "components[0].placement_policy.constraints[0].type",
                       "is not one of AFFINITY, ANTI_AFFINITY or AFFINITY_WITH_CARDINALITY"))
      << Dump(r);
  EXPECT_TRUE(HasError(r, "components[0].placement_policy.constraints[0].min_cardinality",
                       "is above max_cardinality"))
      << Dump(r);
}

TEST(ParserTest, ArchiveFileNotSupported) {
  json j = Base();
  Comp(j)["configuration"] = json::parse(R"({"files": [
      {"type": "ARCHIVE", "dest_file": "lib", "src_file": "data:,x"}]})");
  ExpectOneError(j, "components[0].configuration.files[0].type", "ARCHIVE: not supported yet");
}

TEST(ParserTest, ReadinessArtifactNotSupported) {
  json j = Base();
  Comp(j)["readiness_check"] = {{"type", "DEFAULT"}, {"artifact", {{"id", "checker:1"}}}};
  ExpectOneError(j, "components[0].readiness_check.artifact", "not supported yet");
}

TEST(ParserTest, RemoteTarballNotSupported) {
  json j = Base();
  Comp(j)["artifact"] = {{"id", "hdfs://nn/app.tgz"}, {"type", "TARBALL"}};
  ExpectOneError(j, "components[0].artifact.id", "not supported yet");
}

TEST(ParserTest, OutputOnlyFieldsAreRefused) {
  const char* kMsg = "is set by tarn in responses";
  for (const char* key : {"id", "launch_time", "number_of_running_containers"}) {
    json j = Base();
    j[key] = key == std::string("id") ? json("application_1_0001") : json(5);
    ExpectOneError(j, key, kMsg);
  }
  json c = Base();
  Comp(c)["containers"] = json::array({{{"id", "container_1"}}});
  ExpectOneError(c, "components[0].containers", kMsg);
  json s = Base();
  Comp(s)["state"] = "STABLE";
  ExpectOneError(s, "components[0].state", kMsg);
}

// ---- state, lifetime, queue -------------------------------------------------------------

TEST(ParserTest, ServiceState) {
  json j = Base();
  j["state"] = "STOPPED";
  EXPECT_EQ(Ok(ParseJson(j)).desired_state, DesiredState::kStopped);
  j["state"] = "STARTED";
  EXPECT_EQ(Ok(ParseJson(j)).desired_state, DesiredState::kStarted);
  for (const char* state : {"STABLE", "FLEX", "UPGRADING", "ACCEPTED", "stopped"}) {
    j["state"] = state;
    ExpectOneError(j, "state", "cannot be requested");
  }
}

TEST(ParserTest, LifetimeAsStringOrNumber) {
  json j = Base();
  j["lifetime"] = "3600";
  EXPECT_EQ(Ok(ParseJson(j)).lifetime_seconds, 3600);
  j["lifetime"] = 3600;
  EXPECT_EQ(Ok(ParseJson(j)).lifetime_seconds, 3600);
  j["lifetime"] = -1;  // YARN's "unlimited"
  EXPECT_FALSE(Ok(ParseJson(j)).lifetime_seconds.has_value());
  j["lifetime"] = 0;
  ExpectOneError(j, "lifetime", "0 would end the assembly at once");
  j["lifetime"] = "an hour";
  ExpectOneError(j, "lifetime", "expected a whole number");
  j["lifetime"] = int64_t{10} * 365 * 24 * 3600 + 1;
  ExpectOneError(j, "lifetime", "out of range");
}

TEST(ParserTest, LifetimeInYaml) {
  ParseResult r = ParseYaml(
      "name: app\nversion: '1'\nlifetime: \"3600\"\ncomponents:\n"
      "  - {name: web, number_of_containers: 1, launch_command: x, "
      "resource: {cpus: 1, memory: 256}}\n");
  EXPECT_EQ(Ok(r).lifetime_seconds, 3600);
}

TEST(ParserTest, Queue) {
  json j = Base();
  j["queue"] = "root.ml-team_1";
  EXPECT_EQ(Ok(ParseJson(j)).queue, "root.ml-team_1");
  j["queue"] = "ml team";
  ExpectOneError(j, "queue", "is not a queue name");
}

// ---- unknown fields ---------------------------------------------------------------------

TEST(ParserTest, UnknownFieldSuggestsNearestName) {
  json j = Base();
  j["descripton"] = "x";
  ExpectOneError(j, "descripton", "unknown field (did you mean \"description\"?)");

  json c = Base();
  Comp(c)["restart_polcy"] = "NEVER";
  ExpectOneError(c, "components[0].restart_polcy",
                 "unknown field (did you mean \"restart_policy\"?)");

  json r = Base();
  Comp(r)["resource"]["cpu"] = 1;
  ExpectOneError(r, "components[0].resource.cpu", "did you mean \"cpus\"?");
}

TEST(ParserTest, UnknownFieldFarFromAnyNameHasNoSuggestion) {
  json j = Base();
  j["completely_different"] = 1;
  ParseResult r = ParseJson(j);
  ASSERT_EQ(ErrorCount(r), 1) << Dump(r);
  EXPECT_EQ(r.diagnostics[0].path, "completely_different");
  EXPECT_EQ(r.diagnostics[0].message, "unknown field");
}

// ---- GPUs -------------------------------------------------------------------------------

const std::string kGpu = "components[0].resource.additional[\"yarn.io/gpu\"]";

TEST(ParserTest, GpuAdditionalResource) {
  json j = Base();
  Comp(j)["resource"]["additional"] = {{"yarn.io/gpu", {{"value", 2}, {"unit", ""}}}};
  EXPECT_EQ(Ok(ParseJson(j)).components[0].resource.gpus, 2);
  Comp(j)["resource"]["additional"] = {{"yarn.io/gpu", {{"value", 1}}}};
  EXPECT_EQ(Ok(ParseJson(j)).components[0].resource.gpus, 1);

  Comp(j)["resource"]["additional"] = {{"yarn.io/gpu", {{"value", 1}, {"unit", "Gi"}}}};
  ExpectOneError(j, kGpu + ".unit", "GPUs are counted; the unit must be empty");
  Comp(j)["resource"]["additional"] = {{"yarn.io/gpu", {{"value", 65}}}};
  ExpectOneError(j, kGpu + ".value", "out of range (0 to 64)");
  Comp(j)["resource"]["additional"] = {{"yarn.io/gpu", json::object()}};
  ExpectOneError(j, kGpu + ".value", "is required");
  Comp(j)["resource"]["additional"] = {{"yarn.io/fpga", {{"value", 1}}}};
  ExpectOneError(j, "components[0].resource.additional[\"yarn.io/fpga\"]", "not supported yet");
}

TEST(ParserTest, GpusDefaultFromService) {
  json j = Base();
  j["resource"] = {{"additional", {{"yarn.io/gpu", {{"value", 4}}}}}};
  EXPECT_EQ(Ok(ParseJson(j)).components[0].resource.gpus, 4);
  Comp(j)["resource"]["additional"] = {{"yarn.io/gpu", {{"value", 0}}}};
  EXPECT_EQ(Ok(ParseJson(j)).components[0].resource.gpus, 0);
}

// ---- artifacts --------------------------------------------------------------------------

TEST(ParserTest, Artifacts) {
  json j = Base();
  Comp(j)["artifact"] = {{"id", "tensorflow/serving:2.15"}};  // type defaults to DOCKER
  EXPECT_EQ(Ok(ParseJson(j)).components[0].artifact,
            (Artifact{"tensorflow/serving:2.15", ArtifactType::kDocker, ""}));
  Comp(j)["artifact"] = {{"id", "bad image"}, {"type", "DOCKER"}};
  ExpectOneError(j, "components[0].artifact.id", "is not an image reference");
  Comp(j)["artifact"] = {{"type", "DOCKER"}};
  ExpectOneError(j, "components[0].artifact.id", "is required");
  Comp(j)["artifact"] = {{"id", "x"}, {"type", "RPM"}};
  ExpectOneError(j, "components[0].artifact.type", "is not one of DOCKER, TARBALL or SERVICE");
}

TEST(ParserTest, TarballPaths) {
  json j = Base();
  Comp(j)["artifact"] = {{"id", "file:///opt/app.tgz"}, {"type", "TARBALL"}};
  EXPECT_EQ(Ok(ParseJson(j)).components[0].artifact->id, "/opt/app.tgz");
  Comp(j)["artifact"] = {{"id", "app.tgz"}, {"type", "TARBALL"}};
  ExpectOneError(j, "components[0].artifact.id", "must be an absolute path");

  ParseOptions o;
  o.base_dir = "/home/u/proj";
  o.read_file = [](const std::string&) -> StatusOr<std::string> { return std::string(); };
  ParseResult r = ParseJson(j, o);
  ASSERT_TRUE(r.ok()) << Dump(r);
  EXPECT_EQ(r.assembly->components[0].artifact->id, "/home/u/proj/app.tgz");
}

// ---- everything at once -----------------------------------------------------------------

TEST(ParserTest, AllErrorsAreReportedAtOnce) {
  json j = Base();
  j["descripton"] = "typo";                        // 1: unknown field
  Comp(j)["restart_policy"] = "SOMETIMES";         // 2: bad enum
  Comp(j)["readiness_check"] = {{"type", "TCP"}};  // 3: another bad enum, elsewhere
  ParseResult r = ParseJson(j);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(ErrorCount(r), 3) << Dump(r);
  EXPECT_TRUE(HasError(r, "descripton", "unknown field")) << Dump(r);
  EXPECT_TRUE(HasError(r, "components[0].restart_policy", "is not one of")) << Dump(r);
  EXPECT_TRUE(HasError(r, "components[0].readiness_check.type", "is not one of")) << Dump(r);
}

TEST(ParserTest, AllErrorsAreReportedAtOnceInYaml) {
  ParseResult r = ParseYaml(
      "name: app\n"
      "version: '1'\n"
      "state: FLEX\n"
      "components:\n"
      "  - name: web\n"
      "    number_of_containers: 1\n"
      "    launch_command: x\n"
      "    resource: {cpus: 1, memory: 1Gi}\n"
      "    restart_policy: SOMETIMES\n"
      "  - name: db\n"
      "    number_of_containers: 1\n"
      "    launch_command: x\n"
      "    resource: {cpus: 1, memory: 1Gi}\n"
      "    configuration: {properties: {tarn.tf.port: '99999'}}\n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(ErrorCount(r), 3) << Dump(r);
  EXPECT_TRUE(HasError(r, "state", "cannot be requested")) << Dump(r);
  EXPECT_TRUE(HasError(r, "components[0].restart_policy", "is not one of")) << Dump(r);
  EXPECT_TRUE(HasError(r, "components[1].configuration.properties[\"tarn.tf.port\"]",
                       "is not a port number"))
      << Dump(r);
}

TEST(ParserTest, WarningsDoNotStopTheAssembly) {
  json j = Base();
  Comp(j)["launch_command"] = "echo ${NOT_A_TARN_VARIABLE}";
  ParseResult r = ParseJson(j);
  ASSERT_TRUE(r.ok()) << Dump(r);
  EXPECT_EQ(WarningCount(r), 1) << Dump(r);
  EXPECT_EQ(r.assembly->components[0].launch_command, "echo ${NOT_A_TARN_VARIABLE}");
}

TEST(ParserTest, SyntaxErrorGivesNoAssembly) {
  ParseResult r = ParseAssembly("{\"name\": ", DocumentFormat::kJson, {});
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(ErrorCount(r), 1) << Dump(r);
  EXPECT_NE(r.diagnostics[0].message.find("not valid JSON"), std::string::npos);
}

TEST(ParserTest, ParseAssemblyJsonTakesAValue) {
  ParseResult r = ParseAssemblyJson(Base(), {});
  ASSERT_TRUE(r.ok()) << Dump(r);
  EXPECT_EQ(r.assembly->components[0].name, "web");
}

}  // namespace
}  // namespace tarn::spec
