// `tarn server`, and the Daemon that it and `tarn run` (cli/run_command.cc) embed.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace tarn::api {

struct ServerFlags {
  // TCP: HOST:PORT; port 0 picks a free one; "" for none. Callers there authenticate with a
  // bearer token; beyond loopback only with TLS (the config's "tls").
  std::string listen = "127.0.0.1:8088";
  // The Unix socket, where the kernel says who the caller is; "": common/local_paths.h's
  // DefaultSocketPath() (root's at /run/tarn/tarn.sock, anyone else's in its state directory).
  std::string socket;
  std::string state_dir;                  // empty: /var/lib/tarn as root, else ~/.local/state/tarn
  std::string config;                     // JSON: queues, nodes, defaults; empty: defaults
  int fake_gpus = -1;                     // >= 0: pretend the node has this many GPUs
  std::string dns = "127.0.0.1:5353";     // HOST:PORT of the DNS server; "" for none
};

// Runs the server in the foreground until SIGINT/SIGTERM; returns the exit status.
int RunServerCommand(const ServerFlags& flags);

// The whole server in this process: state store, backend, service loop, HTTP API. `tarn
// server` runs one until a signal; `tarn run` and tests embed one.
class Daemon {
 public:
  // Opens the state, recovers what runs, binds the address and serves on a background
  // thread. Errors name the flag or file at fault.
  static StatusOr<std::unique_ptr<Daemon>> Start(const ServerFlags& flags);
  ~Daemon();  // Shutdown()
  // "HOST:PORT" actually bound (the port chosen when --listen asked for port 0); "" when
  // the server has no TCP listener.
  const std::string& address() const;
  // The Unix socket's path.
  const std::string& socket_path() const;
  // Whether the TCP listener speaks TLS.
  bool tls() const;
  // "HOST:PORT" of the DNS server ("" without one).
  const std::string& dns_address() const;
  const std::string& state_dir() const;
  // Stops serving and the server's threads. Containers keep running: a later server on the
  // same state directory finds them again.
  void Shutdown();

  struct Parts;

 private:
  explicit Daemon(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace tarn::api
