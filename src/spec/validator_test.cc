// The cross-field rules of validator.cc, exercised through ParseAssembly as users meet them.
#include "spec/validator.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec/diagnostic_checks_for_test.h"
#include "spec/parser.h"

namespace tarn::spec {
namespace {

using json = nlohmann::json;

json Component(std::string name, int containers = 1) {
  return {{"name", std::move(name)},
          {"number_of_containers", containers},
          {"launch_command", "run"},
          {"resource", {{"cpus", 1}, {"memory", "256"}}}};
}

json Assembly(std::vector<json> components, std::string name = "app") {
  return {{"name", std::move(name)}, {"version", "1"}, {"components", std::move(components)}};
}

ParseResult Parse(const json& j, const ParseOptions& o = {}) {
  return ParseAssembly(j.dump(), DocumentFormat::kJson, o);
}

void ExpectOk(const json& j, const ParseOptions& o = {}) {
  ParseResult r = Parse(j, o);
  EXPECT_TRUE(r.ok()) << Dump(r);
  EXPECT_EQ(ErrorCount(r), 0) << Dump(r);
}

// ---- names ------------------------------------------------------------------------------

TEST(ValidatorTest, ComponentNameMustBeDnsLabel) {
  ExpectOneError(Assembly({Component("Web")}), "components[0].name", "\"Web\" is not a DNS label");
  ExpectOneError(Assembly({Component("web_server")}), "components[0].name", "is not a DNS label");
  ExpectOneError(Assembly({Component("-web")}), "components[0].name", "is not a DNS label");
  ExpectOk(Assembly({Component("web-server-2")}));
}

TEST(ValidatorTest, AssemblyNameMustBeDnsLabel) {
  ExpectOneError(Assembly({Component("web")}, "My_App"), "name", "\"My_App\" is not a DNS label");
}

TEST(ValidatorTest, DuplicateComponentNames) {
  ExpectOneError(Assembly({Component("web"), Component("db"), Component("web")}),
                 "components[2].name", "\"web\" is already the name of components[0]");
}

TEST(ValidatorTest, InstanceNameLimit) {
  // 61 characters + "-9" = 63: the longest instance label DNS allows.
  ExpectOk(Assembly({Component(std::string(61, 'x'), 10)}));
  // 62 + "-9" = 64.
  // (The quoted name is shortened after 60 characters.)
  ExpectOneError(Assembly({Component(std::string(62, 'x'), 10)}), "components[0].name",
                 "the instance name \"" + std::string(60, 'x') + "...\" is longer than DNS's 63");
  // 62 + "-0" = 64 as well: one instance is already too long.
  ExpectOneError(Assembly({Component(std::string(62, 'x'), 1)}), "components[0].name",
                 "longer than DNS's 63");
  // 60 characters + "-99" = 63 (100 instances).
  ExpectOk(Assembly({Component(std::string(60, 'x'), 100)}));
  ExpectOneError(Assembly({Component(std::string(60, 'x'), 101)}), "components[0].name",
                 "is longer than DNS's 63 characters; shorten the component name");
  // No instances: no instance name to check.
  ExpectOk(Assembly({Component(std::string(63, 'x'), 0)}));
}

TEST(ValidatorTest, FullHostNameLimit) {
  // w-0 . <63> . <63> . <63>.<57>  = 3 + 1 + 63 + 1 + 63 + 1 + 121 = 253
  ParseOptions o;
  o.user = std::string(63, 'u');
  o.domain = std::string(63, 'd') + "." + std::string(57, 'e');
  const std::string name(63, 'a');
  ExpectOk(Assembly({Component("w")}, name), o);
  o.domain = std::string(63, 'd') + "." + std::string(58, 'e');  // 254
  ExpectOneError(Assembly({Component("w")}, name), "components[0].name",
                 "is 254 characters, longer than DNS's 253", o);
}

TEST(ValidatorTest, UserAndDomainMustFitDns) {
  ParseOptions o;
  o.user = "Bob_dev";
  ExpectOneError(Assembly({Component("web")}), "", "the user name \"Bob_dev\"", o);
  o.user = "bob-dev";
  ExpectOk(Assembly({Component("web")}), o);
  o.domain = "bad..domain";
  ExpectOneError(Assembly({Component("web")}), "", "the domain \"bad..domain\"", o);
}

// ---- dependencies -----------------------------------------------------------------------

json WithDeps(json c, std::vector<std::string> deps) {
  c["dependencies"] = std::move(deps);
  return c;
}

TEST(ValidatorTest, DependencyOnSelf) {
  ExpectOneError(Assembly({WithDeps(Component("a"), {"a"})}), "components[0].dependencies[0]",
                 "cannot depend on itself");
}

TEST(ValidatorTest, DependencyOnUnknownComponent) {
  ExpectOneError(Assembly({Component("a"), WithDeps(Component("b"), {"a", "zzz"})}),
                 "components[1].dependencies[1]", "\"zzz\" is not a component of this assembly");
}

TEST(ValidatorTest, DependencyListedTwice) {
  ExpectOneError(Assembly({Component("a"), WithDeps(Component("b"), {"a", "a"})}),
                 "components[1].dependencies[1]", "\"a\" is listed twice");
}

TEST(ValidatorTest, ValidDependencies) {
  ExpectOk(Assembly(
      {Component("a"), WithDeps(Component("b"), {"a"}), WithDeps(Component("c"), {"a", "b"})}));
  // Order of declaration does not matter.
  ExpectOk(
      Assembly({WithDeps(Component("c"), {"b"}), WithDeps(Component("b"), {"a"}), Component("a")}));
}

TEST(ValidatorTest, CycleIsReportedOnceWithItsPath) {
  ParseResult r = Parse(Assembly({WithDeps(Component("a"), {"b"}), WithDeps(Component("b"), {"c"}),
                                  WithDeps(Component("c"), {"a"})}));
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(ErrorCount(r), 1) << Dump(r);
  EXPECT_TRUE(Has(r, Severity::kError, "components[0].dependencies",
                  "dependencies form a cycle: a -> b -> c -> a"))
      << Dump(r);
}

TEST(ValidatorTest, TwoCyclesAreTwoErrors) {
  ParseResult r = Parse(Assembly({WithDeps(Component("a"), {"b"}), WithDeps(Component("b"), {"a"}),
                                  WithDeps(Component("c"), {"d"}), WithDeps(Component("d"), {"c"}),
                                  WithDeps(Component("e"), {"a", "c"})}));
  ASSERT_EQ(ErrorCount(r), 2) << Dump(r);
  EXPECT_TRUE(Has(r, Severity::kError, "components[0].dependencies", "a -> b -> a")) << Dump(r);
  EXPECT_TRUE(Has(r, Severity::kError, "components[2].dependencies", "c -> d -> c")) << Dump(r);
}

// ---- launch command and config files ----------------------------------------------------

TEST(ValidatorTest, LaunchCommandRequiredUnlessDocker) {
  json c = Component("web");
  c.erase("launch_command");
  ExpectOneError(Assembly({c}), "components[0].launch_command",
                 "is required unless the artifact is a DOCKER image");

  json tarball = c;
  tarball["artifact"] = {{"id", "/opt/app.tgz"}, {"type", "TARBALL"}};
  ExpectOneError(Assembly({tarball}), "components[0].launch_command", "is required");

  json docker = c;
  docker["artifact"] = {{"id", "nginx:1.25"}, {"type", "DOCKER"}};
  ExpectOk(Assembly({docker}));

  // A service-level DOCKER artifact counts too.
  json a = Assembly({c});
  a["artifact"] = {{"id", "nginx:1.25"}};
  ExpectOk(a);
}

json WithFile(json c, const std::string& dest) {
  c["configuration"]["files"] = json::array(
      {{{"type", "TEMPLATE"}, {"dest_file", dest}, {"properties", {{"content", "x"}}}}});
  return c;
}

TEST(ValidatorTest, AbsoluteDestFileNeedsDocker) {
  ExpectOk(Assembly({WithFile(Component("web"), "conf/app.conf")}));
  ExpectOneError(Assembly({WithFile(Component("web"), "/etc/app.conf")}),
                 "components[0].configuration.files[0].dest_file",
                 "\"/etc/app.conf\": an absolute dest_file needs a DOCKER artifact");
  json docker = WithFile(Component("web"), "/etc/app.conf");
  docker["artifact"] = {{"id", "nginx:1.25"}, {"type", "DOCKER"}};
  ExpectOk(Assembly({docker}));
}

// ---- TensorFlow roles -------------------------------------------------------------------

json WithRole(json c, const std::string& role, const std::string& port_key = "tarn.tf.port",
              const std::string& port = "2222") {
  c["configuration"]["properties"]["tarn.tf.role"] = role;
  if (!port_key.empty()) c["configuration"]["properties"][port_key] = port;
  return c;
}

TEST(ValidatorTest, EachRoleIsOneComponent) {
  ExpectOneError(
      Assembly({WithRole(Component("w1", 2), "worker"), WithRole(Component("w2", 2), "worker")}),
      "components[1].configuration.properties[\"tarn.tf.role\"]",
      "role worker is already taken by \"w1\"");
  ExpectOk(Assembly({WithRole(Component("chief"), "chief"), WithRole(Component("ps", 2), "ps"),
                     WithRole(Component("worker", 4), "worker"),
                     WithRole(Component("eval"), "evaluator")}));
}

TEST(ValidatorTest, ChiefAndEvaluatorAreSingleTasks) {
  ExpectOneError(Assembly({WithRole(Component("chief", 2), "chief")}),
                 "components[0].number_of_containers", "a chief is a single TensorFlow task");
  ExpectOneError(Assembly({WithRole(Component("eval", 3), "evaluator")}),
                 "components[0].number_of_containers", "is a single TensorFlow task; use 0 or 1");
  ExpectOk(Assembly({WithRole(Component("chief", 0), "chief")}));
  ExpectOk(Assembly({WithRole(Component("ps", 3), "ps")}));
}

TEST(ValidatorTest, RoleNeedsAPort) {
  ExpectOneError(Assembly({WithRole(Component("worker", 2), "worker", "")}),
                 "components[0].configuration.properties", "needs tarn.tf.port or tarn.ports");
  ExpectOk(Assembly({WithRole(Component("worker", 2), "worker", "tarn.ports", "grpc:2222")}));
}

// "an evaluator", not "a evaluator".
TEST(ValidatorTest, EvaluatorMessageUsesAn) {
  ParseResult r = Parse(Assembly({WithRole(Component("eval", 2), "evaluator")}));
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(Has(r, Severity::kError, "components[0].number_of_containers",
                  "an evaluator is a single TensorFlow task"))
      << Dump(r);
}

// ---- quicklinks and variables -----------------------------------------------------------

TEST(ValidatorTest, QuicklinksMustNameAServiceKey) {
  json c = Component("web");
  c["quicklinks"] = {"ui", "logs"};
  json a = Assembly({c});
  a["quicklinks"] = {{"ui", "http://${WEB-0_HOST}:8080/"}};
  ExpectOneError(a, "components[0].quicklinks[1]",
                 "\"logs\" is not a key of the service's quicklinks");
  a["quicklinks"]["logs"] = "http://${WEB-0_HOST}:8080/logs";
  ExpectOk(a);
}

TEST(ValidatorTest, UnknownVariablesWarn) {
  json c = Component("web", 2);
  c["launch_command"] = "serve --peer ${WEB-1_HOST} --zk ${CLUSTER_ZK_QUORUM} --x ${WEB-2_HOST}";
  ParseResult r = Parse(Assembly({c}));
  ASSERT_TRUE(r.ok()) << Dump(r);
  // WEB-1 exists; WEB-2 does not (2 containers: 0 and 1).
  EXPECT_EQ(r.diagnostics.size(), 2u) << Dump(r);
  EXPECT_TRUE(Has(r, Severity::kWarning, "components[0].launch_command",
                  "${CLUSTER_ZK_QUORUM} is not a tarn variable"))
      << Dump(r);
  EXPECT_TRUE(Has(r, Severity::kWarning, "components[0].launch_command", "tarn runs no ZooKeeper"))
      << Dump(r);
  EXPECT_TRUE(Has(r, Severity::kWarning, "components[0].launch_command",
                  "${WEB-2_HOST} is not a tarn variable"))
      << Dump(r);
  EXPECT_TRUE(
      Has(r, Severity::kWarning, "components[0].launch_command", "no instance of that name"))
      << Dump(r);
}

TEST(ValidatorTest, KnownAndDeferredVariablesDoNotWarn) {
  json c = Component("web", 1);
  c["launch_command"] =
      "run ${SERVICE_NAME} ${COMPONENT_INSTANCE_NAME} ${COMPONENT_ID} ${CONTAINER_ID} "
      "${THIS_HOST} ${WEB-0_IP} ${USER} ${DOMAIN} $HOME";
  ParseResult r = Parse(Assembly({c}));
  ASSERT_TRUE(r.ok()) << Dump(r);
  EXPECT_TRUE(r.diagnostics.empty()) << Dump(r);
}

// A peer's address exists once the peer is placed: a component that neither starts after it
// nor shares its gang is told so, at the text that names it.
TEST(ValidatorTest, APeersAddressWithoutAnOrderWarns) {
  json ps = Component("ps");
  json web = Component("web");
  web["launch_command"] = "serve --ps ${PS-0_IP}";
  web["configuration"]["env"] = {{"PS", "${PS-0_IP}:2222"}};
  json after = Component("after");
  after["launch_command"] = "serve --ps ${PS-0_IP}";
  after["dependencies"] = {"web"};  // ps is a dependency of a dependency: placed first
  web["dependencies"] = {"ps"};
  ParseResult ordered = Parse(Assembly({ps, web, after}));
  ASSERT_TRUE(ordered.ok()) << Dump(ordered);
  EXPECT_TRUE(ordered.diagnostics.empty()) << Dump(ordered);

  web.erase("dependencies");
  ParseResult r = Parse(Assembly({ps, web}));
  ASSERT_TRUE(r.ok()) << Dump(r);
  EXPECT_EQ(WarningCount(r), 2) << Dump(r);
  EXPECT_TRUE(Has(r, Severity::kWarning, "components[1].launch_command",
                  "${PS-0_IP} is ps-0's address, which exists once ps-0 is placed; \"web\" "
                  "neither depends on \"ps\" nor shares its gang"))
      << Dump(r);
  EXPECT_TRUE(Has(r, Severity::kWarning, "components[1].configuration.env.PS",
                  "add \"ps\" to its dependencies"))
      << Dump(r);
}

TEST(ValidatorTest, UnknownVariableInEnvAndQuicklinkWarns) {
  json c = Component("web");
  c["configuration"]["env"] = {{"X", "${NOPE}"}};
  json a = Assembly({c});
  a["quicklinks"] = {{"ui", "http://${NOPE2}/"}};
  ParseResult r = Parse(a);
  ASSERT_TRUE(r.ok()) << Dump(r);
  EXPECT_TRUE(Has(r, Severity::kWarning, "components[0].configuration.env.X", "${NOPE}"))
      << Dump(r);
  EXPECT_TRUE(Has(r, Severity::kWarning, "quicklinks.ui", "${NOPE2}")) << Dump(r);
}

}  // namespace
}  // namespace tarn::spec
