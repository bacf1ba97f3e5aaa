#include "spec/validator.h"

#include <functional>
#include <map>
#include <set>

#include "common/dns_name.h"
#include "spec/substitution.h"

namespace tarn::spec {
namespace {

constexpr char kLabelRule[] =
    "lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit";

std::string CompPath(size_t i) { return IndexPath("components", i); }

// True when an error was already reported at `prefix` or below it.
bool HasErrorUnder(const Diagnostics& d, const std::string& prefix) {
  for (const Diagnostic& item : d.items()) {
    if (item.severity != Severity::kError || item.path.compare(0, prefix.size(), prefix) != 0) {
      continue;
    }
    if (item.path.size() == prefix.size() || item.path[prefix.size()] == '.' ||
        item.path[prefix.size()] == '[') {
      return true;
    }
  }
  return false;
}

void CheckNames(const Assembly& a, const ParseOptions& o, Diagnostics& d) {
  const bool user_ok = IsDnsLabel(o.user);
  if (!user_ok) {
    d.Error("", "the user name " + Quote(o.user) + " cannot be part of a DNS name (" + kLabelRule +
                    ")");
  }
  if (!IsDnsName(o.domain)) d.Error("", "the domain " + Quote(o.domain) + " is not a DNS name");
  if (!a.name.empty() && !IsDnsLabel(a.name)) {
    d.Error("name", Quote(a.name) + " is not a DNS label (" + kLabelRule + ")");
  }
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < a.components.size(); ++i) {
    const Component& c = a.components[i];
    if (c.name.empty()) continue;  // missing or empty: reported by the parser
    std::string path = ChildPath(CompPath(i), "name");
    if (!IsDnsLabel(c.name)) {
      d.Error(path, Quote(c.name) + " is not a DNS label (" + kLabelRule + ")");
      continue;
    }
    auto [it, inserted] = seen.emplace(c.name, i);
    if (!inserted) {
      d.Error(path, Quote(c.name) + " is already the name of " + CompPath(it->second));
      continue;
    }
    if (c.number_of_containers == 0) continue;
    std::string last = InstanceName(c.name, c.number_of_containers - 1);
    if (last.size() > kMaxDnsLabel) {
      d.Error(path, "the instance name " + Quote(last) +
                        " is longer than DNS's 63 characters; "
                        "shorten the component name");
      continue;
    }
    if (!user_ok || a.name.empty() || !IsDnsLabel(a.name)) continue;
    std::string host = InstanceHostname(last, a.name, o.user, o.domain);
    if (host.size() > kMaxDnsName) {
      d.Error(path, "the instance name " + Quote(host) + " is " + std::to_string(host.size()) +
                        " characters, longer than DNS's 253; shorten the names");
    }
  }
}

void CheckComponent(const Assembly& a, size_t i, Diagnostics& d) {
  const Component& c = a.components[i];
  const std::string path = CompPath(i);
  // A value the parser refused was reported there; "required" would be a second, wrong error.
  const bool resource_errors =
      HasErrorUnder(d, ChildPath(path, "resource")) || HasErrorUnder(d, "resource");
  if (!c.resource.cpus && !resource_errors) {
    d.Error(ChildPath(path, "resource"),
            "cpus is required (in the component's resource or the service's)");
  }
  if (!c.resource.memory_mib && !resource_errors) {
    d.Error(ChildPath(path, "resource"),
            "memory is required (in the component's resource or the service's)");
  }
  const bool docker = c.artifact && c.artifact->type == ArtifactType::kDocker;
  if (c.launch_command.empty() && !docker) {
    d.Error(ChildPath(path, "launch_command"), "is required unless the artifact is a DOCKER image");
  }
  for (size_t f = 0; f < c.configuration.files.size(); ++f) {
    const ConfigFile& file = c.configuration.files[f];
    if (!docker && !file.dest_file.empty() && file.dest_file[0] == '/') {
      d.Error(ChildPath(ChildPath(path, "configuration"), "files") + "[" + std::to_string(f) +
                  "].dest_file",
              Quote(file.dest_file) +
                  ": an absolute dest_file needs a DOCKER artifact (give a "
                  "relative name; it is created under conf/)");
    }
  }
  std::set<std::string> deps;
  for (size_t k = 0; k < c.dependencies.size(); ++k) {
    const std::string& dep = c.dependencies[k];
    std::string dpath = IndexPath(ChildPath(path, "dependencies"), k);
    bool exists = false;
    for (const Component& other : a.components) exists |= other.name == dep;
    if (dep == c.name) {
      d.Error(dpath, "a component cannot depend on itself");
    } else if (!exists) {
      d.Error(dpath, Quote(dep) + " is not a component of this assembly");
    } else if (!deps.insert(dep).second) {
      d.Error(dpath, Quote(dep) + " is listed twice");
    }
  }
  for (size_t k = 0; k < c.quicklinks.size(); ++k) {
    if (!a.quicklinks.count(c.quicklinks[k])) {
      d.Error(IndexPath(ChildPath(path, "quicklinks"), k),
              Quote(c.quicklinks[k]) + " is not a key of the service's quicklinks");
    }
  }
}

// Reports each dependency cycle once, as "a -> b -> a", at the first member's dependencies.
void CheckCycles(const Assembly& a, Diagnostics& d) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < a.components.size(); ++i) index.emplace(a.components[i].name, i);
  enum Color { kWhite, kGrey, kBlack };
  std::vector<Color> color(a.components.size(), kWhite);
  std::vector<size_t> stack;
  std::function<void(size_t)> visit = [&](size_t u) {
    color[u] = kGrey;
    stack.push_back(u);
    for (const std::string& dep : a.components[u].dependencies) {
      auto it = index.find(dep);
      if (it == index.end() || it->second == u) continue;  // reported elsewhere
      size_t v = it->second;
      if (color[v] == kGrey) {
        std::string cycle;
        size_t start = 0;
        while (stack[start] != v) ++start;
        for (size_t k = start; k < stack.size(); ++k) cycle += a.components[stack[k]].name + " -> ";
        cycle += a.components[v].name;
        d.Error(ChildPath(CompPath(v), "dependencies"),
                "dependencies form a cycle: " + cycle + " (no component could start first)");
      } else if (color[v] == kWhite) {
        visit(v);
      }
    }
    stack.pop_back();
    color[u] = kBlack;
  };
  for (size_t i = 0; i < a.components.size(); ++i) {
    if (color[i] == kWhite) visit(i);
  }
}

