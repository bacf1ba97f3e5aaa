#include "spec/parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec/diagnostic_checks_for_test.h"

namespace tarn::spec {
namespace {

using json = nlohmann::json;

// ---- helpers ---------------------------------------------------------------------------

bool HasError(const ParseResult& r, std::string_view path, std::string_view part) {
  return Has(r, Severity::kError, path, part);
}
bool HasWarning(const ParseResult& r, std::string_view path, std::string_view part) {
  return Has(r, Severity::kWarning, path, part);
}

// A minimal valid assembly; tests change one thing at a time.
json Base() {
  return json::parse(R"({
    "name": "app",
    "version": "1.0",
    "components": [
      {"name": "web", "number_of_containers": 1, "launch_command": "sleep 10",
       "resource": {"cpus": 1, "memory": "256"}}
    ]
  })");
}

ParseResult ParseJson(const json& j, const ParseOptions& o = {}) {
  return ParseAssembly(j.dump(), DocumentFormat::kJson, o);
}

ParseResult ParseYaml(std::string_view text, const ParseOptions& o = {}) {
  return ParseAssembly(text, DocumentFormat::kYaml, o);
}

// The assembly of a parse expected to succeed (a copy: callers often parse a temporary).
// On failure, an assembly with one empty component so that callers can still index it.
Assembly Ok(const ParseResult& r) {
  EXPECT_TRUE(r.ok()) << Dump(r);
  if (r.ok()) return *r.assembly;
  Assembly empty;
  empty.components.emplace_back();
  return empty;
}

// Parses, expects an error at `path` whose message contains `part` (other errors allowed).
void ExpectError(const json& j, std::string_view path, std::string_view part,
                 const ParseOptions& o = {}) {
  ParseResult r = ParseJson(j, o);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(HasError(r, path, part)) << "want [" << path << "] ~ " << part << "\n" << Dump(r);
}

json& Comp(json& j, size_t i = 0) { return j["components"][i]; }

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

// ---- tarn.* properties ------------------------------------------------------------------

json WithProps(json j, const json& props, size_t comp = 0) {
  Comp(j, comp)["configuration"]["properties"] = props;
  return j;
}

const std::string kProps = "components[0].configuration.properties";

TEST(ParserTest, TarnRoleAndPorts) {
  json j = WithProps(Base(), {{"tarn.tf.role", "worker"}, {"tarn.ports", "grpc:2222,http:8501"}});
  const Component c = Ok(ParseJson(j)).components[0];
  EXPECT_EQ(c.tf_role, TfRole::kWorker);
  EXPECT_EQ(c.tf_port, 2222);  // the first of tarn.ports
  EXPECT_EQ(c.ports, (std::vector<NamedPort>{{"grpc", 2222}, {"http", 8501}}));
}

// tarn.ports.public names the ports every local account may connect to (network walls).
TEST(ParserTest, TarnPublicPortsNameDeclaredPorts) {
  json j =
      WithProps(Base(), {{"tarn.ports", "grpc:2222,http:8501"}, {"tarn.ports.public", "http"}});
  EXPECT_EQ(Ok(ParseJson(j)).components[0].public_ports, std::vector<std::string>{"http"});
  ExpectError(WithProps(Base(), {{"tarn.ports", "http:8501"}, {"tarn.ports.public", "htp"}}),
              kProps + "[\"tarn.ports.public\"]",
              "\"htp\" is none of this component's ports (http)");
  ExpectError(WithProps(Base(), {{"tarn.ports.public", "http"}}),
              kProps + "[\"tarn.ports.public\"]", "(it declares none in tarn.ports)");
  ExpectError(WithProps(Base(), {{"tarn.ports", "http:8501"}, {"tarn.ports.public", " , "}}),
              kProps + "[\"tarn.ports.public\"]", "names no port");
}

TEST(ParserTest, TarnTfPortWinsOverFirstPort) {
  json j = WithProps(
      Base(), {{"tarn.tf.role", "ps"}, {"tarn.tf.port", "3333"}, {"tarn.ports", "grpc:2222"}});
  const Component c = Ok(ParseJson(j)).components[0];
  EXPECT_EQ(c.tf_role, TfRole::kPs);
  EXPECT_EQ(c.tf_port, 3333);
}

TEST(ParserTest, TarnRoleValues) {
  for (auto [text, role] :
       {std::pair{"chief", TfRole::kChief}, std::pair{"worker", TfRole::kWorker},
        std::pair{"ps", TfRole::kPs}, std::pair{"evaluator", TfRole::kEvaluator}}) {
    json j = WithProps(Base(), {{"tarn.tf.role", text}, {"tarn.tf.port", 2222}});
    EXPECT_EQ(Ok(ParseJson(j)).components[0].tf_role, role) << text;
  }
}

TEST(ParserTest, TarnBadRole) {
  json j = WithProps(Base(), {{"tarn.tf.role", "master"}, {"tarn.tf.port", "2222"}});
  ExpectOneError(j, kProps + "[\"tarn.tf.role\"]", "\"master\" is not a role");
}

TEST(ParserTest, TarnBadTfPort) {
  for (const char* port : {"0", "70000", "http", "-1", ""}) {
    json j = WithProps(Base(), {{"tarn.tf.port", port}});
    ExpectOneError(j, kProps + "[\"tarn.tf.port\"]", "is not a port number from 1 to 65535");
  }
}

TEST(ParserTest, TarnBadPortList) {
  const std::string path = kProps + "[\"tarn.ports\"]";
  struct Case {
    const char* ports;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"grpc:0", "is not a port number from 1 to 65535"},
           {"grpc:70000", "is not a port number from 1 to 65535"},
           {"grpc:2222,grpc:2223", "port name \"grpc\" is given twice"},
           {"grpc:2222,http:2222", "port 2222 is given twice"},
           {"GRPC:2222", "is not a port name"},
           {"2222:2222", "is not a port name"},
           {"a-very-long-port-name:1", "is not a port name"},
           {"grpc", "is not name:port"},
           {"grpc:2222,", "is not name:port"},
           {"", "is not name:port"},
       }) {
    json j = WithProps(Base(), {{"tarn.ports", c.ports}});
    ExpectOneError(j, path, c.message);
  }
}

