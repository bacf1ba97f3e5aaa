// The verbs of the tarn binary. Each returns the process exit status: 0 success, 1 the input
// was rejected (errors printed on stderr), 2 usage. Each is called once, from main.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tarn::cli {

struct AssemblyFlags {
  std::string user;  // empty: $TARN_USER, else the account
  std::string domain = "tarn";
};

int RunValidate(const std::vector<std::string>& files, const AssemblyFlags& flags);
int RunExplain(const std::string& file, const std::string& output, const AssemblyFlags& flags);

// The client verbs talk to `tarn server` (docs/api.md). Each prints a server error or an
// unreachable server as one line "tarn: ..." on stderr and returns 1; a bad --addr or an
// unknown account is a usage error (2).
// The client verbs talk to tarn's Unix socket unless --addr/$TARN_ADDR names a TCP address
// (then with a bearer token: cli/identity.h).
struct ClientFlags {
  std::string addr;             // empty: $TARN_ADDR, else the Unix socket
  std::string socket;           // empty: $TARN_SOCKET, else the default (identity.h)
  std::string cacert;           // https: the CA file; empty: $TARN_CACERT, else the system's
  std::string as;               // act as this tenant (admins)
  std::string user;             // root: the same as `as`; others: ignored with a warning
  std::string tenant;           // address this tenant's assemblies (operators); "*": all
  std::string output = "text";  // "text" (aligned tables) or "json" (the API's JSON)
};

struct LaunchFlags {
  std::string file;
  bool wait = false;     // poll until STABLE/SUCCEEDED (0), FAILED/STOPPED (1), timeout (124)
  double timeout_s = 0;  // with wait; 0: none
  std::string domain = "tarn";
};

struct LogsFlags {
  std::string name;
  std::string instance;
  bool follow = false;
  bool stderr_stream = false;  // the instance's stderr instead of its stdout
  int64_t tail_bytes = -1;     // >= 0: only the last BYTES
};

int RunLaunch(const LaunchFlags& launch, const ClientFlags& flags);

// `tarn upgrade NAME ...` (upgrade_command.cc): exactly one of `file` (with auto_finalize or
// express), `instances`, `components`, `finalize`, `cancel`.
struct UpgradeFlags {
  std::string name;
  std::string file;  // the new spec: starts an upgrade
  bool auto_finalize = false;
  bool express = false;
  std::string instances;   // "a-0,a-1"
  std::string components;  // "c,d"
  bool finalize = false;
  bool cancel = false;
  std::string domain = "tarn";
};
int RunUpgrade(const UpgradeFlags& upgrade, const ClientFlags& flags);

// What `tarn launch` sends: FILE read and validated exactly as `tarn validate` does (the
// diagnostics printed on stderr), made self-contained (launch_body.h). 0, or the exit status.
struct PreparedLaunch {
  std::string name;
  bool want_stopped = false;  // the file asks for state STOPPED
  nlohmann::json body;
};
int PrepareLaunch(const std::string& file, const std::string& user_label, const std::string& domain,
                  PreparedLaunch* out);

struct RunFlags {
  std::string file;       // the assembly file
  double timeout_s = 0;   // 0: none
  std::string user;       // empty: $TARN_USER, else the account
  std::string state_dir;  // empty: a fresh temporary directory, removed at the end
  int fake_gpus = -1;
  std::string config;  // the server's --config file; empty: none
};
// `tarn run FILE` (run_command.cc): an in-process server on a free port, the assembly
// launched into it, live progress on stdout, until it finishes (0 SUCCEEDED, 1 FAILED), the
// timeout (124) or Ctrl-C (130); then everything is destroyed.
int RunForeground(const RunFlags& run);
int RunList(const ClientFlags& flags);
int RunStatus(const std::string& name, const ClientFlags& flags);
int RunFlex(const std::string& name, const std::string& component, int64_t count,
            const ClientFlags& flags);
int RunStop(const std::string& name, const ClientFlags& flags);
int RunStart(const std::string& name, const ClientFlags& flags);
int RunDestroy(const std::string& name, const ClientFlags& flags);
int RunLogs(const LogsFlags& logs, const ClientFlags& flags);
int RunNodes(const ClientFlags& flags);
int RunQueues(const ClientFlags& flags);
int RunEvents(const std::string& name, const ClientFlags& flags);

// `tarn whoami`, `tarn token create|list|revoke`, `tarn audit` (auth_commands.cc).
int RunWhoami(const ClientFlags& flags);
struct TokenFlags {
  std::string name;  // create: empty lets the server choose; revoke: required
  std::string ttl;   // create: "30d", "12h", "90m", "3600" (seconds); empty: never expires
  std::string role;  // create: empty is the caller's own role
  bool save = false;  // create: also write it to the token file
};
int RunTokenCreate(const TokenFlags& token, const ClientFlags& flags);
int RunTokenList(const ClientFlags& flags);
int RunTokenRevoke(const TokenFlags& token, const ClientFlags& flags);
// `since`: RFC 3339, milliseconds since the epoch, or an age ("10m", "2h", "1d").
int RunAudit(const std::string& since, int64_t limit, const ClientFlags& flags);

// `tarn ui`: a one-time login URL for the dashboard, as the caller (auth_commands.cc).
struct UiFlags {
  bool open = false;   // also open it with xdg-open
  std::string origin;  // the URL's origin instead of the server's own (e.g. an ssh tunnel's)
};
int RunUi(const UiFlags& ui, const ClientFlags& flags);

}  // namespace tarn::cli
