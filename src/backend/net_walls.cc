#include "backend/net_walls.h"

#include <arpa/inet.h>
#include <nftables/libnftables.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <optional>

namespace tarn::backend {
namespace {

// The sets' elements of `walls`, as "<set> <element>" (the set's name, a space, the element
// in nftables' syntax). Anything but an IPv4 address is never written into the rules.
std::set<std::string> Elements(const std::map<std::string, Wall>& walls) {
  std::set<std::string> e;
  for (const auto& [key, w] : walls) {
    in_addr a{};
    if (::inet_pton(AF_INET, w.address.c_str(), &a) != 1) continue;  // never one of ours
    e.insert("walled " + w.address);
    // Root passes by its own rule: only a tenant's uid is an owner.
    if (w.uid != 0) e.insert("owners " + w.address + " . " + std::to_string(w.uid));
    for (int p : w.public_ports) {
      if (p <= 0 || p > 65535) continue;
      e.insert("public " + w.address + " . tcp . " + std::to_string(p));
      e.insert("public " + w.address + " . udp . " + std::to_string(p));
    }
  }
  return e;
}

// `verb` ("add" or "delete") element commands for `elements`, one per set.
std::string ElementCommands(const std::string& verb, const std::string& table,
                            const std::set<std::string>& elements) {
  std::map<std::string, std::string> by_set;
  for (const std::string& e : elements) {
    const size_t space = e.find(' ');
    std::string& list = by_set[e.substr(0, space)];
    list += (list.empty() ? "" : ", ") + e.substr(space + 1);
  }
  std::string s;
  for (const auto& [set, list] : by_set) {
    s += verb + " element inet " + table + " " + set + " { " + list + " }\n";
  }
  return s;
}

std::string TrimEnd(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

// One libnftables context, used under NetWalls' lock (libnftables is not thread-safe).
class NetWalls::Library {
 public:
  Library() : ctx_(::nft_ctx_new(NFT_CTX_DEFAULT)) {
    if (ctx_ != nullptr) {
      ::nft_ctx_buffer_output(ctx_);
      ::nft_ctx_buffer_error(ctx_);
    }
  }
  ~Library() {
    if (ctx_ != nullptr) ::nft_ctx_free(ctx_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  NftAnswer Run(const std::string& commands) {
    NftAnswer a;
    if (ctx_ == nullptr) {
      a.error = "libnftables could not make a context";
      return a;
    }
    a.ok = ::nft_run_cmd_from_buffer(ctx_, commands.c_str()) == 0;
    // Reading a buffer empties it for the next batch.
    (void)::nft_ctx_get_output_buffer(ctx_);
    const char* err = ::nft_ctx_get_error_buffer(ctx_);
    if (!a.ok) a.error = TrimEnd(err != nullptr && *err != '\0' ? err : "nftables refused");
    return a;
  }

 private:
  nft_ctx* ctx_;
};

std::string RenderWalls(const std::string& table, const std::map<std::string, Wall>& walls) {
  // Declared, deleted and declared again in one transaction: the old table (from this
  // server or the one before it, whatever its form) is replaced atomically, or nothing
  // changes.
  std::string s = "table inet " + table + " {}\ndelete table inet " + table + "\n";
  s += "table inet " + table + " {\n";
  s += "  set walled { type ipv4_addr; }\n";
  s += "  set owners { type ipv4_addr . uid; }\n";
  s += "  set public { type ipv4_addr . inet_proto . inet_service; }\n";
  s += "  chain output {\n";
  s += "    type filter hook output priority filter; policy accept;\n";
  const std::string to = "    ct state new ip daddr @walled ";
  s += to + "ip daddr . meta l4proto . th dport @public accept\n";
  // A packet without a local socket (the kernel's own) has no skuid: these never match it.
  const std::string others = "meta skuid != 0 ip daddr . meta skuid != @owners ";
  s += to + others + "meta l4proto tcp reject with tcp reset\n";
  s += to + others + "reject\n";
  s += "  }\n}\n";
  s += ElementCommands("add", table, Elements(walls));
  return s;
}

std::string RenderWallChanges(const std::string& table, const std::map<std::string, Wall>& before,
                              const std::map<std::string, Wall>& after,
                              const std::map<std::string, Wall>& unchanged) {
  const std::set<std::string> was = Elements(before), is = Elements(after);
  std::set<std::string> still = Elements(unchanged), gone, added;
  still.insert(is.begin(), is.end());
  std::set_difference(was.begin(), was.end(), still.begin(), still.end(),
                      std::inserter(gone, gone.end()));
  std::set_difference(is.begin(), is.end(), was.begin(), was.end(),
                      std::inserter(added, added.end()));
  return ElementCommands("delete", table, gone) + ElementCommands("add", table, added);
}

std::string WallTableName(const std::string& address_range, const std::string& default_range) {
  if (address_range == default_range) return "tarn";
  std::string name = "tarn_";
  for (char c : address_range) name += std::isdigit(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

NetWalls::NetWalls(Options options) : options_(std::move(options)) {
  if (!options_.nft) library_ = std::make_unique<Library>();
}

NetWalls::~NetWalls() = default;

std::unique_ptr<NetWalls> NetWalls::Create(Options options) {
  std::unique_ptr<NetWalls> w(new NetWalls(std::move(options)));
  if (::geteuid() != 0) {
    w->off_reason_ = "tarn server is not root, and nftables needs root";
    return w;
  }
  std::lock_guard<std::mutex> lock(w->mu_);
  if (NftAnswer a = w->RunLocked("list tables\n"); !a.ok) {
    w->off_reason_ = "nftables refused (`list tables`: " + a.error + ")";
  }
  return w;
}

NftAnswer NetWalls::RunLocked(const std::string& commands) {
  return options_.nft ? options_.nft(commands) : library_->Run(commands);
}

bool NetWalls::on() const {
  std::lock_guard<std::mutex> lock(mu_);
  return off_reason_.empty();
}

std::string NetWalls::describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!off_reason_.empty())
    return "off: " + off_reason_ + "; any local account can connect to any instance";
  return "on: only an instance's own account and root may connect to it, but on its public "
         "ports (nftables table inet " +
         options_.table + ")";
}

Status NetWalls::LoadWholeLocked(const std::map<std::string, Wall>& walls) {
  NftAnswer a = RunLocked(RenderWalls(options_.table, walls));
  if (!a.ok) {
    return UnavailableError("nftables refused tarn's rules (table inet " + options_.table +
                            "): " + a.error);
  }
  loaded_whole_ = true;
  return OkStatus();
}

Status NetWalls::ChangeLocked(const std::string& key, std::optional<Wall> after) {
  auto it = walls_.find(key);
  std::optional<Wall> before;
  if (it != walls_.end()) before = it->second;
  if (before == after) return OkStatus();
  const auto record = [&] {  // what is recorded is what is loaded
    if (after) {
      walls_[key] = std::move(*after);
    } else {
      walls_.erase(key);
    }
  };
  if (!off_reason_.empty() || held_) {
    record();
    return OkStatus();
  }
  if (loaded_whole_) {
    std::map<std::string, Wall> was, is;
    if (before) was.emplace(key, *before);
    if (after) is.emplace(key, *after);
    // An element another instance also has stays (no two share an address, but if they
    // did, one's end must not unwall the other).
    std::map<std::string, Wall> others;
    if (before) {
      for (const auto& [k, w] : walls_) {
        if (k != key && w.address == before->address) others.emplace(k, w);
      }
    }
    const std::string changes = RenderWallChanges(options_.table, was, is, others);
    if (changes.empty() || RunLocked(changes).ok) {
      record();
      return OkStatus();
    }
    // The table is not what this server loaded (someone changed it): loaded whole again.
  }
  std::map<std::string, Wall> next = walls_;
  if (after) {
    next[key] = *after;
  } else {
    next.erase(key);
  }
  RETURN_IF_ERROR(LoadWholeLocked(next));
  walls_ = std::move(next);
  return OkStatus();
}

Status NetWalls::Set(const std::string& key, Wall wall) {
  std::lock_guard<std::mutex> lock(mu_);
  return ChangeLocked(key, std::move(wall));
}

Status NetWalls::Remove(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return ChangeLocked(key, std::nullopt);
}

Status NetWalls::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  held_ = false;
  if (!off_reason_.empty()) return OkStatus();
  Status s = LoadWholeLocked(walls_);
  if (!s.ok()) off_reason_ = s.message();
  return s;
}

std::map<std::string, Wall> NetWalls::walls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return walls_;
}

}  // namespace tarn::backend
