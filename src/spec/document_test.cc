#include "spec/document.h"

#include <gtest/gtest.h>

#include <string>

#include "spec/diagnostic_checks_for_test.h"

namespace tarn::spec {
namespace {

using json = nlohmann::json;

std::string Errors(const Diagnostics& d) {
  std::string out;
  for (const Diagnostic& x : d.items()) out += "[" + x.path + "] " + x.message + "\n";
  return out;
}

json ParseOk(std::string_view text, DocumentFormat format) {
  Diagnostics d;
  json v = ParseDocument(text, format, d);
  EXPECT_FALSE(d.has_errors()) << Errors(d);
  EXPECT_FALSE(v.is_discarded());
  return v;
}

TEST(FormatFromFileNameTest, ByExtension) {
  EXPECT_EQ(FormatFromFileName("assembly.json"), DocumentFormat::kJson);
  EXPECT_EQ(FormatFromFileName("/a/b/x.yaml"), DocumentFormat::kYaml);
  EXPECT_EQ(FormatFromFileName("x.yml"), DocumentFormat::kYaml);
  EXPECT_EQ(FormatFromFileName("Yarnfile"), DocumentFormat::kAuto);
  EXPECT_EQ(FormatFromFileName("x.txt"), DocumentFormat::kAuto);
  EXPECT_EQ(FormatFromFileName("json"), DocumentFormat::kAuto);
  EXPECT_EQ(FormatFromFileName("x.json.bak"), DocumentFormat::kAuto);
  EXPECT_EQ(FormatFromFileName(""), DocumentFormat::kAuto);
}

TEST(DocumentTest, JsonTypes) {
  json v = ParseOk(R"({"a": 3, "b": "3", "c": true, "d": null, "e": 2.5, "f": [1]})",
                   DocumentFormat::kJson);
  EXPECT_EQ(v, json::parse(R"({"a": 3, "b": "3", "c": true, "d": null, "e": 2.5, "f": [1]})"));
  EXPECT_TRUE(v["a"].is_number_integer());
  EXPECT_TRUE(v["b"].is_string());
}

TEST(DocumentTest, YamlCoreSchemaScalars) {
  json v = ParseOk(
      "a: 3\n"
      "b: \"3\"\n"
      "c: true\n"
      "d: ~\n"
      "e: 2.5\n"
      "f: 'true'\n"
      "g: yes\n"
      "h: null\n"
      "i:\n"
      "j: -7\n"
      "k: 0x1F\n"
      "l: 0o17\n"
      "m: False\n"
      "o: 1e3\n"
      "p: 1.2.3\n"
      "q: .inf\n",
      DocumentFormat::kYaml);
  EXPECT_TRUE(v["a"].is_number_integer());
  EXPECT_EQ(v["a"], 3);
  EXPECT_EQ(v["b"], json("3"));
  EXPECT_EQ(v["c"], json(true));
  EXPECT_TRUE(v["d"].is_null());
  EXPECT_TRUE(v["e"].is_number_float());
  EXPECT_DOUBLE_EQ(v["e"].get<double>(), 2.5);
  EXPECT_EQ(v["f"], json("true"));
  EXPECT_EQ(v["g"], json("yes"));  // YAML 1.1 booleans are strings in 1.2
  EXPECT_TRUE(v["h"].is_null());
  EXPECT_TRUE(v["i"].is_null());
  EXPECT_EQ(v["j"], -7);
  EXPECT_EQ(v["k"], 31);
  EXPECT_EQ(v["l"], 15);
  EXPECT_EQ(v["m"], json(false));
  EXPECT_DOUBLE_EQ(v["o"].get<double>(), 1000.0);
  EXPECT_EQ(v["p"], json("1.2.3"));
  EXPECT_EQ(v["q"], json(".inf"));  // JSON has no infinity
}

// In the YAML 1.2 core schema an explicit !!str tag makes a string of a plain scalar.
// (Found by review: libyaml's document API could not tell "!!str 42" from "42"; the event
// API's plain_implicit flag can.)
TEST(DocumentTest, YamlExplicitStrTagGivesAString) {
  json v = ParseOk("n: !!str 42\nb: !!str true\n", DocumentFormat::kYaml);
  EXPECT_EQ(v["n"], json("42"));
  EXPECT_EQ(v["b"], json("true"));
}

TEST(DocumentTest, YamlIntegerOutOfRangeStaysText) {
  json v = ParseOk("a: 99999999999999999999\n", DocumentFormat::kYaml);
  EXPECT_EQ(v["a"], json("99999999999999999999"));
}

TEST(DocumentTest, YamlAndJsonGiveTheSameValue) {
  json from_json = ParseOk(
      R"({"name": "app", "version": "1", "components": [{"name": "w", "number_of_containers": 2}]})",
      DocumentFormat::kJson);
  json from_yaml =
      ParseOk("name: app\nversion: \"1\"\ncomponents:\n  - name: w\n    number_of_containers: 2\n",
              DocumentFormat::kYaml);
  EXPECT_EQ(from_json, from_yaml);
}

TEST(DocumentTest, AutoPicksJsonForBraceOrBracket) {
  // The duplicate-key message tells which parser ran.
  Diagnostics d1;
  ParseDocument("  \n {\"a\": 1, \"a\": 2}", DocumentFormat::kAuto, d1);
  ASSERT_EQ(d1.error_count(), 1);
  EXPECT_TRUE(Contains(d1.items()[0].message, "JSON objects")) << Errors(d1);

  Diagnostics d2;
  ParseDocument("a: 1\na: 2\n", DocumentFormat::kAuto, d2);
  ASSERT_EQ(d2.error_count(), 1);
  EXPECT_TRUE(Contains(d2.items()[0].message, "a mapping must not repeat")) << Errors(d2);

  json arr = ParseOk("[1, 2]", DocumentFormat::kAuto);
  EXPECT_EQ(arr, json::array({1, 2}));
}

TEST(DocumentTest, JsonDuplicateKeyIsAnErrorWithPath) {
  Diagnostics d;
  json v = ParseDocument(
      R"({"components": [{"name": "a"}, {"name": "b", "launch_command": "x", "name": "c"}]})",
      DocumentFormat::kJson, d);
  EXPECT_TRUE(v.is_discarded());
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  EXPECT_EQ(d.items()[0].path, "components[1].name");
  EXPECT_TRUE(Contains(d.items()[0].message, "duplicate key"));
}

TEST(DocumentTest, JsonDuplicateKeyInFirstComponent) {
  Diagnostics d;
  json v =
      ParseDocument(R"({"components": [{"name": "a", "name": "b"}]})", DocumentFormat::kJson, d);
  EXPECT_TRUE(v.is_discarded());
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  EXPECT_EQ(d.items()[0].path, "components[0].name");
}

TEST(DocumentTest, JsonSameKeyInDifferentObjectsIsFine) {
  json v = ParseOk(R"({"a": {"name": 1}, "b": {"name": 2}, "name": 3})", DocumentFormat::kJson);
  EXPECT_EQ(v["b"]["name"], 2);
}

TEST(DocumentTest, YamlDuplicateKeyIsAnErrorWithPath) {
  Diagnostics d;
  json v = ParseDocument(
      "components:\n"
      "  - name: a\n"
      "    number_of_containers: 1\n"
      "    name: b\n",
      DocumentFormat::kYaml, d);
  EXPECT_TRUE(v.is_discarded());
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  EXPECT_EQ(d.items()[0].path, "components[0].name");
  EXPECT_TRUE(Contains(d.items()[0].message, "duplicate key"));
}

TEST(DocumentTest, YamlDuplicateTopLevelKey) {
  Diagnostics d;
  json v = ParseDocument("name: a\nversion: 1\nname: b\n", DocumentFormat::kYaml, d);
  EXPECT_TRUE(v.is_discarded());
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  EXPECT_EQ(d.items()[0].path, "name");
}

std::string NestedLists(int levels, std::string_view inner) {
  return std::string(levels, '[') + std::string(inner) + std::string(levels, ']');
}

TEST(DocumentTest, NestingUpToMaxDepthIsAccepted) {
  for (DocumentFormat f : {DocumentFormat::kJson, DocumentFormat::kYaml}) {
    json v = ParseOk(NestedLists(kMaxDepth, "1"), f);
    const json* p = &v;
    for (int i = 0; i < kMaxDepth; ++i) {
      ASSERT_TRUE(p->is_array());
      p = &(*p)[0];
    }
    EXPECT_EQ(*p, 1);
  }
}

TEST(DocumentTest, NestingDeeperThanMaxDepthIsAnError) {
  for (DocumentFormat f : {DocumentFormat::kJson, DocumentFormat::kYaml}) {
    for (int levels : {kMaxDepth + 1, kMaxDepth + 10, 500}) {
      Diagnostics d;
      json v = ParseDocument(NestedLists(levels, "1"), f, d);
      EXPECT_TRUE(v.is_discarded()) << levels;
      ASSERT_EQ(d.error_count(), 1) << levels << "\n" << Errors(d);
      EXPECT_TRUE(Contains(d.items()[0].message, "nested deeper than 64 levels")) << Errors(d);
    }
  }
}

TEST(DocumentTest, NestedMappingsDeeperThanMaxDepthIsAnError) {
  std::string yaml;
  std::string js;
  for (int i = 0; i < kMaxDepth + 1; ++i) {
    yaml += "{a: ";
    js += "{\"a\": ";
  }
  yaml += "1" + std::string(kMaxDepth + 1, '}');
  js += "1" + std::string(kMaxDepth + 1, '}');
  for (auto [text, f] :
       {std::pair{yaml, DocumentFormat::kYaml}, std::pair{js, DocumentFormat::kJson}}) {
    Diagnostics d;
    json v = ParseDocument(text, f, d);
    EXPECT_TRUE(v.is_discarded());
    EXPECT_EQ(d.error_count(), 1) << Errors(d);
  }
}

// The same text, valid as JSON and as YAML, must be judged the same: 65 nested empty lists
// are nested deeper than 64 levels in either syntax.
TEST(DocumentTest, EmptyListsDeeperThanMaxDepthAreAnErrorInBothSyntaxes) {
  const std::string text = NestedLists(kMaxDepth + 1, "");
  for (DocumentFormat f : {DocumentFormat::kJson, DocumentFormat::kYaml}) {
    Diagnostics d;
    json v = ParseDocument(text, f, d);
    EXPECT_TRUE(v.is_discarded()) << (f == DocumentFormat::kJson ? "json" : "yaml");
    EXPECT_EQ(d.error_count(), 1) << (f == DocumentFormat::kJson ? "json" : "yaml");
  }
}

TEST(DocumentTest, SeveralYamlDocumentsIsAnError) {
  Diagnostics d;
  json v = ParseDocument("name: a\n---\nname: b\n", DocumentFormat::kYaml, d);
  EXPECT_TRUE(v.is_discarded());
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  EXPECT_TRUE(Contains(d.items()[0].message, "more than one YAML document")) << Errors(d);
}

TEST(DocumentTest, SingleDocumentWithMarkersIsFine) {
  json v = ParseOk("---\nname: a\n...\n", DocumentFormat::kYaml);
  EXPECT_EQ(v, json::parse(R"({"name": "a"})"));
}

TEST(DocumentTest, YamlAliasBombStopsAtMaxNodes) {
  // "Billion laughs": 10^9 leaves after expansion, a few hundred bytes of text.
  std::string text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  const char* names = "abcdefghi";
  for (int i = 1; i < 9; ++i) {
    std::string prev(1, names[i - 1]);
    text += std::string(1, names[i]) + ": &" + names[i] + " [";
    for (int k = 0; k < 10; ++k) text += (k ? ", *" : "*") + prev;
    text += "]\n";
  }
  Diagnostics d;
  json v = ParseDocument(text, DocumentFormat::kYaml, d);
  EXPECT_TRUE(v.is_discarded());
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  EXPECT_TRUE(Contains(d.items()[0].message, "more than 200000 values")) << Errors(d);
}

TEST(DocumentTest, ModestAliasUseIsFine) {
  json v = ParseOk("base: &b {cpus: 1}\nother: *b\n", DocumentFormat::kYaml);
  EXPECT_EQ(v["other"], json::parse(R"({"cpus": 1})"));
}

TEST(DocumentTest, JsonSyntaxErrorNamesLineAndColumn) {
  Diagnostics d;
  json v = ParseDocument("{\n  \"a\": 1,\n  \"b\": }\n", DocumentFormat::kJson, d);
  EXPECT_TRUE(v.is_discarded());
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  EXPECT_EQ(d.items()[0].path, "");
  const std::string& m = d.items()[0].message;
  EXPECT_TRUE(Contains(m, "not valid JSON")) << m;
  EXPECT_TRUE(Contains(m, "line 3")) << m;
  EXPECT_TRUE(Contains(m, "column")) << m;
  EXPECT_FALSE(Contains(m, "[json.exception")) << m;
}

TEST(DocumentTest, YamlSyntaxErrorNamesLineAndColumn) {
  Diagnostics d;
  json v = ParseDocument("name: a\ncomponents: [1, 2\nversion: 1\n", DocumentFormat::kYaml, d);
  EXPECT_TRUE(v.is_discarded());
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  const std::string& m = d.items()[0].message;
  EXPECT_TRUE(Contains(m, "not valid YAML: line ")) << m;
  EXPECT_TRUE(Contains(m, ", column ")) << m;

  Diagnostics d2;
  ParseDocument("a: 1\nb: [x\n  - c: d\n", DocumentFormat::kYaml, d2);
  ASSERT_EQ(d2.error_count(), 1) << Errors(d2);

  Diagnostics d3;
  ParseDocument("a: 1\nb: \"unterminated\n", DocumentFormat::kYaml, d3);
  ASSERT_EQ(d3.error_count(), 1) << Errors(d3);
  EXPECT_TRUE(Contains(d3.items()[0].message, "line ")) << Errors(d3);
}

TEST(DocumentTest, JsonNumberTooLargeIsAnErrorNotACrash) {
  Diagnostics d;
  json v = ParseDocument(R"({"lifetime": 1E400})", DocumentFormat::kJson, d);
  EXPECT_TRUE(v.is_discarded());
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  EXPECT_TRUE(Contains(d.items()[0].message, "not valid JSON")) << Errors(d);
}

TEST(DocumentTest, YamlBadIndentationReportsItsLine) {
  Diagnostics d;
  ParseDocument("a: 1\nb: 2\n c: 3\n", DocumentFormat::kYaml, d);
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  EXPECT_TRUE(Contains(d.items()[0].message, "line 3")) << Errors(d);
}

TEST(DocumentTest, EmptyFileIsAnError) {
  for (DocumentFormat f : {DocumentFormat::kJson, DocumentFormat::kYaml, DocumentFormat::kAuto}) {
    Diagnostics d;
    json v = ParseDocument(" \n  \n", f, d);
    EXPECT_TRUE(v.is_discarded());
    ASSERT_EQ(d.error_count(), 1) << Errors(d);
    EXPECT_TRUE(Contains(d.items()[0].message, "the file is empty")) << Errors(d);
  }
}

TEST(DocumentTest, NonStringYamlKeyIsAnError) {
  Diagnostics d;
  json v = ParseDocument("? [a, b]\n: 1\n", DocumentFormat::kYaml, d);
  EXPECT_TRUE(v.is_discarded());
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  EXPECT_TRUE(Contains(d.items()[0].message, "mapping key must be a plain string"));
}

TEST(DocumentTest, UnknownYamlTagIsAnError) {
  Diagnostics d;
  json v = ParseDocument("a: !custom x\n", DocumentFormat::kYaml, d);
  EXPECT_TRUE(v.is_discarded());
  ASSERT_EQ(d.error_count(), 1) << Errors(d);
  EXPECT_EQ(d.items()[0].path, "a");
  EXPECT_TRUE(Contains(d.items()[0].message, "unsupported YAML tag")) << Errors(d);
}

}  // namespace
}  // namespace tarn::spec
