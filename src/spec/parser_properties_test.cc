// The parser on properties (tarn.*, yarn.service.*, the rest passed through), environment
// variables and configuration files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec/parser.h"
#include "spec/parser_checks_for_test.h"

namespace tarn::spec {
namespace {

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

TEST(ParserTest, UpgradePropertiesHaveKubernetesDefaultsAndBounds) {
  const Component plain = Ok(ParseJson(Base())).components[0];
  EXPECT_EQ(plain.upgrade_max_unavailable, 1);
  EXPECT_EQ(plain.upgrade_deadline_secs, 600) << "progressDeadlineSeconds";
  EXPECT_EQ(plain.upgrade_deregistration_delay_ms, 5000) << "the registry's TTL";
  const Component set =
      Ok(ParseJson(WithProps(Base(), {{"tarn.upgrade.max_unavailable", "2"},
                                      {"tarn.upgrade.progress_deadline_secs", "90"},
                                      {"tarn.upgrade.deregistration_delay_ms", "0"}})))
          .components[0];
  EXPECT_EQ(set.upgrade_max_unavailable, 2);
  EXPECT_EQ(set.upgrade_deadline_secs, 90);
  EXPECT_EQ(set.upgrade_deregistration_delay_ms, 0);
  for (const char* bad : {"-1", "600001", "1s", "0.5"}) {
    ExpectOneError(WithProps(Base(), {{"tarn.upgrade.deregistration_delay_ms", bad}}),
                   kProps + "[\"tarn.upgrade.deregistration_delay_ms\"]",
                   "is not a delay (whole milliseconds from 0 to 600000");
  }
  for (const char* bad : {"0", "-1", "all", "1.5"}) {
    ExpectOneError(WithProps(Base(), {{"tarn.upgrade.max_unavailable", bad}}),
                   kProps + "[\"tarn.upgrade.max_unavailable\"]", "is not a number of instances");
  }
  for (const char* bad : {"0", "86401", "soon"}) {
    ExpectOneError(WithProps(Base(), {{"tarn.upgrade.progress_deadline_secs", bad}}),
                   kProps + "[\"tarn.upgrade.progress_deadline_secs\"]",
                   "is not a deadline (whole seconds from 1 to 86400");
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

}  // namespace
}  // namespace tarn::spec
