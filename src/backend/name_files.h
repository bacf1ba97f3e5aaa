// How a program inside a local container resolves the names of its assembly through the
// ordinary system resolver (getaddrinfo, getent), with no tarn library:
//
//   kResolvConf (tarn runs as root): tarn's DNS server also answers on port 53 of the
//     address range's reserved first address (127.42.0.1), and each container sees, in its
//     own mount namespace, an /etc/resolv.conf that names only that server, with the
//     assembly's search domains. Names outside tarn's domain are forwarded upstream by the
//     DNS server when it has upstreams, as a cluster DNS does.
//   kHosts (no port 53, or no root but a user namespace): each container sees an
//     /etc/hosts that holds the machine's own lines plus its assembly's names, rewritten
//     in place as instances come and go.
//   kNone (no mount namespace of its own): nothing changes inside; the names resolve
//     through tarn's DNS server only for programs that ask it, and `tarn status` says so.
//
// The files live in <state>/names/<user>/<assembly>/ and are bind-mounted read-only by
// tarn-shim. Pure functions plus one file writer; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace tarn::backend {

struct NameResolution {
  enum class Mode { kNone, kResolvConf, kHosts };
  Mode mode = Mode::kNone;
  std::string resolver_ip;  // kResolvConf: tarn's DNS server answers on port 53 here
  std::string description;  // one line for `tarn status`: how names resolve, and why so
};

// "resolv-conf", "hosts", "none".
std::string ModeName(NameResolution::Mode mode);

// The resolv.conf of one assembly's containers: tarn's server only, search domains
// "<assembly>.<user>.<domain> <user>.<domain> <domain>" (so `ps-0` and `ps-0.fmnist` work
// as short names) and ndots:2.
std::string RenderResolvConf(const std::string& resolver_ip, const std::string& user,
                             const std::string& assembly, const std::string& domain);

// The hosts file of one assembly's containers: the machine's hosts text, then a marked
// block with tarn's lines ("<ip>\t<fqdn> <short>\n" each, Registry::HostsLines).
std::string RenderHostsFile(const std::string& machine_hosts, const std::string& tarn_lines,
                            const std::string& user, const std::string& assembly);

// The nameserver addresses of a resolv.conf's text, in order ("nameserver 10.0.0.2").
std::vector<std::string> NameserversOf(const std::string& resolv_conf);

// Replaces the content of `path` without replacing the file: a bind mount of it keeps
// seeing the new content (a rename would leave the mount on the old inode). Creates it
// 0644 when missing; refuses to follow a symlink. The new bytes are written over the old
// ones and the file is then cut to length, so a reader racing the write may see a mix for
// an instant; readers of /etc/hosts re-read it on the next lookup.
Status RewriteInPlace(const std::string& path, const std::string& content);

}  // namespace tarn::backend