TEST(ParserTest, TarnGangOnComponentIsRefused) {
  json j = WithProps(Base(), {{"tarn.gang", "false"}});
  ExpectOneError(j, kProps + "[\"tarn.gang\"]", "belongs in the service's");
}

TEST(ParserTest, TarnGangAtServiceLevel) {
  json j = Base();
  EXPECT_TRUE(Ok(ParseJson(j)).gang);
  j["configuration"]["properties"] = {{"tarn.gang", "false"}};
  const Assembly& a = Ok(ParseJson(j));
  EXPECT_FALSE(a.gang);
  // tarn.gang is not merged into the components' properties.
  EXPECT_EQ(a.components[0].configuration.properties.count("tarn.gang"), 0u);
  j["configuration"]["properties"] = {{"tarn.gang", "true"}};
  EXPECT_TRUE(Ok(ParseJson(j)).gang);
  j["configuration"]["properties"] = {{"tarn.gang", "no"}};
  ExpectOneError(j, "configuration.properties[\"tarn.gang\"]", "must be true or false");
}

TEST(ParserTest, TarnPriorityIsAnIntegerOfTheService) {
  json j = Base();
  EXPECT_EQ(Ok(ParseJson(j)).priority, std::nullopt);
  j["configuration"]["properties"] = {{"tarn.priority", "10"}};
  const Assembly& a = Ok(ParseJson(j));
  EXPECT_EQ(a.priority, 10);
  EXPECT_EQ(a.components[0].configuration.properties.count("tarn.priority"), 0u);
  j["configuration"]["properties"] = {{"tarn.priority", "-3"}};
  EXPECT_EQ(Ok(ParseJson(j)).priority, -3);
  for (const char* bad : {"high", "1.5", "", "2000000000"}) {
    j["configuration"]["properties"] = {{"tarn.priority", bad}};
    ExpectOneError(j, "configuration.properties[\"tarn.priority\"]",
                   "is not a priority (an integer from -1000000000 to 1000000000");
  }
  ExpectOneError(WithProps(Base(), {{"tarn.priority", "1"}}), kProps + "[\"tarn.priority\"]",
                 "belongs in the service's configuration.properties");
}

