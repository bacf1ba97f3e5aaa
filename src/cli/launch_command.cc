// tarn launch FILE [--wait]: validates the assembly file exactly as `tarn validate` does,
// posts it with its local files inlined, and optionally follows it until it is up.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "cli/api_format.h"
#include "cli/client_session.h"
#include "cli/commands.h"
#include "cli/identity.h"
#include "cli/launch_body.h"
#include "common/dns_name.h"
#include "common/file.h"
#include "spec/document.h"
#include "spec/parser.h"

namespace tarn::cli {
namespace {

using json = nlohmann::json;

constexpr auto kPollInterval = std::chrono::milliseconds(250);  // a server without watches
constexpr int64_t kWatchWaitMs = 30000;              // how long one GET may be held for a change
constexpr size_t kMaxAssemblyFileBytes = 16u << 20;  // as spec::LoadAssemblyFile
constexpr size_t kMaxBodyBytes = 4u << 20;           // the server's limit (413 beyond)
constexpr int kTimedOutExit = 124;                   // as timeout(1) and `tarn run`

// Reads each local file once, so that the bytes sent are the bytes that were validated.
class CachingFileReader {
 public:
  StatusOr<std::string> Read(const std::string& path) {
    if (auto it = cache_.find(path); it != cache_.end()) return it->second;
    auto content = ReadFileToString(path, spec::kMaxInlineFileBytes);
    if (content.ok()) cache_.emplace(path, *content);
    return content;
  }

