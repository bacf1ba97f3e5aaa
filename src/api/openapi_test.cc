// Checks docs/openapi.yaml against the routes src/api/api_server.cc and identity_routes.cc
// register: the file
// parses with tarn's own YAML reader, every route is described with its method (and nothing
// else is), credentials are required exactly where the route authenticates (all but the
// open ones), and the query parameters and literal status codes each handler uses are
// documented.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "spec/document.h"

#ifndef TARN_OPENAPI_PATH
#error "TARN_OPENAPI_PATH must name docs/openapi.yaml"
#endif
#if !defined(TARN_API_SERVER_SOURCE) || !defined(TARN_IDENTITY_ROUTES_SOURCE) ||    \
    !defined(TARN_METRICS_ROUTES_SOURCE) || !defined(TARN_SESSION_ROUTES_SOURCE) || \
    !defined(TARN_UPGRADE_ROUTES_SOURCE)
#error "TARN_API_SERVER_SOURCE, TARN_*_ROUTES_SOURCE must name src/api's route files"
#endif

namespace tarn::api {
namespace {

using json = nlohmann::json;

constexpr char kTenantRef[] = "#/components/parameters/Tenant";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Errors(const spec::Diagnostics& d) {
  std::string out;
  for (const spec::Diagnostic& x : d.items()) out += "[" + x.path + "] " + x.message + "\n";
  return out;
}

const json& Document() {
  static const json doc = [] {
    spec::Diagnostics diags;
    json v = spec::ParseDocument(ReadFile(TARN_OPENAPI_PATH), spec::DocumentFormat::kYaml, diags);
    EXPECT_TRUE(diags.items().empty()) << Errors(diags);
    if (v.is_discarded() || !v.is_object()) return json::object();
    return v;
  }();
  return doc;
}

// A route as api_server.cc, identity_routes.cc or metrics_routes.cc registers it.
struct Route {
  std::string method;    // get, post, put, delete
  std::string regex;     // as written in the source
  std::string skeleton;  // the path with every ([^/]+) turned into {}
  std::string handler;   // the source text up to the next registration
  bool open = false;     // registered with h.OpenGet: answered without credentials
};

// "/a/{name}/b/{x}" -> "/a/{}/b/{}".
std::string Skeleton(const std::string& templ) {
  return std::regex_replace(templ, std::regex(R"(\{[^}/]*\})"), "{}");
}

std::vector<Route> SourceRoutes() {
  // The files that register routes, one after the other.
  // A route's handler ends at the next registration or at the end of its file (what a file
  // has before its first route is its helpers', no route's).
  const std::string kNextFile = "\n//@@ next route file\n";
  const std::string src =
      ReadFile(TARN_API_SERVER_SOURCE) + kNextFile + ReadFile(TARN_IDENTITY_ROUTES_SOURCE) +
      kNextFile + ReadFile(TARN_METRICS_ROUTES_SOURCE) + kNextFile +
      ReadFile(TARN_SESSION_ROUTES_SOURCE) + kNextFile + ReadFile(TARN_UPGRADE_ROUTES_SOURCE);
  struct Hit {
    size_t pos;
    size_t args;  // just past the '('
    std::string method;
    bool open;
  };
  std::vector<Hit> hits;
  const std::pair<const char*, const char*> kCalls[] = {{"h.Get(", "get"},
                                                        {"h.OpenGet(", "get"},
                                                        {"h.OpenPost(", "post"},
                                                        {"h.Post(", "post"},
                                                        {"h.Put(", "put"},
                                                        {"h.Delete(", "delete"}};
  for (const auto& [call, method] : kCalls) {
    for (size_t p = src.find(call); p != std::string::npos; p = src.find(call, p + 1)) {
      if (p > 0 && (std::isalnum(static_cast<unsigned char>(src[p - 1])) || src[p - 1] == '_' ||
                    src[p - 1] == '.')) {
        continue;  // e.g. http.Get(
      }
      hits.push_back({p, p + std::string(call).size(), method,
                      std::string(call) == "h.OpenGet(" || std::string(call) == "h.OpenPost("});
    }
  }
  std::sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) { return a.pos < b.pos; });