TEST(ParserTest, StopGraceIsWholeSecondsOfAComponentOrTheService) {
  json j = Base();
  EXPECT_EQ(Ok(ParseJson(j)).components[0].stop_grace_secs, 30) << "Kubernetes' default";
  EXPECT_EQ(Ok(ParseJson(WithProps(Base(), {{"tarn.stop.grace_secs", "0"}})))
                .components[0]
                .stop_grace_secs,
            0);
  j["configuration"]["properties"] = {{"tarn.stop.grace_secs", "120"}};
  EXPECT_EQ(Ok(ParseJson(j)).components[0].stop_grace_secs, 120) << "the service's default";
  for (const char* bad : {"soon", "-1", "1.5", "", "86401"}) {
    ExpectOneError(WithProps(Base(), {{"tarn.stop.grace_secs", bad}}),
                   kProps + "[\"tarn.stop.grace_secs\"]",
                   "is not a grace period (whole seconds from 0 to 86400");
  }
}

TEST(ParserTest, TarnRoleAtServiceLevelIsRefused) {
  json j = Base();
  j["configuration"]["properties"] = {{"tarn.tf.role", "worker"}};
  ExpectError(j, "configuration.properties[\"tarn.tf.role\"]", "belongs on a component");
}

TEST(ParserTest, UnknownTarnKey) {
  json j = WithProps(Base(), {{"tarn.foo", "1"}});
  ParseResult r = ParseJson(j);
  ASSERT_EQ(ErrorCount(r), 1) << Dump(r);
  EXPECT_TRUE(HasError(r, kProps + "[\"tarn.foo\"]", "unknown tarn property;")) << Dump(r);
  EXPECT_EQ(r.diagnostics[0].message.find("did you mean"), std::string::npos) << Dump(r);

  json g = WithProps(Base(), {{"tarn.gangs", "true"}});
  ExpectOneError(g, kProps + "[\"tarn.gangs\"]", "did you mean \"tarn.gang\"?");
}

// "tarn.tf.rol" is one edit from tarn.tf.role and three from tarn.tf.port; the hint must
// name the nearest key.
TEST(ParserTest, UnknownTarnKeySuggestsNearest) {
  json j = WithProps(Base(), {{"tarn.tf.rol", "worker"}});
  ExpectOneError(j, kProps + "[\"tarn.tf.rol\"]", "did you mean \"tarn.tf.role\"?");
}

// ---- yarn.service.* properties ----------------------------------------------------------

TEST(ParserTest, YarnServiceIntProperties) {
  const std::string key = "yarn.service.container-failure.retry.max";
  const std::string path = "configuration.properties[\"" + key + "\"]";
  json j = Base();
  j["configuration"]["properties"] = {{key, "-1"}};
  ParseResult ok = ParseJson(j);
  EXPECT_TRUE(ok.ok()) << Dump(ok);
  EXPECT_TRUE(ok.diagnostics.empty()) << Dump(ok);
  j["configuration"]["properties"] = {{key, "-2"}};
  ExpectOneError(j, path, "\"-2\" must be a whole number >= -1");
  j["configuration"]["properties"] = {{key, "ten"}};
  ExpectOneError(j, path, "must be a whole number >= -1");

  json c = WithProps(Base(), {{"yarn.service.readiness-check-interval.seconds", "0"}});
  ExpectOneError(c, kProps + "[\"yarn.service.readiness-check-interval.seconds\"]",
                 "must be a whole number >= 1");
}

