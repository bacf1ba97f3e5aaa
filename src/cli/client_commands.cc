// The client verbs that read or change a running assembly: list, status, flex, stop, start,
// destroy, logs, nodes, queues, events. `tarn launch` is in launch_command.cc.
#include <cstdio>
#include <iostream>

#include "cli/api_format.h"
#include "cli/client_session.h"
#include "cli/commands.h"

namespace tarn::cli {
namespace {

using json = nlohmann::json;

std::string ServicePath(const std::string& name) { return "/app/v1/services/" + UrlEncode(name); }

}  // namespace

int RunList(const ClientFlags& flags) {
  int exit_code = 0;
  auto client = OpenClient(flags, &exit_code);
  if (!client) return exit_code;
  auto answer = client->Get("/app/v1/services");
  if (!answer.ok()) return PrintError(answer.status());
  if (flags.output == "json") {
    PrintJson(*answer);
  } else if (answer->is_array() && answer->empty()) {
    std::cerr << "No assemblies.\n";  // stderr, as kubectl: stdout stays a (empty) listing
  } else {
    std::cout << FormatServiceList(*answer, NowMs());
  }
  return 0;
}

int RunStatus(const std::string& name, const ClientFlags& flags) {
  int exit_code = 0;
  auto client = OpenClient(flags, &exit_code);
  if (!client) return exit_code;
  auto service = client->Get(ServicePath(name));
  if (!service.ok()) return PrintError(service.status());
  if (flags.output == "json") {
    PrintJson(*service);  // the server's answer as it is
    return 0;
  }
  // The model servers' rollout labels (MODELS), from the metrics the server scraped; the
  // status stands without them (a server that scrapes nothing, an older server).
  const std::string metrics = "/tarn/v1/services/" + UrlEncode(name) + "/metrics";
  for (int64_t offset = 0;; offset += 100) {
    auto page = client->Get(metrics, {{"series", "tarn_serve_version_label"},
                                      {"max_points", "1"},
                                      {"limit", "100"},
                                      {"offset", std::to_string(offset)}});
    if (!page.ok()) break;
    AddServedLabels(*service, *page);
    if (offset + 100 >= page->value("total", int64_t{0})) break;
  }
  std::cout << FormatServiceStatus(*service, NowMs());
  return 0;
}

int RunFlex(const std::string& name, const std::string& component, int64_t count,
            const ClientFlags& flags) {
  return Change(
      [&](ApiClient& client) {
        return client.Put(ServicePath(name) + "/components/" + UrlEncode(component),
                          json{{"number_of_containers", count}});
      },
      name + ": flexing component " + component + " to " + std::to_string(count), flags);
}

int RunStop(const std::string& name, const ClientFlags& flags) {
  return Change(
      [&](ApiClient& client) {
        return client.Put(ServicePath(name), json{{"state", "STOPPED"}});
      },
      name + ": stopping", flags);
}

int RunStart(const std::string& name, const ClientFlags& flags) {
  return Change(
      [&](ApiClient& client) {
        return client.Put(ServicePath(name), json{{"state", "STARTED"}});
      },
      name + ": starting", flags);
}

int RunDestroy(const std::string& name, const ClientFlags& flags) {
  return Change([&](ApiClient& client) { return client.Delete(ServicePath(name)); },
                name + ": destroyed", flags);
}

int RunLogs(const LogsFlags& logs, const ClientFlags& flags) {
  int exit_code = 0;
  auto client = OpenClient(flags, &exit_code);
  if (!client) return exit_code;
  Query query = {{"stream", logs.stderr_stream ? "stderr" : "stdout"}};
  if (logs.follow) query.emplace_back("follow", "true");
  if (logs.tail_bytes >= 0) query.emplace_back("tail", std::to_string(logs.tail_bytes));
  const std::string path = "/tarn/v1/services/" + UrlEncode(logs.name) + "/instances/" +
                           UrlEncode(logs.instance) + "/logs";
  bool write_failed = false;
  Status status = client->Stream(
      path, query,
      [&write_failed](std::string_view piece) {
        // Flushed piece by piece: a followed log must show each line as it comes.
        if (std::fwrite(piece.data(), 1, piece.size(), stdout) != piece.size() ||
            std::fflush(stdout) != 0) {
          write_failed = true;
          return false;
        }
        return true;
      },
      /*no_idle_timeout=*/logs.follow);
  if (write_failed) return 1;  // stdout went away (e.g. `| head`): nothing more to say
  if (!status.ok()) return PrintError(status);
  return 0;
}

int RunNodes(const ClientFlags& flags) {
  return Show("/tarn/v1/nodes", flags, [](const json& nodes) { return FormatNodes(nodes); });
}

int RunQueues(const ClientFlags& flags) {
  return Show("/tarn/v1/queues", flags, [](const json& queues) { return FormatQueues(queues); });
}

int RunEvents(const std::string& name, const ClientFlags& flags) {
  return Show("/tarn/v1/services/" + UrlEncode(name) + "/events", flags,
              [](const json& events) { return FormatEvents(events); });
}

}  // namespace tarn::cli
