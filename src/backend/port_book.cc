#include "backend/port_book.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/number.h"
#include "runtime/container_spec.h"

namespace tarn::backend {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::optional<int> PortNumber(std::string_view s) {
  std::optional<int64_t> v = ParseInt64(s);
  if (!v || *v < 1 || *v > 65535) return std::nullopt;
  return static_cast<int>(*v);
}

}  // namespace

spec::ReadinessCheck MapCheckPorts(spec::ReadinessCheck check,
                                   const std::vector<spec::NamedPort>& declared,
                                   const std::vector<spec::NamedPort>& assigned) {
  auto mapped = [&](int number) -> std::optional<int> {
    for (const spec::NamedPort& d : declared) {
      if (d.port != number) continue;
      for (const spec::NamedPort& a : assigned) {
        if (a.name == d.name) return a.port;
      }
    }
    return std::nullopt;
  };
  if (auto it = check.properties.find("port"); it != check.properties.end()) {
    std::optional<int> n = PortNumber(it->second);
    if (n && mapped(*n)) it->second = std::to_string(*mapped(*n));
  }
  if (auto it = check.properties.find("url"); it != check.properties.end()) {
    // scheme://host:port/...: the port ends at the first '/', '?' or '#' after the host.
    std::string& url = it->second;
    const size_t scheme = url.find("://");
    if (scheme != std::string::npos) {
      const size_t host = scheme + 3;
      const size_t end = std::min(url.find_first_of("/?#", host), url.size());
      const size_t colon = url.rfind(':', end == 0 ? 0 : end - 1);
      if (colon != std::string::npos && colon >= host) {
        std::optional<int> n = PortNumber(std::string_view(url).substr(colon + 1, end - colon - 1));
        if (n && mapped(*n)) url.replace(colon + 1, end - colon - 1, std::to_string(*mapped(*n)));
      }
    }
  }
  return check;
}

StatusOr<PortRange> ParsePortRange(std::string_view text) {
  const std::string quoted = "port range \"" + std::string(text) + "\"";
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    return InvalidArgumentError(quoted + ": expected FIRST-LAST, e.g. 20000-29999");
  }
  std::optional<int> first = PortNumber(text.substr(0, dash));
  std::optional<int> last = PortNumber(text.substr(dash + 1));
  if (!first || !last) return InvalidArgumentError(quoted + ": ports are numbers from 1 to 65535");
  if (*first > *last) return InvalidArgumentError(quoted + ": the first port is above the last");
  return PortRange{*first, *last};
}

StatusOr<std::unique_ptr<PortBook>> PortBook::Load(PortRange range, std::string root) {
  auto book = std::unique_ptr<PortBook>(new PortBook(range, std::move(root)));
  book->cursor_ = range.first;
  std::error_code ec;
  for (fs::directory_iterator users(book->root_, ec), end; !ec && users != end;
       users.increment(ec)) {
    const std::string user = users->path().filename().string();
    if (user.empty() || user[0] == '.' || !users->is_directory()) continue;
    std::error_code ec2;
    for (fs::directory_iterator asms(users->path(), ec2); !ec2 && asms != end;
         asms.increment(ec2)) {
      const std::string file = asms->path().string() + "/ports.json";
      if (!fs::exists(file)) continue;
      ASSIGN_OR_RETURN(std::string text, ReadFileToString(file, 16 << 20));
      json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!doc.is_object()) return DataLossError(file + ": not a JSON object");
      Table table;
      for (const auto& [instance, ports] : doc.items()) {
        if (!ports.is_object()) return DataLossError(file + ": " + instance + ": not an object");
        for (const auto& [name, number] : ports.items()) {
          if (!number.is_number_integer() || number.get<int64_t>() < 1 ||
              number.get<int64_t>() > 65535) {
            return DataLossError(file + ": " + instance + "." + name + ": not a port number");
          }
          // Kept even when the range changed since: the instance may still listen on it.
          table[instance][name] = number.get<int>();
          book->used_.insert(number.get<int>());
        }
      }
      book->tables_[user + "/" + asms->path().filename().string()] = std::move(table);
    }
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return InternalError(book->root_ + ": " + ec.message());
  }
  return book;
}

