// Walls between tenants on one machine (docs/server.md "Walls between tenants"). Every local instance binds its
// own loopback address in the host's network namespace, so any local process could connect
// to any tenant's instance. NetWalls keeps an nftables table of tarn's own (never another's)
// whose output-hook rules let a new connection (TCP) or a new flow (UDP) to an instance's
// address come only from a process of the instance's own account or root, except on the
// ports its component opens to everyone (`tarn.ports.public`). Only new flows are matched:
// replies on established connections pass, so one tenant's instance can use another's
// public port.
//
// The table is written whole and loaded in one `nft -f` transaction (the old table and the
// new one are swapped atomically: no moment without rules). A server that restarts finds
// the previous table still loaded (the kernel keeps it), holds its own until every instance
// has been restored, then swaps: no window where a running instance is unprotected.
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"

namespace tarn::backend {

// One instance's wall: who may open connections to `address` besides root, and which ports
// are open to every account.
struct Wall {
  std::string address;  // IPv4, inside the server's address range
  uid_t uid = 0;        // the account its container runs as
  std::vector<int> public_ports;

  friend bool operator==(const Wall&, const Wall&) = default;
};

// The ruleset text of `table` (an nftables `inet` table) for `walls`, by instance key; the
// `nft -f` input that replaces the whole table at once.
std::string RenderWalls(const std::string& table, const std::map<std::string, Wall>& walls);

// "127.42.0.0/16" -> "tarn"; any other range -> "tarn_127_43_0_0_16": one table per
// server, since each server owns its address range (tests run several at once).
std::string WallTableName(const std::string& address_range, const std::string& default_range);

class NetWalls {
 public:
  // Runs nft's argv; empty: RunCommand. Tests may record instead.
  using Runner = std::function<StatusOr<CommandResult>(const std::vector<std::string>& argv)>;
  struct Options {
    std::string table = "tarn";
    std::string rules_file;  // where the ruleset is written for `nft -f` (root's, 0600)
    Runner run;
  };
  // Checks that nft can be used (root, the binary, the kernel's nf_tables): when it cannot,
  // the walls are off and describe() says why. Holds every change until Release().
  static std::unique_ptr<NetWalls> Create(Options options);

  bool on() const;
  // For `tarn status` and the server's start: "on: nftables table inet tarn" or "off: ...".
  std::string describe() const;

  // Records `key`'s wall and loads the table (unless held). An error means the rules could
  // not be loaded: the instance must not start.
  Status Set(const std::string& key, Wall wall);
  // Forgets `key`'s wall (its address is free) and loads the table (unless held).
  Status Remove(const std::string& key);
  // Loads the table with every wall recorded so far and stops holding. When nft refuses
  // the table, the walls are off from then on (describe() says why) and the error says so.
  Status Release();
  // The walls recorded, by key.
  std::map<std::string, Wall> walls() const;

 private:
  explicit NetWalls(Options options) : options_(std::move(options)) {}
  Status LoadLocked();  // REQUIRES: mu_

  const Options options_;
  mutable std::mutex mu_;
  std::string off_reason_;             // guarded by mu_; "" while on
  std::map<std::string, Wall> walls_;  // guarded by mu_
  bool held_ = true;                   // guarded by mu_
};

}  // namespace tarn::backend
