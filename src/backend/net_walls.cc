#include "backend/net_walls.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <cctype>

#include "runtime/container_spec.h"

namespace tarn::backend {
namespace {

std::string PortSet(const std::vector<int>& ports) {
  std::string s = "{ ";
  for (size_t i = 0; i < ports.size(); ++i) s += (i ? ", " : "") + std::to_string(ports[i]);
  return s + " }";
}

StatusOr<CommandResult> Run(const NetWalls::Runner& run, const std::vector<std::string>& argv) {
  if (run) return run(argv);
  return RunCommand(argv, std::chrono::seconds(10));
}

}  // namespace

std::string RenderWalls(const std::string& table, const std::map<std::string, Wall>& walls) {
  // Declared, deleted and declared again in one transaction: the old table (from this
  // server or the one before it) is replaced atomically, or nothing changes.
  std::string s = "table inet " + table + " {}\ndelete table inet " + table + "\n";
  s += "table inet " + table + " {\n";
  s += "  chain output {\n";
  s += "    type filter hook output priority filter; policy accept;\n";
  for (const auto& [key, w] : walls) {
    in_addr a{};
    if (::inet_pton(AF_INET, w.address.c_str(), &a) != 1) continue;  // never one of ours
    const std::string to = "    ip daddr " + w.address + " ct state new ";
    s += "    # " + key + "\n";
    if (!w.public_ports.empty()) {
      s += to + "tcp dport " + PortSet(w.public_ports) + " accept\n";
      s += to + "udp dport " + PortSet(w.public_ports) + " accept\n";
    }
    const std::string others =
        w.uid == 0 ? "meta skuid != 0 " : "meta skuid != { 0, " + std::to_string(w.uid) + " } ";
    s += to + others + "meta l4proto tcp reject with tcp reset\n";
    s += to + others + "reject\n";
  }
  s += "  }\n}\n";
  return s;
}

std::string WallTableName(const std::string& address_range, const std::string& default_range) {
  if (address_range == default_range) return "tarn";
  std::string name = "tarn_";
  for (char c : address_range) name += std::isdigit(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

std::unique_ptr<NetWalls> NetWalls::Create(Options options) {
  std::unique_ptr<NetWalls> w(new NetWalls(std::move(options)));
  if (::geteuid() != 0) {
    w->off_reason_ = "tarn server is not root, and nftables needs root";
    return w;
  }
  StatusOr<CommandResult> r = Run(w->options_.run, {"nft", "list", "tables"});
  if (!r.ok()) {
    w->off_reason_ = "nftables cannot be used (" + r.status().message() +
                     "; Debian's package is nftables)";
  } else if (!r->success()) {
    std::string err = r->err.empty() ? r->out : r->err;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    w->off_reason_ = "nftables refused (`nft list tables`: " + err + ")";
  }
  return w;
}

bool NetWalls::on() const {
  std::lock_guard<std::mutex> lock(mu_);
  return off_reason_.empty();
}

std::string NetWalls::describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!off_reason_.empty()) return "off: " + off_reason_ + "; any local account can connect to any instance";
  return "on: only an instance's own account and root may connect to it, but on its public "
         "ports (nftables table inet " + options_.table + ")";
}

Status NetWalls::LoadLocked() {
  if (!off_reason_.empty() || held_) return OkStatus();
  RETURN_IF_ERROR(runtime::WriteFileAtomically(options_.rules_file,
                                               RenderWalls(options_.table, walls_), false, 0600));
  StatusOr<CommandResult> r = Run(options_.run, {"nft", "-f", options_.rules_file});
  if (!r.ok()) return UnavailableError("nft -f " + options_.rules_file + ": " + r.status().message());
  if (!r->success()) {
    std::string err = r->err.empty() ? r->out : r->err;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    return UnavailableError("nft -f " + options_.rules_file + " refused tarn's rules: " + err);
  }
  return OkStatus();
}

Status NetWalls::Set(const std::string& key, Wall wall) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = walls_.find(key);
  if (it != walls_.end() && it->second == wall) return OkStatus();
  std::optional<Wall> before;
  if (it != walls_.end()) before = it->second;
  walls_[key] = std::move(wall);
  Status s = LoadLocked();
  if (!s.ok()) {  // what is recorded is what is loaded
    if (before) {
      walls_[key] = *before;
    } else {
      walls_.erase(key);
    }
  }
  return s;
}

Status NetWalls::Remove(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (walls_.erase(key) == 0) return OkStatus();
  return LoadLocked();
}

Status NetWalls::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = false;
  Status s = LoadLocked();
  if (!s.ok()) off_reason_ = s.message();
  return s;
}

std::map<std::string, Wall> NetWalls::walls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return walls_;
}

}  // namespace tarn::backend
