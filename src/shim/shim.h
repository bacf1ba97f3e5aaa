// tarn-shim: the supervisor of one container, like containerd-shim or conmon.
//
// The runtime execs `tarn-shim SHIM_DIR READY_FD`. The shim detaches (new session, its
// parent exits), records its pid in SHIM_DIR/shim.pid, creates the container's cgroup and
// namespaces, and starts a small init (PID 1 of the container) that starts the workload,
// forwards SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to it (a PID 1 would otherwise ignore
// them) and reaps orphans. The shim writes "ok <pid>" or "error <why>" to READY_FD once the
// workload is started, copies its stdout/stderr to rotated files in SHIM_DIR, turns SIGTERM to
// itself into "stop": SIGTERM to the container, SIGKILL after the grace period, and when the
// container is gone writes SHIM_DIR/exit.json (exit code, signal, OOM kill from the cgroup's
// counters), removes the cgroup and exits. It outlives `tarn server`.
#pragma once

#include <string>

namespace tarn::shim {

// Runs the shim; returns the process exit status of the calling (pre-detach) process.
int RunShim(const std::string& shim_dir, int ready_fd);

}  // namespace tarn::shim
