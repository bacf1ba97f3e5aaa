// tarn-shim: the supervisor of one container, like containerd-shim or conmon.
//
// The runtime has its fork server (below) fork each shim, or, without one, execs
// `tarn-shim SHIM_DIR READY_FD` in a session of its own (posix_spawn with
// POSIX_SPAWN_SETSID); started otherwise, the shim detaches (new session, its parent exits).
// It records its pid in SHIM_DIR/shim.pid, creates the container's cgroup and namespaces,
// and starts a small init (PID 1 of the container) that starts the workload, forwards
// SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to it (a PID 1 would otherwise ignore
// them) and reaps orphans. The shim writes "ok <pid>" or "error <why>" to READY_FD once the
// workload is started, copies its stdout/stderr to rotated files in SHIM_DIR, turns SIGTERM to
// itself into "stop": SIGTERM to the container, SIGKILL after the grace period, and when the
// container is gone writes SHIM_DIR/exit.json (exit code, signal, OOM kill from the cgroup's
// counters), removes the cgroup and exits. It outlives `tarn server`.
//
// `tarn-shim --foreground SHIM_DIR` is the same supervisor for a caller that already
// supervises and confines it (the Slurm backend runs it as `srun tarn-shim --foreground`
// inside a job): it does not detach, creates no cgroup (the job's cgroup limits the
// container, and Slurm reports OOM kills), leaves the workload's stdout/stderr on its own
// (the job's -o/-e files) and exits as the workload did (its code, or 128 + the signal),
// after writing exit.json. Namespaces, the resolver files and signal forwarding are as in
// the detached mode. `--env NAME=VALUE` sets variables known only where the job runs
// (TARN_IP, CUDA_VISIBLE_DEVICES), replacing the spec's.
//
// `tarn-shim --fork-server FD` is what ShimRuntime starts once and asks for each shim
// instead of exec'ing tarn-shim anew (as Python's multiprocessing forkserver or Android's
// zygote): a single-threaded process whose FD is a SOCK_SEQPACKET socket to the server.
// Each request is a shim directory with the ready pipe's write end attached (SCM_RIGHTS);
// it forks, the child becomes a session leader and runs the shim exactly as
// `tarn-shim SHIM_DIR READY_FD` would, and it answers "ok <pid>" or "error <why>". Its
// shims are reaped by the kernel (SIGCHLD ignored) and outlive it; it exits when the server
// closes the socket. A fork of this small process costs a third of an exec of tarn-shim.
#pragma once

#include <string>
#include <vector>

namespace tarn::shim {

// Runs the shim; returns the process exit status of the calling (pre-detach) process.
int RunShim(const std::string& shim_dir, int ready_fd);
// Runs the shim in the foreground (see above); returns (exits with) the workload's status.
// `env`: "NAME=VALUE" entries that replace (or add to) the spec's environment.
int RunShimForeground(const std::string& shim_dir, const std::vector<std::string>& env);
// Serves fork requests on `sock` (see above) until the other end closes; returns 0.
int RunForkServer(int sock);

}  // namespace tarn::shim
