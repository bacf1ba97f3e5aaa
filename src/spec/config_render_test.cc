#include "spec/config_render.h"

#include <gtest/gtest.h>

namespace tarn::spec {
namespace {

Variables Vars() {
  Variables v;
  v.Set("SERVICE_NAME", "fmnist");
  v.Set("COMPONENT_INSTANCE_NAME", "worker-1");
  return v;
}

ConfigFile File(ConfigFileType type, std::map<std::string, std::string> props) {
  ConfigFile f;
  f.type = type;
  f.dest_file = "x";
  f.properties = std::move(props);
  return f;
}

TEST(RenderConfigFile, HadoopXmlEscapesAndSubstitutes) {
  auto out =
      RenderConfigFile(File(ConfigFileType::kHadoopXml,
                            {{"fs.defaultFS", "hdfs://${SERVICE_NAME}"}, {"a&b", "<x y=\"1\">"}}),
                       Vars());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<configuration>\n"
            "  <property>\n    <name>a&amp;b</name>\n    <value>&lt;x y=&quot;1&quot;&gt;</value>\n"
            "  </property>\n"
            "  <property>\n    <name>fs.defaultFS</name>\n    <value>hdfs://fmnist</value>\n"
            "  </property>\n</configuration>\n");
}

TEST(RenderConfigFile, PropertiesEscapeAsJavaReadsThem) {
  auto out = RenderConfigFile(
      File(ConfigFileType::kProperties,
           {{"key:with=seps", " leading\nnext"}, {"name", "${COMPONENT_INSTANCE_NAME}"}}),
      Vars());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "key\\:with\\=seps=\\ leading\\nnext\nname=worker-1\n");
}

TEST(RenderConfigFile, JsonYamlAndEnv) {
  auto json = RenderConfigFile(File(ConfigFileType::kJson, {{"model", "${SERVICE_NAME}"}}), Vars());
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(*json, "{\n  \"model\": \"fmnist\"\n}\n");
  auto yaml = RenderConfigFile(File(ConfigFileType::kYaml, {{"it's", "a 'b'"}}), Vars());
  ASSERT_TRUE(yaml.ok());
  EXPECT_EQ(*yaml, "'it''s': 'a ''b'''\n");
  auto env =
      RenderConfigFile(File(ConfigFileType::kEnv, {{"A", "1"}, {"B", "${SERVICE_NAME}"}}), Vars());
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(*env, "A=1\nB=fmnist\n");
}

TEST(RenderConfigFile, TemplateAndStatic) {
  ConfigFile t = File(ConfigFileType::kTemplate,
                      {{"content", "Hello from ${COMPONENT_INSTANCE_NAME}! $HOME ${X}"}});
  auto out = RenderConfigFile(t, Vars());
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "Hello from worker-1! $HOME ${X}");
  t.properties.clear();
  t.src_content = "upstream ${SERVICE_NAME};";
  EXPECT_EQ(*RenderConfigFile(t, Vars()), "upstream fmnist;");
  ConfigFile s = File(ConfigFileType::kStatic, {});
  s.src_content = std::string("bin\0ary ${SERVICE_NAME}", 23);
  EXPECT_EQ(*RenderConfigFile(s, Vars()), std::string("bin\0ary ${SERVICE_NAME}", 23));
}

}  // namespace
}  // namespace tarn::spec
