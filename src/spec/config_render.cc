#include "spec/config_render.h"

#include <nlohmann/json.hpp>

namespace tarn::spec {
namespace {

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// java.util.Properties escaping: keys escape separators and leading blanks, both escape
// backslashes and line breaks.
std::string PropertiesEscape(const std::string& s, bool key) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '=':
      case ':':
      case '#':
      case '!':
        if (key) out += '\\';
        out += c;
        break;
      case ' ':
        if (key || i == 0) out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string YamlQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

StatusOr<std::string> RenderConfigFile(const ConfigFile& file, const Variables& vars) {
  auto sub = [&](const std::string& v) { return Substitute(v, vars).text; };
  switch (file.type) {
    case ConfigFileType::kTemplate: {
      if (file.src_content) return sub(*file.src_content);
      auto it = file.properties.find("content");
      if (it == file.properties.end()) {
        return InvalidArgumentError(file.dest_file + ": a TEMPLATE needs content");
      }
      return sub(it->second);
    }
    case ConfigFileType::kStatic:
      if (!file.src_content) return InvalidArgumentError(file.dest_file + ": no src_file");
      return *file.src_content;
    case ConfigFileType::kXml:
    case ConfigFileType::kHadoopXml: {
      std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<configuration>\n";
      for (const auto& [k, v] : file.properties) {
        out += "  <property>\n    <name>" + XmlEscape(k) + "</name>\n    <value>" +
               XmlEscape(sub(v)) + "</value>\n  </property>\n";
      }
      return out + "</configuration>\n";
    }
    case ConfigFileType::kProperties: {
      std::string out;
      for (const auto& [k, v] : file.properties) {
        out += PropertiesEscape(k, true) + "=" + PropertiesEscape(sub(v), false) + "\n";
      }
      return out;
    }
    case ConfigFileType::kJson: {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& [k, v] : file.properties) j[k] = sub(v);
      return j.dump(2) + "\n";
    }
    case ConfigFileType::kYaml: {
      std::string out;
      for (const auto& [k, v] : file.properties)
        out += YamlQuote(k) + ": " + YamlQuote(sub(v)) + "\n";
      return out;
    }
    case ConfigFileType::kEnv: {
      std::string out;
      for (const auto& [k, v] : file.properties) out += k + "=" + sub(v) + "\n";
      return out;
    }
    case ConfigFileType::kArchive:
      break;
  }
  return UnimplementedError(file.dest_file + ": ARCHIVE files are not supported yet");
}

}  // namespace tarn::spec