TEST(ParserTest, YarnServiceBoolProperty) {
  const std::string key = "yarn.service.default-readiness-check.enabled";
  json j = WithProps(Base(), {{key, "false"}});
  EXPECT_TRUE(ParseJson(j).ok());
  j = WithProps(Base(), {{key, "yes"}});
  ExpectOneError(j, kProps + "[\"" + key + "\"]", "\"yes\" must be true or false");
}

TEST(ParserTest, YarnServicePropertiesWithoutEffectWarn) {
  json j = Base();
  j["configuration"]["properties"] = {{"yarn.service.am.java.opts", "-Xmx1g"}};
  ParseResult r = ParseJson(j);
  ASSERT_TRUE(r.ok()) << Dump(r);
  EXPECT_EQ(WarningCount(r), 1) << Dump(r);
  EXPECT_TRUE(HasWarning(r, "configuration.properties[\"yarn.service.am.java.opts\"]",
                         "has no effect in tarn"))
      << Dump(r);
}

TEST(ParserTest, UnknownYarnServicePropertyWarns) {
  json j = WithProps(Base(), {{"yarn.service.frobnicate", "1"}});
  ParseResult r = ParseJson(j);
  ASSERT_TRUE(r.ok()) << Dump(r);
  EXPECT_EQ(WarningCount(r), 1) << Dump(r);
  EXPECT_TRUE(HasWarning(r, kProps + "[\"yarn.service.frobnicate\"]",
                         "is not a yarn.service property tarn knows"))
      << Dump(r);

  json typo = WithProps(Base(), {{"yarn.service.queues", "a"}});
  ParseResult t = ParseJson(typo);
  EXPECT_TRUE(
      HasWarning(t, kProps + "[\"yarn.service.queues\"]", "did you mean \"yarn.service.queue\"?"))
      << Dump(t);
}

TEST(ParserTest, OtherPropertiesPassThrough) {
  json j = WithProps(Base(), {{"app.setting", "x"}, {"n", 3}, {"b", true}});
  const Component c = Ok(ParseJson(j)).components[0];
  EXPECT_EQ(c.configuration.properties,
            (std::map<std::string, std::string>{{"app.setting", "x"}, {"b", "true"}, {"n", "3"}}));
}

// ---- env and config files ---------------------------------------------------------------

TEST(ParserTest, EnvNamesAreChecked) {
  json j = Base();
  Comp(j)["configuration"]["env"] = {{"GOOD_1", "x"}};
  EXPECT_EQ(Ok(ParseJson(j)).components[0].configuration.env.at("GOOD_1"), "x");
  Comp(j)["configuration"]["env"] = {{"BAD.NAME", "x"}};
  ExpectOneError(j, "components[0].configuration.env[\"BAD.NAME\"]",
                 "is not an environment variable name");
  Comp(j)["configuration"]["env"] = {{"TF_CONFIG", "{}"}};
  ExpectOneError(j, "components[0].configuration.env.TF_CONFIG", "is set by tarn");
  Comp(j)["configuration"]["env"] = {{"TARN_ANYTHING", "x"}};
  ExpectOneError(j, "components[0].configuration.env.TARN_ANYTHING", "is set by tarn");
  Comp(j)["configuration"]["env"] = {{"CUDA_VISIBLE_DEVICES", "0"}};
  ExpectOneError(j, "components[0].configuration.env.CUDA_VISIBLE_DEVICES", "is set by tarn");
}

json WithFiles(json j, const json& files) {
  Comp(j)["configuration"]["files"] = files;
  return j;
}

const std::string kFile0 = "components[0].configuration.files[0]";

TEST(ParserTest, SrcFileDataUriAcceptedWithoutReadFile) {
  json j = WithFiles(Base(), json::parse(R"([
      {"type": "TEMPLATE", "dest_file": "app.conf", "src_file": "data:;base64,aGVsbG8="},
      {"type": "STATIC", "dest_file": "raw.bin", "src_file": "data:,a%00b"}])"));
  const Component c = Ok(ParseJson(j)).components[0];
  ASSERT_EQ(c.configuration.files.size(), 2u);
  EXPECT_EQ(c.configuration.files[0].src_content, std::optional<std::string>("hello"));
  EXPECT_EQ(c.configuration.files[0].type, ConfigFileType::kTemplate);
  EXPECT_EQ(c.configuration.files[1].src_content,
            std::optional<std::string>(std::string("a\0b", 3)));
  EXPECT_EQ(c.configuration.files[1].type, ConfigFileType::kStatic);
}