std::string PortBook::FileOf(const std::string& user, const std::string& assembly) const {
  return root_ + "/" + user + "/" + assembly + "/ports.json";
}

Status PortBook::Write(const std::string& user, const std::string& assembly,
                       const Table& table) const {
  json doc = json::object();
  for (const auto& [instance, ports] : table) {
    json& j = doc[instance];
    j = json::object();
    for (const auto& [name, number] : ports) j[name] = number;
  }
  const std::string file = FileOf(user, assembly);
  RETURN_IF_ERROR(MakeDirectories(fs::path(file).parent_path().string(), 0755));
  return runtime::WriteFileAtomically(file, doc.dump(1) + "\n");
}

std::optional<int> PortBook::NextFree() {
  const int n = range_.size();
  for (int k = 0; k < n; ++k) {
    const int candidate = range_.first + (cursor_ - range_.first + k) % n;
    if (!used_.count(candidate)) {
      cursor_ = candidate + 1 > range_.last ? range_.first : candidate + 1;
      return candidate;
    }
  }
  return std::nullopt;
}

StatusOr<std::vector<spec::NamedPort>> PortBook::Assign(
    const std::string& user, const std::string& assembly, const std::string& instance,
    const std::vector<spec::NamedPort>& declared) {
  if (declared.empty()) return std::vector<spec::NamedPort>{};
  std::lock_guard<std::mutex> lock(mu_);
  Table& table = tables_[user + "/" + assembly];
  std::map<std::string, int>& mine = table[instance];
  std::vector<spec::NamedPort> out;
  std::vector<int> taken;  // assigned by this call: given back when it fails
  Status failed;
  for (const spec::NamedPort& p : declared) {
    auto it = mine.find(p.name);
    if (it == mine.end()) {
      std::optional<int> n = NextFree();
      if (!n) {
        failed = ResourceExhaustedError(
            "port range " + std::to_string(range_.first) + "-" + std::to_string(range_.last) +
            ": all " + std::to_string(range_.size()) + " ports are assigned; " + user + "/" +
            assembly + "/" + instance + " needs one for \"" + p.name +
            "\" (widen backend.port_range)");
        break;
      }
      used_.insert(*n);
      taken.push_back(*n);
      it = mine.emplace(p.name, *n).first;
    }
    out.push_back({p.name, it->second});
  }
  if (failed.ok() && !taken.empty()) failed = Write(user, assembly, table);
  if (!failed.ok()) {
    for (int n : taken) used_.erase(n);
    for (auto it = mine.begin(); it != mine.end();) {
      it = std::find(taken.begin(), taken.end(), it->second) != taken.end() ? mine.erase(it)
                                                                            : std::next(it);
    }
    if (mine.empty()) table.erase(instance);
    return failed;
  }
  return out;
}

std::optional<int> PortBook::Find(const std::string& user, const std::string& assembly,
                                  const std::string& instance, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto t = tables_.find(user + "/" + assembly);
  if (t == tables_.end()) return std::nullopt;
  auto i = t->second.find(instance);
  if (i == t->second.end()) return std::nullopt;
  auto p = i->second.find(name);
  if (p == i->second.end()) return std::nullopt;
  return p->second;
}

Status PortBook::Release(const std::string& user, const std::string& assembly,
                         const std::string& instance) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t = tables_.find(user + "/" + assembly);
  if (t == tables_.end()) return OkStatus();
  auto i = t->second.find(instance);
  if (i == t->second.end()) return OkStatus();
  Table after = t->second;
  after.erase(instance);
  // Written first: a number is free again only once the file no longer holds it.
  RETURN_IF_ERROR(Write(user, assembly, after));
  for (const auto& [name, number] : i->second) used_.erase(number);
  t->second = std::move(after);
  return OkStatus();
}

void PortBook::ReleaseAssembly(const std::string& user, const std::string& assembly) {
  std::lock_guard<std::mutex> lock(mu_);
  auto t = tables_.find(user + "/" + assembly);
  if (t == tables_.end()) return;
  for (const auto& [instance, ports] : t->second) {
    for (const auto& [name, number] : ports) used_.erase(number);
  }
  tables_.erase(t);
}

size_t PortBook::assigned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_.size();
}

}  // namespace tarn::backend