void CheckRoles(const Assembly& a, Diagnostics& d) {
  std::map<TfRole, size_t> by_role;
  for (size_t i = 0; i < a.components.size(); ++i) {
    const Component& c = a.components[i];
    if (c.tf_role == TfRole::kNone) continue;
    std::string props = ChildPath(ChildPath(CompPath(i), "configuration"), "properties");
    std::string role_path = ChildPath(props, "tarn.tf.role");
    auto [it, inserted] = by_role.emplace(c.tf_role, i);
    if (!inserted) {
      d.Error(role_path, std::string("role ") + TfRoleName(c.tf_role) + " is already taken by " +
                             Quote(a.components[it->second].name) +
                             " (each TensorFlow job is one component)");
    }
    if ((c.tf_role == TfRole::kChief || c.tf_role == TfRole::kEvaluator) &&
        c.number_of_containers > 1) {
      d.Error(ChildPath(CompPath(i), "number_of_containers"),
              std::string(c.tf_role == TfRole::kEvaluator ? "an evaluator" : "a chief") +
                  " is a single TensorFlow task; use 0 or 1");
    }
    if (!c.tf_port) {
      d.Error(props,
              "a component with tarn.tf.role needs tarn.tf.port or tarn.ports (the "
              "port its cluster address names)");
    }
  }
}