  std::vector<Route> routes;
  for (size_t k = 0; k < hits.size(); ++k) {
    const Hit& h = hits[k];
    size_t i = h.args;
    while (i < src.size() && std::isspace(static_cast<unsigned char>(src[i]))) ++i;
    std::string path;
    size_t end = std::string::npos;
    if (src.compare(i, 2, "R\"") == 0) {
      size_t open = src.find('(', i + 2);
      if (open == std::string::npos) break;
      const std::string close = ")" + src.substr(i + 2, open - i - 2) + "\"";
      end = src.find(close, open + 1);
      if (end != std::string::npos) path = src.substr(open + 1, end - open - 1);
    } else if (i < src.size() && src[i] == '"') {
      for (size_t j = i + 1; j < src.size(); ++j) {
        if (src[j] == '\\' && j + 1 < src.size()) {
          path += src[++j];
        } else if (src[j] == '"') {
          end = j;
          break;
        } else {
          path += src[j];
        }
      }
    }
    if (end == std::string::npos) {
      ADD_FAILURE() << "route sources, offset " << h.pos
                    << ": the route's first argument is not a string literal";
      continue;
    }
    Route r;
    r.method = h.method;
    r.open = h.open;
    r.regex = path;
    r.skeleton = path;
    for (size_t g = r.skeleton.find("([^/]+)"); g != std::string::npos;
         g = r.skeleton.find("([^/]+)", g)) {
      r.skeleton.replace(g, 7, "{}");
    }
    EXPECT_EQ(r.skeleton.find_first_of("()[]*+?^$|\\"), std::string::npos)
        << "route " << path << ": a regex form this test does not translate";
    size_t next = k + 1 < hits.size() ? hits[k + 1].pos : src.size();
    next = std::min(next, src.find(kNextFile, end));
    r.handler = src.substr(end, next - end);
    routes.push_back(std::move(r));
  }
  return routes;
}

// Follows a local "$ref" (one level is enough for this file's parameters and responses).
const json& Resolve(const json& node) {
  if (node.is_object() && node.contains("$ref") && node["$ref"].is_string()) {
    const std::string ref = node["$ref"].get<std::string>();
    if (ref.rfind("#/", 0) == 0) {
      json::json_pointer ptr(ref.substr(1));
      if (Document().contains(ptr)) return Document().at(ptr);
    }
  }
  return node;
}

// The document's paths (an empty object when it has none).
const json& Paths() {
  static const json kNone = json::object();
  const json& doc = Document();
  return doc.contains("paths") && doc["paths"].is_object() ? doc["paths"] : kNone;
}

// The OpenAPI path whose skeleton matches, or nullptr.
const json* FindPath(const std::string& skeleton, std::string* name = nullptr) {
  const json& paths = Paths();
  for (auto it = paths.begin(); it != paths.end(); ++it) {
    if (Skeleton(it.key()) == skeleton) {
      if (name) *name = it.key();
      return &it.value();
    }
  }
  return nullptr;
}

// Path-level and operation-level parameters, resolved.
std::vector<json> Parameters(const json& path_item, const std::string& method) {
  std::vector<json> out;
  const json none = json::object();
  const json& op = path_item.contains(method) ? path_item[method] : none;
  for (const json* list : {&path_item, &op}) {
    if (!list->is_object() || !list->contains("parameters")) continue;
    for (const json& p : (*list)["parameters"]) out.push_back(Resolve(p));
  }
  return out;
}

bool HasParameter(const std::vector<json>& params, const std::string& in, const std::string& name) {
  for (const json& p : params) {
    if (p.value("in", "") == in && p.value("name", "") == name) return true;
  }
  return false;
}

const std::set<std::string> kMethods = {"get",     "put",  "post",  "delete",
                                        "options", "head", "patch", "trace"};

TEST(OpenApiTest, ParsesWithTarnsYamlReader) {
  const json& doc = Document();
  ASSERT_TRUE(doc.contains("openapi"));
  ASSERT_TRUE(doc["openapi"].is_string());
  EXPECT_EQ(doc["openapi"].get<std::string>().rfind("3.", 0), 0u) << doc["openapi"];
  ASSERT_TRUE(doc.contains("info") && doc["info"].is_object());
  EXPECT_TRUE(doc["info"].value("title", json()).is_string());
  EXPECT_TRUE(doc["info"].value("version", json()).is_string());
  ASSERT_TRUE(doc.contains("paths") && doc["paths"].is_object());
  EXPECT_FALSE(doc["paths"].empty());
}

TEST(OpenApiTest, CanBeCompiledIn) {
  // src/api/CMakeLists.txt embeds the file with configure_file(@ONLY) into a raw string.
  const std::string text = ReadFile(TARN_OPENAPI_PATH);
  EXPECT_EQ(text.find('@'), std::string::npos) << "configure_file would substitute @NAME@";
  EXPECT_EQ(text.find(")TARN_OPENAPI\""), std::string::npos);
}

