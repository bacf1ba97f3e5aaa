// Where tarn keeps things on this machine by default, for the server (its state and its Unix
// socket) and for the CLI (which must find that socket with nothing set). Reads $HOME and the
// process's euid; thread-safe.
#pragma once

#include <string>

namespace tarn {

// Root's server's socket: every local account's CLI looks here first.
inline constexpr char kRootSocketPath[] = "/run/tarn/tarn.sock";

// $HOME, else the account's home directory, else /tmp.
std::string HomeDir();

// /var/lib/tarn as root, else ~/.local/state/tarn.
std::string DefaultStateDir();

// kRootSocketPath as root, else STATE_DIR/tarn.sock (DefaultStateDir() when `state_dir` is
// empty).
std::string DefaultSocketPath(const std::string& state_dir = "");

}  // namespace tarn
