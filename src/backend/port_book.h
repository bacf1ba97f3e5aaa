// PortBook: the port numbers a backend assigns to instances that share an address (on Slurm
// every instance on a node has the node's address, so two replicas of one component cannot
// both listen on the declared 8501). Numbers come from a configured range and are unique
// across everything this server runs, whichever node it lands on, so TF_CONFIG can name
// `<instance>.<assembly>.<user>.<domain>:<port>` before Slurm has placed anything.
//
// An instance keeps its numbers across its restarts and across server restarts: each
// assembly's assignments live in <root>/<user>/<assembly>/ports.json, written atomically
// (write, fsync, rename) before the numbers are handed out, and read back by Load. Flexed-down
// instances and destroyed assemblies give theirs back. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "spec/assembly.h"

namespace tarn::backend {

struct PortRange {
  int first = 0;
  int last = -1;
  int size() const { return last - first + 1; }
  friend bool operator==(const PortRange&, const PortRange&) = default;
};

// "20000-29999": two numbers in 1..65535, the first not above the last. Errors name the text.
StatusOr<PortRange> ParsePortRange(std::string_view text);

// A readiness check written for the declared ports (PORT's `port`, the port of HTTP's `url`)
// made to probe the numbers assigned in their place: a declared number found there becomes
// the assigned number of the same name. Anything else is left as written.
spec::ReadinessCheck MapCheckPorts(spec::ReadinessCheck check,
                                   const std::vector<spec::NamedPort>& declared,
                                   const std::vector<spec::NamedPort>& assigned);

class PortBook {
 public:
  // Reads every <root>/*/*/ports.json; a file that cannot be read is an error naming it (a
  // server that forgot numbers it handed out would hand them out twice).
  static StatusOr<std::unique_ptr<PortBook>> Load(PortRange range, std::string root);

  // The instance's number for each of `declared`, in that order, assigning (and recording)
  // those it has none for yet. RESOURCE_EXHAUSTED when the range has no free number left.
  StatusOr<std::vector<spec::NamedPort>> Assign(const std::string& user,
                                                const std::string& assembly,
                                                const std::string& instance,
                                                const std::vector<spec::NamedPort>& declared);
  // The number assigned to the instance's port `name`, if any.
  std::optional<int> Find(const std::string& user, const std::string& assembly,
                          const std::string& instance, const std::string& name) const;
  // Gives an instance's numbers back (flexed down, or its assembly destroyed).
  Status Release(const std::string& user, const std::string& assembly, const std::string& instance);
  // Gives all of an assembly's numbers back; its directory is about to go.
  void ReleaseAssembly(const std::string& user, const std::string& assembly);

  PortRange range() const { return range_; }
  size_t assigned() const;

 private:
  // instance -> port name -> number
  using Table = std::map<std::string, std::map<std::string, int>>;

  PortBook(PortRange range, std::string root) : range_(range), root_(std::move(root)) {}
  std::string FileOf(const std::string& user, const std::string& assembly) const;
  Status Write(const std::string& user, const std::string& assembly,
               const Table& table) const;  // REQUIRES: mu_ held
  std::optional<int> NextFree();           // REQUIRES: mu_ held

  const PortRange range_;
  const std::string root_;
  mutable std::mutex mu_;
  std::map<std::string, Table> tables_;  // by "<user>/<assembly>"; guarded by mu_
  std::set<int> used_;                   // every number assigned; guarded by mu_
  int cursor_ = 0;                       // where the next search starts; guarded by mu_
};

}  // namespace tarn::backend
