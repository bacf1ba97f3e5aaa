// The client verbs of identity: whoami, token create|list|revoke, audit.
#include <iostream>

#include "cli/client_session.h"
#include "cli/commands.h"
#include "cli/identity.h"
#include "cli/table.h"
#include "common/number.h"
#include "common/subprocess.h"

namespace tarn::cli {
namespace {

using json = nlohmann::json;

std::string Str(const json& v, const char* key) {
  auto it = v.find(key);
  if (it == v.end() || it->is_null()) return "-";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// "30d", "12h", "90m", "45s" or whole seconds; nullopt when it is none of those.
std::optional<int64_t> DurationSeconds(const std::string& text) {
  if (text.empty()) return std::nullopt;
  int64_t unit = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'd':
      unit = 86400;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'm':
      unit = 60;
      break;
    case 's':
      break;
    default:
      unit = 0;
  }
  if (unit != 0) {
    digits.pop_back();
  } else {
    unit = 1;
  }
  auto n = ParseInt64(digits);
  if (!n || *n <= 0 || *n > int64_t{100} * 365 * 86400 / unit) return std::nullopt;
  return *n * unit;
}

}  // namespace

int RunWhoami(const ClientFlags& flags) {
  return Show("/tarn/v1/whoami", flags, [](const json& me) {
    std::string groups;
    for (const json& g : me.value("groups", json::array())) {
      groups += (groups.empty() ? "" : ",") + (g.is_string() ? g.get<std::string>() : g.dump());
    }
    Table t({"TENANT", "ACCOUNT", "UID", "ROLE", "BY", "GROUPS"});
    std::string by = Str(me, "authenticated_by");
    if (me.contains("token")) by += " " + Str(me, "token");
    t.AddRow({Str(me, "tenant"), Str(me, "account"), Str(me, "uid"), Str(me, "role"), by,
              groups.empty() ? "-" : groups});
    std::string out = t.Render();
    if (me.contains("impersonated_by")) {
      out += "acting for it: " + Str(me["impersonated_by"], "account") + " (" +
             Str(me["impersonated_by"], "role") + ")\n";
    }
    return out;
  });
}

int RunTokenCreate(const TokenFlags& token, const ClientFlags& flags) {
  json body = json::object();
  if (!token.name.empty()) body["name"] = token.name;
  if (!token.role.empty()) body["role"] = token.role;
  if (!token.ttl.empty()) {
    std::optional<int64_t> seconds = DurationSeconds(token.ttl);
    if (!seconds) {
      std::cerr << "tarn: --ttl: \"" << token.ttl
                << "\" is not a duration (use e.g. 30d, 12h, 90m or seconds)\n";
      return 2;
    }
    body["ttl_seconds"] = *seconds;
  }
  int exit_code = 0;
  auto client = OpenClient(flags, &exit_code);
  if (!client) return exit_code;
  auto answer = client->Post("/tarn/v1/tokens", body);
  if (!answer.ok()) return PrintError(answer.status());
  const std::string secret = Str(*answer, "token");
  if (token.save) {
    if (Status s = SaveToken(secret); !s.ok()) {
      std::cerr << "tarn: the token was made but not saved: " << s.message() << "\n";
      std::cout << secret << "\n";
      return 1;
    }
  }
  if (flags.output == "json") {
    PrintJson(*answer);
    return 0;
  }
  // The secret alone on stdout (for $(tarn token create)); what it is on stderr.
  std::cout << secret << "\n";
  std::cerr << "tarn: token " << Str(*answer, "name") << " of " << Str(*answer, "tenant")
            << ", role " << Str(*answer, "role") << ", expires " << Str(*answer, "expires")
            << (token.save ? ", saved to " + TokenFilePath() : "") << "; it is shown this once\n";
  return 0;
}

int RunTokenList(const ClientFlags& flags) {
  int exit_code = 0;
  auto client = OpenClient(flags, &exit_code);
  if (!client) return exit_code;
  auto answer = client->Get("/tarn/v1/tokens");
  if (!answer.ok()) return PrintError(answer.status());
  if (flags.output == "json") {
    PrintJson(*answer);
    return 0;
  }
  if (answer->empty()) {
    std::cerr << "tarn: no tokens\n";
    return 0;
  }
  Table t({"NAME", "TENANT", "ROLE", "CREATED", "BY", "EXPIRES"});
  for (const json& k : *answer) {
    std::string expires = Str(k, "expires");
    if (k.value("expired", false)) expires += " (expired)";
    t.AddRow({Str(k, "name"), Str(k, "tenant"), Str(k, "role"), Str(k, "created"),
              Str(k, "created_by"), expires});
  }
  std::cout << t.Render();
  return 0;
}

int RunTokenRevoke(const TokenFlags& token, const ClientFlags& flags) {
  return Change(
      [&](ApiClient& client) { return client.Delete("/tarn/v1/tokens/" + UrlEncode(token.name)); },
      "Token " + token.name + " revoked", flags);
}

int RunAudit(const std::string& since, int64_t limit, const ClientFlags& flags) {
  Query query;
  if (!since.empty()) {
    // An age is turned into a time here; the server takes times.
    if (std::optional<int64_t> age = DurationSeconds(since);
        age && since.find_first_not_of("0123456789") != std::string::npos) {
      query.emplace_back("since", std::to_string(NowMs() - *age * 1000));
    } else {
      query.emplace_back("since", since);
    }
  }
  if (limit > 0) query.emplace_back("limit", std::to_string(limit));
  return Show(
      "/tarn/v1/audit", flags,
      [](const json& events) {
        // One event per line, as in the file.
        std::string out;
        for (const json& e : events) {
          out += e.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
        }
        return out;
      },
      query);
}

int RunUi(const UiFlags& ui, const ClientFlags& flags) {
  std::string origin = ui.origin;
  while (!origin.empty() && origin.back() == '/') origin.pop_back();
  if (!origin.empty() && origin.rfind("http://", 0) != 0 && origin.rfind("https://", 0) != 0) {
    std::cerr << "tarn: --origin: \"" << ui.origin
              << "\" is not an http:// or https:// origin (e.g. http://127.0.0.1:8088)\n";
    return 2;
  }
  int exit_code = 0;
  auto client = OpenClient(flags, &exit_code);
  if (!client) return exit_code;
  auto answer = client->Post("/tarn/v1/ui/login-codes", json::object());
  if (!answer.ok()) return PrintError(answer.status());
  std::string url;
  if (!origin.empty()) {
    url = origin + answer->value("login_path", "");
  } else {
    url = answer->value("url", "");
  }
  if (url.empty()) {
    std::cerr << "tarn: the server has no TCP listener, so the dashboard has no address: start "
                 "it with --listen 127.0.0.1:8088, or name where it is reached with --origin\n";
    return 1;
  }
  if (flags.output == "json") {
    json out = *answer;
    out["url"] = url;
    PrintJson(out);
  } else {
    // The URL alone on stdout (for scripts); what it is on stderr, as Jupyter prints it.
    std::cout << url << "\n";
    std::cerr << "tarn: open this URL to log in to the dashboard as " << Str(*answer, "tenant")
              << "; it is good once, for a minute\n";
  }
  if (ui.open) {
    StatusOr<CommandResult> opened = RunCommand({"xdg-open", url}, std::chrono::seconds(10));
    if (!opened.ok() || !opened->success()) {
      std::cerr << "tarn: --open: xdg-open could not open it ("
                << (opened.ok() ? opened->FirstErrorLine() : opened.status().message())
                << "); open the URL above yourself\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace tarn::cli