// Whether every instance of `name` is placed before `c`'s instances start: `name` is `c`, a
// component `c` depends on (directly or not), or a member of `c`'s gang.
bool PlacedBefore(const Assembly& a, const Component& c, const std::string& name) {
  if (name == c.name) return true;
  const Component* other = FindComponent(a, name);
  if (other == nullptr) return false;
  if (a.gang && c.tf_role != TfRole::kNone && other->tf_role != TfRole::kNone) return true;
  std::set<std::string> seen;
  std::vector<const Component*> todo = {&c};
  while (!todo.empty()) {
    const Component* at = todo.back();
    todo.pop_back();
    for (const std::string& dep : at->dependencies) {
      if (dep == name) return true;
      if (!seen.insert(dep).second) continue;
      if (const Component* next = FindComponent(a, dep)) todo.push_back(next);
    }
  }
  return false;
}

// Warns of ${NAME}s tarn leaves alone, and (for a component's texts: `c` set) of peers'
// ${<INSTANCE>_IP} whose address may not exist yet when `c` starts.
void WarnUnknown(const std::string& text, const Variables& vars, const std::string& path,
                 Diagnostics& d, const Assembly* a = nullptr, const Component* c = nullptr) {
  std::set<std::string> reported;
  const Expansion e = Substitute(text, vars);
  for (const std::string& name : e.unknown) {
    if (!reported.insert(name).second) continue;
    std::string hint = UnknownVariableHint(name);
    d.Warning(path, "${" + name +
                        "} is not a tarn variable; it is left as written, for the "
                        "shell" +
                        (hint.empty() ? "" : " (" + hint + ")"));
  }
  if (a == nullptr || c == nullptr) return;
  for (const std::string& name : e.deferred) {
    const std::optional<std::string> instance = vars.AddressOf(name);
    if (!instance || !reported.insert(name).second) continue;
    const std::string peer = instance->substr(0, instance->rfind('-'));
    if (PlacedBefore(*a, *c, peer)) continue;
    d.Warning(path, "${" + name + "} is " + *instance + "'s address, which exists once " +
                        *instance + " is placed; " + Quote(c->name) + " neither depends on " +
                        Quote(peer) + " nor shares its gang, so its instances may start first " +
                        "and fail with that reason (add " + Quote(peer) + " to its dependencies)");
  }
}

void CheckVariables(const Assembly& a, const ParseOptions& o, Diagnostics& d) {
  Variables base = AssemblyVariables(a, o.user, o.domain);
  for (const auto& [key, link] : a.quicklinks) {
    WarnUnknown(link, base, ChildPath("quicklinks", key), d);
  }
  for (size_t i = 0; i < a.components.size(); ++i) {
    const Component& c = a.components[i];
    Variables vars = InstanceVariables(base, a, c, 0, o.user, o.domain);
    std::string path = CompPath(i);
    auto check = [&](const std::string& text, const std::string& at) {
      WarnUnknown(text, vars, at, d, &a, &c);
    };
    check(c.launch_command, ChildPath(path, "launch_command"));
    std::string conf = ChildPath(path, "configuration");
    for (const auto& [k, v] : c.configuration.env) check(v, ChildPath(ChildPath(conf, "env"), k));
    for (size_t f = 0; f < c.configuration.files.size(); ++f) {
      const ConfigFile& file = c.configuration.files[f];
      std::string fpath = IndexPath(ChildPath(conf, "files"), f);
      for (const auto& [k, v] : file.properties) {
        check(v, ChildPath(ChildPath(fpath, "properties"), k));
      }
      if (file.type == ConfigFileType::kTemplate && file.src_content) {
        check(*file.src_content, ChildPath(fpath, "src_file"));
      }
    }
    if (c.readiness_check) {
      for (const auto& [k, v] : c.readiness_check->properties) {
        WarnUnknown(v, vars,
                    ChildPath(ChildPath(ChildPath(path, "readiness_check"), "properties"), k), d);
      }
    }
  }
}

}  // namespace

void ValidateAssembly(const Assembly& assembly, const ParseOptions& options, Diagnostics& diags) {
  CheckNames(assembly, options, diags);
  for (size_t i = 0; i < assembly.components.size(); ++i) CheckComponent(assembly, i, diags);
  CheckCycles(assembly, diags);
  CheckRoles(assembly, diags);
  CheckVariables(assembly, options, diags);
}

}  // namespace tarn::spec
