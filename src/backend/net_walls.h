// Walls between tenants on one machine (docs/server.md "Walls between tenants"). Every local
// instance binds its own loopback address in the host's network namespace, so any local
// process could connect to any tenant's instance. NetWalls keeps an nftables table of tarn's
// own (never another's) whose output-hook rules let a new connection (TCP) or a new flow
// (UDP) to an instance's address come only from a process of the instance's own account or
// root, except on the ports its component opens to everyone (`tarn.ports.public`). Only new
// flows are matched: replies on established connections pass, so one tenant's instance can
// use another's public port.
//
// The rules are three, fixed; who is walled is data: three sets of the table (the walled
// addresses, address . owner uid, address . protocol . public port). An instance's start or
// end adds or deletes its elements in one nftables transaction, in-process through
// libnftables (about 0.5 ms, where a whole table through the nft command took 15 ms a
// change and grew with the number of instances). A server that restarts finds the previous
// table still loaded (the kernel keeps it), holds its own until every instance has been
// restored, then swaps the whole table in one transaction: no window where a running
// instance is unprotected. Thread-safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::backend {

// One instance's wall: who may open connections to `address` besides root, and which ports
// are open to every account.
struct Wall {
  std::string address;  // IPv4, inside the server's address range
  uid_t uid = 0;        // the account its container runs as
  std::vector<int> public_ports;

  friend bool operator==(const Wall&, const Wall&) = default;
};

// The nftables commands that replace `table` (an `inet` table) whole with one holding
// `walls`, by instance key: one transaction.
std::string RenderWalls(const std::string& table, const std::map<std::string, Wall>& walls);

// The commands that change `table`'s sets from holding the elements of `before` and
// `unchanged` to those of `after` and `unchanged` (deletes first, then adds); empty when
// nothing changes.
std::string RenderWallChanges(const std::string& table, const std::map<std::string, Wall>& before,
                              const std::map<std::string, Wall>& after,
                              const std::map<std::string, Wall>& unchanged = {});

// "127.42.0.0/16" -> "tarn"; any other range -> "tarn_127_43_0_0_16": one table per
// server, since each server owns its address range (tests run several at once).
std::string WallTableName(const std::string& address_range, const std::string& default_range);

// What nftables answered to a batch of commands.
struct NftAnswer {
  bool ok = false;
  std::string error;  // nftables' own words when !ok
};

class NetWalls {
 public:
  // Runs a batch of nftables commands as one transaction; empty: libnftables in this process.
  // Tests may record instead.
  using Nft = std::function<NftAnswer(const std::string& commands)>;
  struct Options {
    std::string table = "tarn";
    Nft nft;
  };
  // Checks that nftables can be used (root, the kernel's nf_tables): when it cannot, the
  // walls are off and describe() says why. Holds every change until Release().
  static std::unique_ptr<NetWalls> Create(Options options);
  ~NetWalls();

  bool on() const;
  // For `tarn status` and the server's start: "on: ..." or "off: ...".
  std::string describe() const;

  // Records `key`'s wall and loads it (unless held). An error means the rules could not be
  // loaded: the instance must not start.
  Status Set(const std::string& key, Wall wall);
  // Forgets `key`'s wall (its address is free) and unloads it (unless held).
  Status Remove(const std::string& key);
  // Loads the whole table with every wall recorded so far and stops holding. When nftables
  // refuses the table, the walls are off from then on (describe() says why) and the error
  // says so.
  Status Release();
  // The walls recorded, by key.
  std::map<std::string, Wall> walls() const;

 private:
  class Library;  // libnftables' context
  explicit NetWalls(Options options);
  // Records `key`'s wall as `after` (none: no wall) and, unless held or off, loads the
  // change: by its elements, else the whole table. On failure nothing changes. REQUIRES: mu_
  Status ChangeLocked(const std::string& key, std::optional<Wall> after);
  Status LoadWholeLocked(const std::map<std::string, Wall>& walls);  // REQUIRES: mu_
  NftAnswer RunLocked(const std::string& commands);                  // REQUIRES: mu_

  const Options options_;
  std::unique_ptr<Library> library_;  // null when options_.nft is given
  mutable std::mutex mu_;
  std::string off_reason_;             // guarded by mu_; "" while on
  std::map<std::string, Wall> walls_;  // guarded by mu_; recorded (loaded, unless held)
  bool held_ = true;                   // guarded by mu_
  bool loaded_whole_ = false;          // guarded by mu_; the table is this server's own
};

}  // namespace tarn::backend