TEST(OpenApiTest, EveryRouteIsDescribed) {
  const std::vector<Route> routes = SourceRoutes();
  ASSERT_GE(routes.size(), 10u) << "the route scanner found too few routes in the route sources";
  for (const Route& r : routes) {
    std::string name;
    const json* item = FindPath(r.skeleton, &name);
    ASSERT_NE(item, nullptr) << r.method << " " << r.regex << " (as " << r.skeleton
                             << ") is not under paths";
    EXPECT_TRUE(item->contains(r.method) && (*item)[r.method].is_object())
        << name << " has no " << r.method << " operation";
  }
}

TEST(OpenApiTest, EveryOperationIsARoute) {
  std::set<std::pair<std::string, std::string>> registered;
  for (const Route& r : SourceRoutes()) registered.insert({r.skeleton, r.method});
  const json& paths = Paths();
  for (auto it = paths.begin(); it != paths.end(); ++it) {
    for (auto op = it.value().begin(); op != it.value().end(); ++op) {
      if (!kMethods.count(op.key())) continue;
      EXPECT_TRUE(registered.count({Skeleton(it.key()), op.key()}))
          << op.key() << " " << it.key() << " is described but no route serves it";
    }
  }
}

TEST(OpenApiTest, CredentialsWhereTheRouteNeedsThem) {
  const json& doc = Document();
  const json& schemes = doc.value("/components/securitySchemes"_json_pointer, json());
  ASSERT_TRUE(schemes.contains("bearerAuth")) << "components.securitySchemes.bearerAuth";
  EXPECT_EQ(schemes["bearerAuth"].value("scheme", ""), "bearer");
  ASSERT_TRUE(doc.contains("security") && doc["security"].is_array());
  int checked = 0;
  for (const Route& r : SourceRoutes()) {
    const json* item = FindPath(r.skeleton);
    if (item == nullptr || !item->contains(r.method)) continue;  // reported above
    ++checked;
    const json& op = (*item)[r.method];
    // An open route overrides the document's security with none; every other inherits it.
    const bool open = op.contains("security") && op["security"].is_array() &&
                      op["security"].empty();
    EXPECT_EQ(open, r.open) << r.method << " " << r.regex
                            << (r.open ? ": open in the route sources; give it security: []"
                                       : ": authenticates; drop its security: []");
    const json& responses = op.value("responses", json::object());
    // Every route that authenticates may refuse (401, 403); an open one never forbids, and
    // answers 401 only when it is a login that refuses the credentials in its body.
    if (!r.open) {
      EXPECT_TRUE(responses.contains("401")) << r.method << " " << r.regex;
      EXPECT_TRUE(responses.contains("403")) << r.method << " " << r.regex;
    } else {
      EXPECT_FALSE(responses.contains("403")) << r.method << " " << r.regex;
      EXPECT_EQ(responses.contains("401"), r.handler.find("Reply(res, 401") != std::string::npos)
          << r.method << " " << r.regex;
    }
    // A handler that addresses a tenant's assemblies takes ?tenant=.
    const bool tenant = r.handler.find("Addressed(") != std::string::npos ||
                        r.handler.find("ForOwnTenant(") != std::string::npos ||
                        r.handler.find("OwnerOf(") != std::string::npos;
    bool refs = false;
    for (const json* list : {item, &op}) {
      if (!list->contains("parameters")) continue;
      for (const json& p : (*list)["parameters"]) refs |= p.value("$ref", "") == kTenantRef;
    }
    EXPECT_EQ(refs, tenant) << r.method << " " << r.regex
                            << (tenant ? ": addresses a tenant; reference " : ": drop ")
                            << kTenantRef;
    EXPECT_FALSE(HasParameter(Parameters(*item, r.method), "query", "user.name"))
        << r.method << " " << r.regex << ": user.name is the simpleAuth scheme, not a parameter";
  }
  EXPECT_GE(checked, 14);
  for (const char* open :
       {"/healthz", "/metrics", "/app/v1/services/version", "/tarn/v1/openapi.yaml"}) {
    const json* item = FindPath(open);
    ASSERT_NE(item, nullptr) << open;
    EXPECT_TRUE((*item)["get"].contains("security")) << open;
  }
}

