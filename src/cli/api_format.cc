#include "cli/api_format.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <vector>

#include "cli/table.h"

namespace tarn::cli {
namespace {

using json = nlohmann::json;

constexpr char kNone[] = "-";

const json& Field(const json& object, const char* key) {
  static const json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

// A field as text: strings as they are, numbers and booleans as JSON writes them, "-" for
// null, absent or empty.
std::string Text(const json& object, const char* key) {
  const json& v = Field(object, key);
  if (v.is_null()) return kNone;
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    return s.empty() ? kNone : s;
  }
  return v.dump();
}

int64_t Int(const json& object, const char* key, int64_t fallback = 0) {
  const json& v = Field(object, key);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number()) return static_cast<int64_t>(v.get<double>());
  return fallback;
}

const json& Array(const json& object, const char* key) {
  static const json kEmpty = json::array();
  const json& v = Field(object, key);
  return v.is_array() ? v : kEmpty;
}

// A number without a needless ".0": 50 -> "50", 33.33 -> "33.3".
std::string Number(const json& v) {
  if (!v.is_number()) return v.is_null() ? kNone : v.dump();
  if (v.is_number_integer()) return v.dump();
  double d = v.get<double>();
  char buf[32];
  if (d == std::floor(d) && std::fabs(d) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", d);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f", d);
  }
  return buf;
}

std::string Age(const json& object, const char* key, int64_t now_ms) {
  int64_t t = Int(object, key);
  return t > 0 ? FormatAge(now_ms - t) : kNone;
}

std::string JoinInts(const json& array) {
  if (!array.is_array() || array.empty()) return kNone;
  std::string out;
  for (const json& v : array) {
    if (!out.empty()) out += ",";
    out += v.is_string() ? v.get<std::string>() : v.dump();
  }
  return out;
}

// "free/total" of one resource of a node.
std::string FreeOfTotal(const json& node, const char* key, bool memory) {
  const json& free = Field(Field(node, "free"), key);
  const json& total = Field(Field(node, "capacity"), key);
  auto show = [memory](const json& v) {
    if (!v.is_number()) return std::string(kNone);
    return memory ? FormatMemoryMb(v.get<int64_t>()) : Number(v);
  };
  return show(free) + "/" + show(total);
}

std::string Resources(const json& r) {
  if (!r.is_object()) return kNone;
  int64_t gpus = Int(r, "gpus");
  std::string out = Number(Field(r, "vcores")) + " vcores, " + FormatMemoryMb(Int(r, "memory_mb")) +
                    ", " + std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
  return out;
}