TEST(ParserTest, SrcFileBadDataUri) {
  json j = WithFiles(Base(), json::parse(R"([
      {"type": "TEMPLATE", "dest_file": "app.conf", "src_file": "data:;base64,a$b"}])"));
  ExpectOneError(j, kFile0 + ".src_file", "invalid base64");
}

TEST(ParserTest, SrcFileLocalPathRefusedWithoutReadFile) {
  json j = WithFiles(Base(), json::parse(R"([
      {"type": "TEMPLATE", "dest_file": "app.conf", "src_file": "conf/app.tmpl"}])"));
  ExpectOneError(j, kFile0 + ".src_file", "\"conf/app.tmpl\" is a local file");
}

TEST(ParserTest, SrcFileRemoteRefused) {
  json j = WithFiles(Base(), json::parse(R"([
      {"type": "TEMPLATE", "dest_file": "app.conf", "src_file": "hdfs://nn/app.tmpl"}])"));
  ExpectOneError(j, kFile0 + ".src_file", "not supported yet");
}

TEST(ParserTest, SrcFileReadThroughReadFileRelativeToBaseDir) {
  std::vector<std::string> asked;
  ParseOptions o;
  o.base_dir = "/home/u/proj";
  o.read_file = [&asked](const std::string& path) -> StatusOr<std::string> {
    asked.push_back(path);
    if (path == "/home/u/proj/conf/app.tmpl") return std::string("relative contents");
    if (path == "/etc/abs.tmpl") return std::string("absolute contents");
    if (path == "/etc/x.bin") return std::string("file url contents");
    return NotFoundError(path + ": no such file");
  };
  json j = WithFiles(Base(), json::parse(R"([
      {"type": "TEMPLATE", "dest_file": "a.conf", "src_file": "conf/app.tmpl"},
      {"type": "TEMPLATE", "dest_file": "b.conf", "src_file": "/etc/abs.tmpl"},
      {"type": "STATIC", "dest_file": "c.bin", "src_file": "file:///etc/x.bin"}])"));
  ParseResult r = ParseJson(j, o);
  ASSERT_TRUE(r.ok()) << Dump(r);
  const auto& files = r.assembly->components[0].configuration.files;
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].src_content, std::optional<std::string>("relative contents"));
  EXPECT_EQ(files[1].src_content, std::optional<std::string>("absolute contents"));
  EXPECT_EQ(files[2].src_content, std::optional<std::string>("file url contents"));
  EXPECT_EQ(asked, (std::vector<std::string>{"/home/u/proj/conf/app.tmpl", "/etc/abs.tmpl",
                                             "/etc/x.bin"}));
}

TEST(ParserTest, SrcFileReadErrorIsReported) {
  ParseOptions o;
  o.base_dir = "/p";
  o.read_file = [](const std::string& path) -> StatusOr<std::string> {
    return NotFoundError(path + ": no such file");
  };
  json j = WithFiles(Base(), json::parse(R"([
      {"type": "TEMPLATE", "dest_file": "a.conf", "src_file": "missing.tmpl"}])"));
  ExpectOneError(j, kFile0 + ".src_file", "/p/missing.tmpl: no such file", o);
}

TEST(ParserTest, SrcFileTooLarge) {
  ParseOptions o;
  o.read_file = [](const std::string&) -> StatusOr<std::string> {
    return std::string(kMaxInlineFileBytes + 1, 'x');
  };
  json j = WithFiles(Base(), json::parse(R"([
      {"type": "STATIC", "dest_file": "big", "src_file": "/big"}])"));
  ExpectOneError(j, kFile0 + ".src_file", "the limit is 1048576", o);
}