TEST(OpenApiTest, PathParametersAreDeclared) {
  const json& paths = Paths();
  const std::regex brace(R"(\{([^}/]*)\})");
  for (auto it = paths.begin(); it != paths.end(); ++it) {
    std::vector<std::string> names;
    for (std::sregex_iterator m(it.key().begin(), it.key().end(), brace), e; m != e; ++m) {
      names.push_back((*m)[1]);
    }
    for (auto op = it.value().begin(); op != it.value().end(); ++op) {
      if (!kMethods.count(op.key())) continue;
      const std::vector<json> params = Parameters(it.value(), op.key());
      for (const std::string& n : names) {
        EXPECT_TRUE(HasParameter(params, "path", n))
            << op.key() << " " << it.key() << ": path parameter " << n << " is not declared";
      }
      for (const json& p : params) {
        if (p.value("in", "") != "path") continue;
        EXPECT_TRUE(std::find(names.begin(), names.end(), p.value("name", "")) != names.end())
            << op.key() << " " << it.key() << ": declares path parameter " << p.value("name", "")
            << " that the path lacks";
        EXPECT_EQ(p.value("required", false), true) << it.key() << " " << p.value("name", "");
      }
    }
  }
}

TEST(OpenApiTest, HandlersQueryParametersAndStatusCodesAreDocumented) {
  const std::regex param(R"re((?:has_param|get_param_value)\("([^"]+)"\))re");
  const std::regex reply(R"(Reply\(res, (\d{3}))");
  const std::regex error(R"(Error\(res, (\d{3}))");
  int checked = 0;
  for (const Route& r : SourceRoutes()) {
    const json* item = FindPath(r.skeleton);
    if (item == nullptr || !item->contains(r.method)) continue;  // reported above
    ++checked;
    const std::vector<json> params = Parameters(*item, r.method);
    for (std::sregex_iterator m(r.handler.begin(), r.handler.end(), param), e; m != e; ++m) {
      EXPECT_TRUE(HasParameter(params, "query", (*m)[1]))
          << r.method << " " << r.regex << ": query parameter " << (*m)[1] << " is not described";
    }
    const json& responses = (*item)[r.method].value("responses", json::object());
    bool replies = false;
    for (const std::regex* re : {&reply, &error}) {
      for (std::sregex_iterator m(r.handler.begin(), r.handler.end(), *re), e; m != e; ++m) {
        replies |= re == &reply;
        EXPECT_TRUE(responses.contains((*m)[1].str()))
            << r.method << " " << r.regex << ": status " << (*m)[1] << " is not described";
      }
    }
    if (!replies) {
      EXPECT_TRUE(responses.contains("200")) << r.method << " " << r.regex << ": no 200";
    }
  }
  EXPECT_GE(checked, 10);
}

TEST(OpenApiTest, EveryRefResolves) {
  std::vector<std::string> missing;
  std::function<void(const json&)> walk = [&](const json& v) {
    if (v.is_object()) {
      if (v.contains("$ref") && v["$ref"].is_string()) {
        const std::string ref = v["$ref"].get<std::string>();
        if (ref.rfind("#/", 0) != 0 || !Document().contains(json::json_pointer(ref.substr(1)))) {
          missing.push_back(ref);
        }
      }
      for (const auto& [k, child] : v.items()) walk(child);
    } else if (v.is_array()) {
      for (const json& child : v) walk(child);
    }
  };
  walk(Document());
  EXPECT_TRUE(missing.empty()) << "unresolved: " << json(missing).dump();
}

TEST(OpenApiTest, ErrorsAreDiagnostics) {
  const json& error = Document().value("/components/schemas/Error"_json_pointer, json());
  ASSERT_TRUE(error.is_object());
  EXPECT_TRUE(error.value("/properties/diagnostics"_json_pointer, json()).is_object());
  // Every non-2xx answer that has a body is an Error.
  const json& paths = Paths();
  for (auto it = paths.begin(); it != paths.end(); ++it) {
    for (auto op = it.value().begin(); op != it.value().end(); ++op) {
      if (!kMethods.count(op.key())) continue;
      const json& responses = op.value().value("responses", json::object());
      for (auto rs = responses.begin(); rs != responses.end(); ++rs) {
        if (rs.key().empty() || rs.key()[0] == '2') continue;
        const json& schema =
            Resolve(rs.value()).value("/content/application~1json/schema"_json_pointer, json());
        EXPECT_EQ(schema.value("$ref", ""), "#/components/schemas/Error")
            << op.key() << " " << it.key() << " " << rs.key();
      }
    }
  }
}

}  // namespace
}  // namespace tarn::api