 private:
  std::map<std::string, std::string> cache_;
};

std::string StringField(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

// Polls the service until it settles. Progress goes to stdout, or to stderr when stdout
// carries JSON.
// "<instance>: <diagnostics>" of the first instance that can never be placed, or "".
std::string NeverPlaced(const nlohmann::json& service) {
  if (!service.contains("components") || !service["components"].is_array()) return "";
  for (const auto& c : service["components"]) {
    if (!c.is_object() || !c.contains("containers") || !c["containers"].is_array()) continue;
    for (const auto& i : c["containers"]) {
      const std::string d = i.is_object() ? i.value("diagnostics", "") : "";
      if (d.rfind("can never be placed", 0) == 0) {
        return i.value("component_instance_name", "") + ": " + d;
      }
    }
  }
  return "";
}

int Wait(ApiClient& client, const std::string& name, bool want_stopped, double timeout_s,
         const ClientFlags& flags) {
  std::ostream& progress = flags.output == "json" ? std::cerr : std::cout;
  const auto start = std::chrono::steady_clock::now();
  const std::string path = "/app/v1/services/" + UrlEncode(name);
  std::string last_line;
  uint64_t index = 0;  // of the last answer: the next GET is held until the status changes
  for (;;) {
    const uint64_t seen = index;
    // Each wait is cut to the time left, and well inside the client's read timeout.
    int64_t wait_ms = kWatchWaitMs;
    if (timeout_s > 0) {
      const double left =
          timeout_s -
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      wait_ms = std::clamp<int64_t>(static_cast<int64_t>(left * 1000) + 1, 1, kWatchWaitMs);
    }
    auto service = client.Watch(path, &index, wait_ms);
    if (!service.ok()) return PrintError(service.status());
    std::string line = FormatProgress(*service);
    if (line != last_line) {
      progress << line << std::endl;
      last_line = line;
    }
    const std::string state = StringField(*service, "state");
    const bool done = want_stopped ? state == "STOPPED" : state == "STABLE" || state == "SUCCEEDED";
    if (done) {
      if (flags.output == "json") PrintJson(*service);
      return 0;
    }
    // Waiting cannot help an instance the cluster can never hold (YARN's "invalid resource
    // request"): say so now rather than at the timeout.
    if (std::string never = NeverPlaced(*service); !never.empty() && !want_stopped) {
      std::cerr << "tarn: " << name << " cannot start: " << never << "\n";
      return 1;
    }
    if (state == "FAILED" || state == "STOPPED") {
      std::string diagnostics = StringField(*service, "diagnostics");
      std::cerr << "tarn: " << name << " is " << state
                << (diagnostics.empty() ? "" : ": " + diagnostics) << "\n";
      return 1;
    }
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_s > 0 && elapsed >= timeout_s) {
      std::cerr << "tarn: " << name << " is not up after " << timeout_s << "s: " << line << "\n";
      return kTimedOutExit;
    }
    // A server that does not hold reads (no index in its answers) is polled.
    if (index == 0 || index == seen) std::this_thread::sleep_for(kPollInterval);
  }
}

void PrintDiagnostics(const std::string& file, const std::vector<spec::Diagnostic>& diags) {
  for (const spec::Diagnostic& d : diags) std::cerr << spec::FormatDiagnostic(file, d) << "\n";
}

}  // namespace

int PrepareLaunch(const std::string& file, const std::string& user_label, const std::string& domain,
                  PreparedLaunch* out) {
  spec::ParseOptions options;
  options.domain = domain;
  options.user = user_label;
  auto text = ReadFileToString(file, kMaxAssemblyFileBytes);
  if (!text.ok()) {
    // LoadAssemblyFile words a missing file as `tarn validate` does.
    PrintDiagnostics(file, spec::LoadAssemblyFile(file, options).diagnostics);
    return 1;
  }
  // The same base directory and reader that spec::LoadAssemblyFile would use.
  const size_t slash = file.rfind('/');
  options.base_dir = slash == std::string::npos ? "." : file.substr(0, slash == 0 ? 1 : slash);
  CachingFileReader reader;
  options.read_file = [&reader](const std::string& p) { return reader.Read(p); };
  const spec::DocumentFormat format = spec::FormatFromFileName(file);
  spec::ParseResult parsed = spec::ParseAssembly(*text, format, options);
  PrintDiagnostics(file, parsed.diagnostics);
  if (!parsed.ok()) return 1;

  spec::Diagnostics syntax;
  json document = spec::ParseDocument(*text, format, syntax);
  if (document.is_discarded()) {  // cannot happen: ParseAssembly read the same text
    PrintDiagnostics(file, syntax.items());
    return 1;
  }
  auto body = MakeLaunchBody(std::move(document), options.base_dir, options.read_file);
  if (!body.ok()) return PrintError(body.status().WithContext(file));
  const std::string encoded = body->dump(-1, ' ', false, json::error_handler_t::replace);
  if (encoded.size() > kMaxBodyBytes) {
    std::cerr << "tarn: " << file << ": with its config files inlined the assembly is "
              << encoded.size() << " bytes; the server takes at most " << kMaxBodyBytes
              << " (make the config files smaller)\n";
    return 1;
  }
  out->name = parsed.assembly->name;
  out->want_stopped = parsed.assembly->desired_state == spec::DesiredState::kStopped;
  out->body = std::move(*body);
  return 0;
}

int RunLaunch(const LaunchFlags& launch, const ClientFlags& flags) {
  int exit_code = 0;
  Acting acting;
  auto client = OpenClient(flags, &exit_code, &acting);  // connects on the first request
  if (!client) return exit_code;
  // Validated here as the server will (for the tenant it names from the caller's account).
  PreparedLaunch prepared;
  if (int rc = PrepareLaunch(launch.file, UserToDnsLabel(acting.name), launch.domain, &prepared);
      rc != 0) {
    return rc;
  }
  auto answer = client->Post("/app/v1/services", prepared.body);
  if (!answer.ok()) return PrintError(answer.status());
  const std::string& name = prepared.name;
  if (!launch.wait) {
    if (flags.output == "json") {
      PrintJson(*answer);
    } else {
      std::string diagnostics = StringField(*answer, "diagnostics");
      std::cout << (diagnostics.empty() ? name + ": " + StringField(*answer, "state") : diagnostics)
                << "\n";
    }
    return 0;
  }
  return Wait(*client, name, prepared.want_stopped, launch.timeout_s, flags);
}

}  // namespace tarn::cli