TEST(ParserTest, TemplateNeedsContentOrSrcFile) {
  json j = WithFiles(Base(), json::parse(R"([{"type": "TEMPLATE", "dest_file": "a.conf"}])"));
  ExpectOneError(j, kFile0, "a TEMPLATE file needs src_file or properties.content");

  j = WithFiles(Base(), json::parse(R"([{"type": "TEMPLATE", "dest_file": "a.conf",
      "src_file": "data:,x", "properties": {"content": "y"}}])"));
  ExpectOneError(j, kFile0 + ".properties", "not both");

  j = WithFiles(Base(), json::parse(R"([{"type": "TEMPLATE", "dest_file": "a.conf",
      "properties": {"content": "y", "mode": "0644"}}])"));
  ExpectOneError(j, kFile0 + ".properties.mode", "takes only properties.content");
}

TEST(ParserTest, StaticNeedsSrcFile) {
  json j = WithFiles(Base(), json::parse(R"([{"type": "STATIC", "dest_file": "a.bin"}])"));
  ExpectOneError(j, kFile0, "a STATIC file needs src_file");
}

TEST(ParserTest, KeyValueFileTypes) {
  json j = WithFiles(Base(), json::parse(R"([
      {"type": "PROPERTIES", "dest_file": "a.properties", "properties": {"k": "v"}},
      {"type": "XML", "dest_file": "a.xml", "properties": {"k": "v"}},
      {"type": "HADOOP_XML", "dest_file": "core-site.xml", "properties": {"k": "v"}},
      {"type": "JSON", "dest_file": "a.json", "properties": {"k": "v"}},
      {"type": "YAML", "dest_file": "a.yaml", "properties": {"k": "v"}},
      {"type": "ENV", "dest_file": "a.env", "properties": {"k": "v"}}])"));
  const auto files = Ok(ParseJson(j)).components[0].configuration.files;
  ASSERT_EQ(files.size(), 6u);
  EXPECT_EQ(files[0].type, ConfigFileType::kProperties);
  EXPECT_EQ(files[1].type, ConfigFileType::kXml);
  EXPECT_EQ(files[2].type, ConfigFileType::kHadoopXml);
  EXPECT_EQ(files[3].type, ConfigFileType::kJson);
  EXPECT_EQ(files[4].type, ConfigFileType::kYaml);
  EXPECT_EQ(files[5].type, ConfigFileType::kEnv);

  j = WithFiles(Base(), json::parse(R"([
      {"type": "XML", "dest_file": "a.xml", "src_file": "data:,<a/>"}])"));
  ExpectOneError(j, kFile0 + ".src_file", "with type XML: not supported yet");

  j = WithFiles(Base(), json::parse(R"([{"type": "INI", "dest_file": "a.ini"}])"));
  ExpectOneError(j, kFile0 + ".type", "\"INI\" is not a config file type");
}

TEST(ParserTest, DestFileRules) {
  json j = WithFiles(Base(), json::parse(R"([
      {"type": "TEMPLATE", "dest_file": "a.conf", "properties": {"content": "1"}},
      {"type": "TEMPLATE", "dest_file": "a.conf", "properties": {"content": "2"}}])"));
  ExpectOneError(j, "components[0].configuration.files[1].dest_file",
                 "is already the dest_file of another file");

  j = WithFiles(Base(), json::parse(R"([
      {"type": "TEMPLATE", "dest_file": "../escape", "properties": {"content": "1"}}])"));
  ExpectOneError(j, kFile0 + ".dest_file", "must not contain \"..\"");

  j = WithFiles(Base(), json::parse(R"([
      {"type": "TEMPLATE", "dest_file": "dir/", "properties": {"content": "1"}}])"));
  ExpectOneError(j, kFile0 + ".dest_file", "names a directory");

  j = WithFiles(Base(), json::parse(R"([
      {"type": "TEMPLATE", "dest_file": "a..b/c", "properties": {"content": "1"}}])"));
  EXPECT_TRUE(ParseJson(j).ok());  // ".." only as a whole segment
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
