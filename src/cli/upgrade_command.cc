// `tarn upgrade` (docs/upgrades.md): YARN's `yarn app -upgrade` on tarn's REST calls.
//   tarn upgrade NAME FILE [--auto-finalize | --express]   PUT .../NAME, state UPGRADING...
//   tarn upgrade NAME --instances a-0,a-1                 PUT .../NAME/component-instances
//   tarn upgrade NAME --components c                      PUT .../NAME/components
//   tarn upgrade NAME --finalize | --cancel               PUT .../NAME, state STABLE |
//   CANCEL_UPGRADING
#include <iostream>

#include "cli/client_session.h"
#include "cli/commands.h"
#include "common/dns_name.h"
#include "spec/configuration.h"

namespace tarn::cli {

using json = nlohmann::json;

int RunUpgrade(const UpgradeFlags& upgrade, const ClientFlags& flags) {
  const int actions = (!upgrade.file.empty() ? 1 : 0) + (!upgrade.instances.empty() ? 1 : 0) +
                      (!upgrade.components.empty() ? 1 : 0) + (upgrade.finalize ? 1 : 0) +
                      (upgrade.cancel ? 1 : 0);
  if (actions != 1) {
    std::cerr << "tarn upgrade: give exactly one of FILE (start an upgrade), --instances, "
                 "--components, --finalize and --cancel\n";
    return 2;
  }
  if ((upgrade.auto_finalize || upgrade.express) && upgrade.file.empty()) {
    std::cerr << "tarn upgrade: --auto-finalize and --express go with FILE (they say how the "
                 "upgrade it starts goes on)\n";
    return 2;
  }
  if (upgrade.auto_finalize && upgrade.express) {
    std::cerr << "tarn upgrade: --express finalizes by itself; give --auto-finalize or "
                 "--express, not both\n";
    return 2;
  }
  const std::string path = "/app/v1/services/" + UrlEncode(upgrade.name);
  const std::string& name = upgrade.name;
  if (!upgrade.instances.empty() || !upgrade.components.empty()) {
    const bool by_instance = !upgrade.instances.empty();
    const std::vector<std::string> names =
        spec::SplitNames(by_instance ? upgrade.instances : upgrade.components);
    if (names.empty()) {
      std::cerr << "tarn upgrade: " << (by_instance ? "--instances" : "--components")
                << " names nothing\n";
      return 2;
    }
    json body = json::array();
    for (const std::string& n : names) {
      body.push_back(by_instance ? json{{"component_instance_name", n}, {"state", "UPGRADING"}}
                                 : json{{"name", n}, {"state", "UPGRADING"}});
    }
    return Change(
        [&](ApiClient& client) {
          return client.Put(path + (by_instance ? "/component-instances" : "/components"), body);
        },
        name + ": upgrading", flags);
  }
  if (upgrade.finalize || upgrade.cancel) {
    return Change(
        [&](ApiClient& client) {
          return client.Put(path,
                            json{{"state", upgrade.finalize ? "STABLE" : "CANCEL_UPGRADING"}});
        },
        name + (upgrade.finalize ? ": upgrade finalized" : ": cancelling the upgrade"), flags);
  }
  // The new spec, read and validated as `tarn launch` reads it.
  int exit_code = 0;
  Acting acting;
  auto client = OpenClient(flags, &exit_code, &acting);
  if (!client) return exit_code;
  PreparedLaunch prepared;
  if (int rc = PrepareLaunch(upgrade.file, UserToDnsLabel(acting.name), upgrade.domain, &prepared);
      rc != 0) {
    return rc;
  }
  if (prepared.name != name) {
    std::cerr << "tarn upgrade: " << upgrade.file << " is assembly \"" << prepared.name
              << "\", not \"" << name << "\"\n";
    return 2;
  }
  prepared.body["state"] = upgrade.express         ? "EXPRESS_UPGRADING"
                           : upgrade.auto_finalize ? "UPGRADING_AUTO_FINALIZE"
                                                   : "UPGRADING";
  auto answer = client->Put(path, prepared.body);
  if (!answer.ok()) return PrintError(answer.status());
  if (flags.output == "json") {
    PrintJson(*answer);
  } else {
    std::cout << (answer->is_object() ? answer->value("diagnostics", "") : std::string()) << "\n";
  }
  return 0;
}

}  // namespace tarn::cli