std::string LocalTime(const json& t) {
  if (!t.is_number()) return t.is_string() ? t.get<std::string>() : kNone;
  int64_t ms = t.get<int64_t>();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  if (::localtime_r(&secs, &tm) == nullptr) return std::to_string(ms);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace

std::string FormatAge(int64_t ms) {
  int64_t s = ms < 0 ? 0 : ms / 1000;
  auto n = [](int64_t v) { return std::to_string(v); };
  if (s < 120) return n(s) + "s";
  int64_t m = s / 60;
  if (m < 10) return s % 60 == 0 ? n(m) + "m" : n(m) + "m" + n(s % 60) + "s";
  if (m < 180) return n(m) + "m";
  int64_t h = m / 60;
  if (h < 8) return m % 60 == 0 ? n(h) + "h" : n(h) + "h" + n(m % 60) + "m";
  if (h < 48) return n(h) + "h";
  return n(h / 24) + "d";
}

std::string FormatLifetime(const json& seconds) {
  if (!seconds.is_number() || seconds.get<double>() < 0) return "unlimited";
  return FormatAge(seconds.get<int64_t>() * 1000) + " left";
}

std::string FormatMemoryMb(int64_t mb) {
  if (mb != 0 && mb % 1024 == 0) return std::to_string(mb / 1024) + "Gi";
  return std::to_string(mb) + "Mi";
}

std::string FormatServiceList(const json& services, int64_t now_ms) {
  Table table(
      {"NAME", "STATE", "PRIORITY", "READY", "COMPONENTS", "AGE", "LIFETIME", "DIAGNOSTICS"});
  if (services.is_array()) {
    for (const json& s : services) {
      int64_t ready = 0, total = 0;
      std::string components;
      for (const json& c : Array(s, "components")) {
        int64_t r = Int(c, "ready_containers"), n = Int(c, "number_of_containers");
        ready += r;
        total += n;
        if (!components.empty()) components += ",";
        components += Text(c, "name") + ":" + std::to_string(r) + "/" + std::to_string(n);
      }
      table.AddRow({Text(s, "name"), Text(s, "state"), Text(s, "priority"),
                    std::to_string(ready) + "/" + std::to_string(total),
                    components.empty() ? kNone : components, Age(s, "launch_time", now_ms),
                    FormatLifetime(Field(s, "lifetime")), Text(s, "diagnostics")});
    }
  }
  return table.Render();
}

namespace {

// {"fmnist": {"stable": 3, "canary": 4}} -> "fmnist stable 3 canary 4"; "-" when none.
std::string ServedLabels(const json& models) {
  std::string out;
  if (!models.is_object()) return kNone;
  for (const auto& [model, labels] : models.items()) {
    if (!labels.is_object()) continue;
    std::string one = model;
    // stable first, then the rest (canary) by name.
    if (labels.contains("stable")) one += " stable " + labels["stable"].dump();
    for (const auto& [label, version] : labels.items()) {
      if (label != "stable") one += " " + label + " " + version.dump();
    }
    out += (out.empty() ? "" : "; ") + one;
  }
  return out.empty() ? kNone : out;
}

}  // namespace

std::string FormatServiceStatus(const json& service, int64_t now_ms) {
  Table head({"SERVICE", "STATE", "VERSION", "USER", "QUEUE", "PRIORITY", "AGE", "LIFETIME",
              "DIAGNOSTICS"});
  // An upgrade in progress shows where it goes: "1.0 -> 2.0".
  std::string version = Text(service, "version");
  if (const json& to = Field(service, "upgrade_version"); to.is_string()) {
    version += " -> " + to.get<std::string>();
  }
  head.AddRow({Text(service, "name"), Text(service, "state"), version, Text(service, "user"),
               Text(service, "queue"), Text(service, "priority"),
               Age(service, "launch_time", now_ms), FormatLifetime(Field(service, "lifetime")),
               Text(service, "diagnostics")});

  Table components({"COMPONENT", "STATE", "READY", "DIAGNOSTICS"});
  bool models = false;
  for (const json& c : Array(service, "components")) {
    for (const json& k : Array(c, "containers")) models |= Field(k, "served_labels").is_object();
  }
  std::vector<std::string> columns = {"INSTANCE", "STATE",     "VERSION",    "HOST",
                                      "IP",       "NODE",      "GPUS",       "RESTARTS",
                                      "AGE",      "LAST EXIT", "DIAGNOSTICS"};
  if (models) columns.insert(columns.begin() + 3, "MODELS");
  Table containers(columns);
  for (const json& c : Array(service, "components")) {
    components.AddRow({Text(c, "name"), Text(c, "state"),
                       std::to_string(Int(c, "ready_containers")) + "/" +
                           std::to_string(Int(c, "number_of_containers")),
                       Text(c, "diagnostics")});
    for (const json& k : Array(c, "containers")) {
      std::vector<std::string> row = {Text(k, "component_instance_name"),
                                      Text(k, "state"),
                                      Text(k, "version"),
                                      Text(k, "hostname"),
                                      Text(k, "ip"),
                                      Text(k, "bare_host"),
                                      JoinInts(Field(k, "gpus")),
                                      std::to_string(Int(k, "restarts")),
                                      Age(k, "launch_time", now_ms),
                                      Text(k, "last_exit"),
                                      Text(k, "diagnostics")};
      if (models) row.insert(row.begin() + 3, ServedLabels(Field(k, "served_labels")));
      containers.AddRow(row);
    }
  }
  std::string out = head.Render();
  if (std::string names = Text(service, "name_resolution"); names != kNone) {
    out += "names: " + names + "\n";
  }
  // Walls that are off are worth a line; on is the normal case.
  if (std::string walls = Text(service, "network_walls"); walls.rfind("off", 0) == 0) {
    out += "walls: " + walls + "\n";
  }
  out += "\n" + components.Render();
  if (containers.rows() > 0) out += "\n" + containers.Render();
  return out;
}

void AddServedLabels(json& service, const json& metrics) {
  std::map<std::string, json> by_instance;
  for (const json& i : Array(metrics, "instances")) {
    const json& last = Field(i, "last_scrape_ms");
    if (!last.is_number_integer()) continue;
    json models = json::object();
    for (const json& s : Array(i, "series")) {
      const json& points = Field(s, "points");
      const json& labels = Field(s, "labels");
      if (Field(s, "name") != "tarn_serve_version_label" || !points.is_array() || points.empty() ||
          !labels.is_object()) {
        continue;
      }
      const json& newest = points.back();
      if (!newest.is_array() || newest.size() != 2 || !newest[0].is_number() ||
          !newest[1].is_number() || newest[0].get<int64_t>() != last.get<int64_t>()) {
        continue;  // not in the last scrape: the label is gone, or the scrape failed
      }
      const std::string model = labels.value("model", ""), label = labels.value("label", "");
      if (model.empty() || label.empty()) continue;
      models[model][label] = static_cast<int64_t>(newest[1].get<double>());
    }
    if (!models.empty()) by_instance[i.value("instance", "")] = std::move(models);
  }
  if (!service.contains("components") || !service["components"].is_array()) return;
  for (json& c : service["components"]) {
    if (!c.is_object() || !c.contains("containers") || !c["containers"].is_array()) continue;
    for (json& k : c["containers"]) {
      if (!k.is_object()) continue;
      auto it = by_instance.find(k.value("component_instance_name", ""));
      if (it != by_instance.end()) k["served_labels"] = it->second;
    }
  }
}

std::string FormatProgress(const json& service) {
  std::string line = Text(service, "name") + ": " + Text(service, "state");
  std::string ready, waiting;
  for (const json& c : Array(service, "components")) {
    if (!ready.empty()) ready += ", ";
    ready += Text(c, "name") + " " + std::to_string(Int(c, "ready_containers")) + "/" +
             std::to_string(Int(c, "number_of_containers"));
    for (const json& k : Array(c, "containers")) {
      const std::string state = Text(k, "state");
      const std::string why = Text(k, "diagnostics");
      if (waiting.empty() && why != kNone && state != "READY") {
        waiting = Text(k, "component_instance_name") + " " + state + ": " + why;
      }
    }
  }
  if (!ready.empty()) line += ", ready " + ready;
  if (!waiting.empty()) line += "; " + waiting;
  if (std::string d = Text(service, "diagnostics"); d != kNone) line += " (" + d + ")";
  for (char& ch : line) {
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  }
  return line;
}

std::string FormatNodes(const json& nodes) {
  Table table({"NAME", "FREE VCORES", "FREE MEMORY", "FREE GPUS", "FREE GPU IDS", "GPUS HELD BY"});
  if (nodes.is_array()) {
    for (const json& n : nodes) {
      std::string held;  // "0:bob/train/worker-0 2:alice/fmnist/serving-1"
      for (const json& g : Array(n, "gpus")) {
        const json& holder = Field(g, "holder");
        if (!holder.is_string()) continue;
        held +=
            (held.empty() ? "" : " ") + Number(Field(g, "index")) + ":" + holder.get<std::string>();
      }
      table.AddRow({Text(n, "name"), FreeOfTotal(n, "vcores", false),
                    FreeOfTotal(n, "memory_mb", true), FreeOfTotal(n, "gpus", false),
                    JoinInts(Field(n, "free_gpus")), held.empty() ? kNone : held});
    }
  }
  return table.Render();
}

std::string FormatQueues(const json& queues) {
  auto percent = [](const json& v) { return v.is_number() ? Number(v) + "%" : kNone; };
  auto share_of = [&](const json& v) {
    return v.is_number() ? percent(json(std::round(v.get<double>() * 1000) / 10)) : kNone;
  };
  Table table({"NAME", "CAPACITY", "MAX CAPACITY", "USED", "SHARE", "PENDING"});
  // Inside a queue, DRF serves the user with the smallest dominant share first.
  Table users({"QUEUE", "USER", "USED", "DOMINANT SHARE", "PENDING"});
  if (queues.is_array()) {
    for (const json& q : queues) {
      const json& pending = Field(q, "pending");
      table.AddRow({Text(q, "name"), percent(Field(q, "capacity")),
                    percent(Field(q, "maximum_capacity")), Resources(Field(q, "used")),
                    share_of(Field(q, "share")),
                    pending.is_array() ? std::to_string(pending.size()) : Number(pending)});
      for (const json& u : Array(q, "users")) {
        users.AddRow({Text(q, "name"), Text(u, "user"), Resources(Field(u, "used")),
                      share_of(Field(u, "dominant_share")), Number(Field(u, "pending"))});
      }
    }
  }
  std::string out = table.Render();
  if (users.rows() > 0) out += "\n" + users.Render();
  return out;
}

std::string FormatEvents(const json& events) {
  Table table({"TIME", "COMPONENT", "INSTANCE", "TYPE", "MESSAGE"});
  if (events.is_array()) {
    for (const json& e : events) {
      table.AddRow({LocalTime(Field(e, "time")), Text(e, "component"), Text(e, "instance"),
                    Text(e, "type"), Text(e, "message")});
    }
  }
  return table.Render();
}

}  // namespace tarn::cli
