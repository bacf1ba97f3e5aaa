// The tarn binary: one command line for every verb (DESIGN.md, "Contracts").
#include <CLI/CLI.hpp>
#include <iostream>
#include <set>

#include "api/server_command.h"
#include "cli/commands.h"

namespace {

constexpr char kCommands[] =
    "validate, explain, launch, list, status, flex, upgrade, stop, start, destroy, logs, nodes, "
    "queues, events, whoami, token, audit, ui, server, run";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tarn: run machine-learning assemblies on shared CPU/GPU machines"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tarn ") + TARN_VERSION);

  tarn::cli::AssemblyFlags flags;
  auto add_assembly_flags = [&flags](CLI::App* cmd) {
    cmd->add_option("--user", flags.user,
                    "act as this user (default: $TARN_USER, else the account you run as)");
    cmd->add_option("--domain", flags.domain, "DNS domain of instance names")
        ->capture_default_str();
  };

  std::vector<std::string> validate_files;
  CLI::App* validate = app.add_subcommand(
      "validate", "check assembly files (JSON or YAML); exit 1 with every error on stderr");
  validate->add_option("FILE", validate_files, "assembly files")->required();
  add_assembly_flags(validate);

  std::string explain_file;
  std::string output = "text";
  CLI::App* explain = app.add_subcommand(
      "explain",
      "print the plan of an assembly: every instance, its command and environment, "
      "and the start order");
  explain->add_option("FILE", explain_file, "assembly file")->required();
  explain->add_option("-o,--output", output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  add_assembly_flags(explain);

  // The client verbs: they talk to `tarn server`.
  tarn::cli::ClientFlags client;
  auto add_client_flags = [&client](CLI::App* cmd, bool prints_json) {
    cmd->add_option("--addr", client.addr,
                    "the server over TCP, HOST:PORT, http:// or https://HOST:PORT, with a bearer "
                    "token ($TARN_TOKEN, else ~/.config/tarn/token); or unix:PATH (default: "
                    "$TARN_ADDR, else tarn's Unix socket)");
    cmd->add_option("--socket", client.socket,
                    "tarn's Unix socket (default: $TARN_SOCKET, else /run/tarn/tarn.sock, or "
                    "your own server's)");
    cmd->add_option("--cacert", client.cacert,
                    "https: the CA certificates to verify the server with (default: "
                    "$TARN_CACERT, else the system's)");
    cmd->add_option("--as", client.as, "act as this tenant (admins only; audited)");
    cmd->add_option("--user", client.user,
                    "root: the same as --as (default: $TARN_USER); others act as their own "
                    "account and --user is ignored");
    cmd->add_option("--tenant", client.tenant,
                    "the tenant whose assemblies to address (operators, queue administrators); "
                    "list: * for every tenant's");
    if (prints_json) {
      cmd->add_option("-o,--output", client.output, "text or json (the API's JSON)")
          ->check(CLI::IsMember({"text", "json"}))
          ->capture_default_str();
    }
  };

  tarn::cli::LaunchFlags launch_flags;
  CLI::App* launch = app.add_subcommand(
      "launch",
      "validate an assembly file and submit it to the server; with --wait, follow it until "
      "it is STABLE or SUCCEEDED (0), FAILED or STOPPED (1) or the timeout (124)");
  launch->add_option("FILE", launch_flags.file, "assembly file (JSON or YAML)")->required();
  launch->add_flag("--wait", launch_flags.wait, "wait until the assembly is up");
  launch->add_option("--timeout", launch_flags.timeout_s, "with --wait: give up after S seconds")
      ->check(CLI::NonNegativeNumber);
  launch->add_option("--domain", launch_flags.domain, "DNS domain of instance names")
      ->capture_default_str();
  add_client_flags(launch, true);

  CLI::App* list = app.add_subcommand("list", "list your assemblies");
  add_client_flags(list, true);

  std::string name;
  CLI::App* status =
      app.add_subcommand("status", "show an assembly, its components and every instance");
  status->add_option("NAME", name, "assembly name")->required();
  add_client_flags(status, true);

  std::string component;
  int64_t count = 0;
  CLI::App* flex = app.add_subcommand("flex", "change the number of instances of a component");
  flex->add_option("NAME", name, "assembly name")->required();
  flex->add_option("COMPONENT", component, "component name")->required();
  flex->add_option("N", count, "number of instances")->required()->check(CLI::NonNegativeNumber);
  add_client_flags(flex, true);

  tarn::cli::UpgradeFlags upgrade_flags;
  CLI::App* upgrade = app.add_subcommand(
      "upgrade",
      "change a running assembly's spec instance by instance (YARN's upgrade): FILE starts "
      "one; then --instances or --components, and --finalize; or --cancel");
  upgrade->add_option("NAME", upgrade_flags.name, "assembly name")->required();
  upgrade->add_option("FILE", upgrade_flags.file, "the new spec (with a new version)");
  upgrade->add_flag("--auto-finalize", upgrade_flags.auto_finalize,
                    "with FILE: finalize once every instance is upgraded");
  upgrade->add_flag("--express", upgrade_flags.express,
                    "with FILE: upgrade every instance, components in dependency order, and "
                    "finalize");
  upgrade->add_option("--instances", upgrade_flags.instances,
                      "upgrade these instances (a-0,a-1), one after another");
  upgrade->add_option("--components", upgrade_flags.components,
                      "upgrade every instance of these components (c,d)");
  upgrade->add_flag("--finalize", upgrade_flags.finalize,
                    "every instance upgraded: the new spec becomes the assembly's");
  upgrade->add_flag("--cancel", upgrade_flags.cancel,
                    "bring the upgraded instances back to the old spec, the same way");
  upgrade->add_option("--domain", upgrade_flags.domain, "DNS domain of instance names")
      ->capture_default_str();
  add_client_flags(upgrade, true);

  CLI::App* stop = app.add_subcommand("stop", "stop every instance; the assembly is kept");
  stop->add_option("NAME", name, "assembly name")->required();
  add_client_flags(stop, true);

  CLI::App* start = app.add_subcommand("start", "start a stopped assembly again");
  start->add_option("NAME", name, "assembly name")->required();
  add_client_flags(start, true);

  CLI::App* destroy =
      app.add_subcommand("destroy", "stop an assembly and delete it with its shared directory");
  destroy->add_option("NAME", name, "assembly name")->required();
  add_client_flags(destroy, true);

  tarn::cli::LogsFlags logs_flags;
  CLI::App* logs = app.add_subcommand("logs", "print an instance's output");
  logs->add_option("NAME", logs_flags.name, "assembly name")->required();
  logs->add_option("INSTANCE", logs_flags.instance, "instance name, e.g. worker-0")->required();
  logs->add_flag("-f,--follow", logs_flags.follow, "keep printing until the instance's run ends");
  logs->add_flag("--stderr", logs_flags.stderr_stream, "its stderr instead of its stdout");
  logs->add_option("--tail", logs_flags.tail_bytes, "only the last BYTES")
      ->check(CLI::NonNegativeNumber);
  add_client_flags(logs, false);

  CLI::App* nodes = app.add_subcommand("nodes", "list the nodes and their free resources");
  add_client_flags(nodes, true);

  CLI::App* queues = app.add_subcommand("queues", "list the queues and their use");
  add_client_flags(queues, true);

  CLI::App* events = app.add_subcommand("events", "list what happened to an assembly");
  events->add_option("NAME", name, "assembly name")->required();
  add_client_flags(events, true);

  CLI::App* whoami =
      app.add_subcommand("whoami", "show who the server takes you for: tenant, uid, role");
  add_client_flags(whoami, true);

  tarn::cli::TokenFlags token_flags;
  CLI::App* token = app.add_subcommand("token", "bearer tokens for the TCP API");
  token->require_subcommand(1);
  CLI::App* token_create =
      token->add_subcommand("create", "make a token; it is printed once, on stdout");
  token_create->add_option("--name", token_flags.name, "its name (default: token-N)");
  token_create->add_option("--ttl", token_flags.ttl,
                           "lifetime: 30d, 12h, 90m or seconds (default: none)");
  token_create->add_option("--role", token_flags.role, "user, operator or admin (at most yours)")
      ->check(CLI::IsMember({"user", "operator", "admin"}));
  token_create->add_flag("--save", token_flags.save,
                         "also write it to ~/.config/tarn/token (mode 0600) for the CLI to send");
  add_client_flags(token_create, true);
  CLI::App* token_list = token->add_subcommand("list", "list your tokens (never their secrets)");
  add_client_flags(token_list, true);
  CLI::App* token_revoke = token->add_subcommand("revoke", "revoke a token by name");
  token_revoke->add_option("NAME", token_flags.name, "the token's name")->required();
  add_client_flags(token_revoke, true);

  std::string audit_since;
  int64_t audit_limit = 0;
  CLI::App* audit =
      app.add_subcommand("audit", "print the audit log, one JSON event a line (admins)");
  audit->add_option("--since", audit_since,
                    "from this time (RFC 3339 or ms since the epoch) or age (10m, 2h, 1d)");
  audit->add_option("--limit", audit_limit, "at most the newest N events (default 1000)")
      ->check(CLI::PositiveNumber);
  add_client_flags(audit, true);

  tarn::cli::UiFlags ui_flags;
  CLI::App* ui = app.add_subcommand(
      "ui", "print a one-time URL that logs you in to the dashboard (good once, for a minute)");
  ui->add_flag("--open", ui_flags.open, "also open it in a browser (xdg-open)");
  ui->add_option("--origin", ui_flags.origin,
                 "the URL's scheme, host and port, where the server's own are not how your "
                 "browser reaches it (e.g. http://127.0.0.1:9000 through ssh -L)");
  add_client_flags(ui, true);

  // The daemon.
  tarn::api::ServerFlags server_flags;
  CLI::App* server = app.add_subcommand("server", "run the tarn server in the foreground");
  server
      ->add_option("--listen", server_flags.listen,
                   "HOST:PORT to serve the REST API on over TCP (bearer tokens; beyond loopback "
                   "only with the config's tls), \"\" for none")
      ->capture_default_str();
  server->add_option("--socket", server_flags.socket,
                     "the Unix socket for local clients, who are who the kernel says (default: "
                     "/run/tarn/tarn.sock as root, else STATE_DIR/tarn.sock)");
  server->add_option("--state-dir", server_flags.state_dir,
                     "where assemblies are kept (default: /var/lib/tarn as root, else "
                     "~/.local/state/tarn)");
  server->add_option("--config", server_flags.config, "JSON file of queues, nodes, defaults");
  server
      ->add_option("--dns", server_flags.dns,
                   "HOST:PORT of the DNS server for instance names (\"\" for none)")
      ->capture_default_str();
  server
      ->add_option("--fake-gpus", server_flags.fake_gpus,
                   "pretend the node has N GPUs (for testing)")
      ->check(CLI::NonNegativeNumber);

  tarn::cli::RunFlags run_flags;
  CLI::App* run = app.add_subcommand(
      "run",
      "run an assembly in the foreground with a private server until it finishes "
      "(0 SUCCEEDED, 1 FAILED, 124 timeout, 130 Ctrl-C), then destroy it");
  run->add_option("FILE", run_flags.file, "assembly file (JSON or YAML)")->required();
  run->add_option("--timeout", run_flags.timeout_s, "give up after S seconds")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--state-dir", run_flags.state_dir,
                  "where to keep state (default: a temporary directory, removed at the end)");
  run->add_option("--config", run_flags.config,
                  "the private server's JSON config (queues, nodes, defaults), as tarn server's");
  run->add_option("--fake-gpus", run_flags.fake_gpus, "pretend the node has N GPUs")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--user", run_flags.user,
                  "root: act as this tenant (default: $TARN_USER); others act as themselves");

  const std::set<std::string> known = {"validate", "explain", "launch", "list",   "status",
                                       "flex",     "upgrade", "stop",   "start",  "destroy",
                                       "logs",     "nodes",   "queues", "events", "server",
                                       "run",      "whoami",  "token",  "audit",  "ui"};
  const std::string first = argc > 1 ? argv[1] : "";
  if (!first.empty() && first[0] != '-' && known.count(first) == 0) {
    std::cerr << "tarn: unknown command \"" << first << "\" (commands: " << kCommands
              << "; see tarn --help)\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  using namespace tarn::cli;  // NOLINT: the Run* verbs below
  if (*validate) return RunValidate(validate_files, flags);
  if (*explain) return RunExplain(explain_file, output, flags);
  if (*launch) return RunLaunch(launch_flags, client);
  if (*list) return RunList(client);
  if (*status) return RunStatus(name, client);
  if (*flex) return RunFlex(name, component, count, client);
  if (*upgrade) return RunUpgrade(upgrade_flags, client);
  if (*stop) return RunStop(name, client);
  if (*start) return RunStart(name, client);
  if (*destroy) return RunDestroy(name, client);
  if (*logs) return RunLogs(logs_flags, client);
  if (*nodes) return RunNodes(client);
  if (*queues) return RunQueues(client);
  if (*events) return RunEvents(name, client);
  if (*whoami) return RunWhoami(client);
  if (*token_create) return RunTokenCreate(token_flags, client);
  if (*token_list) return RunTokenList(client);
  if (*token_revoke) return RunTokenRevoke(token_flags, client);
  if (*audit) return RunAudit(audit_since, audit_limit, client);
  if (*ui) return RunUi(ui_flags, client);
  if (*server) return tarn::api::RunServerCommand(server_flags);
  if (*run) return tarn::cli::RunForeground(run_flags);
  return 2;
}
