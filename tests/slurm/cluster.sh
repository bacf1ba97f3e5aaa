#!/usr/bin/env bash
# A real, throw-away Slurm 22.05 cluster on this one machine, for the slurm backend's tests:
# slurmctld plus NODES slurmd "nodes" (`slurmd -N nodeN`, one port each), node N reachable at
# its own address 127.0.1.N, each node with GPUS_PER_NODE fake GPUs (character devices with
# NVIDIA's major 195 under DIR/dev, declared as GRES). Authentication is auth/none +
# cred/none, so no munge daemon runs.
#
#   tests/slurm/cluster.sh start DIR [NODES] [GPUS_PER_NODE]   (defaults: 2 nodes, 2 GPUs each)
#   tests/slurm/cluster.sh stop DIR
#
# `start` writes everything under DIR (slurm.conf, gres.conf, cgroup.conf, state and spool
# directories, logs, pid files), waits until sinfo shows every node idle, and prints
#   export SLURM_CONF=DIR/slurm.conf
# on stdout as its last line (client commands need it); progress and errors go to stderr.
# `stop` kills what `start` started, found only through DIR: the daemons by the pids under
# DIR/run, then the job processes of slurmstepds whose environment names DIR. It is
# idempotent. A failed `start` stops whatever it had started.
#
# Environment:
#   TARN_SLURM_PORT           slurmctld's port; node N listens on TARN_SLURM_PORT+N. Default:
#                             derived from DIR (20000-31999), then moved up until NODES+1
#                             ports are free, so clusters of parallel tests do not collide.
#   TARN_SLURM_START_TIMEOUT  seconds to wait for the nodes to become idle (default 60).
#   TARN_SLURM_NODE_MEMORY_MB each node's RealMemory (default 4096); only a number Slurm
#                             schedules by: the machine's memory is not divided.
#
# Run as root on Debian 12 (packages: slurm-wlm; scripts/setup installs it). PID 1 need not be
# systemd; cgroup v1 controllers must be mounted under /sys/fs/cgroup.
set -euo pipefail

usage() {
  echo "usage: $0 start DIR [NODES] [GPUS_PER_NODE] | stop DIR" >&2
  exit 2
}

log() { echo "cluster.sh: $*" >&2; }

# The slurmd/slurmctld/client binaries and the plugins this configuration names.
check_packages() {
  local missing=() p
  for p in slurmctld slurmd slurm-client slurm-wlm-basic-plugins; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  if ((${#missing[@]} > 0)); then
    log "missing Debian packages: ${missing[*]} (run scripts/setup as root, or" \
      "apt-get install -y slurm-wlm)"
    exit 1
  fi
}

# pid_alive PIDFILE -> true when the file names a live process.
pid_alive() {
  local pid
  [[ -s "$1" ]] || return 1
  pid=$(<"$1")
  [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid"
}

# port_free PORT -> true when no TCP socket listens on PORT, on any address (state 0A is
# LISTEN in /proc/net/tcp*; read there so that iproute2's ss is not needed).
port_free() {
  ! grep -qE "^ *[0-9]+: [0-9A-F]+:$(printf '%04X' "$1") [0-9A-F]+:[0-9A-F]+ 0A " \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# Picks slurmctld's port: TARN_SLURM_PORT, or a port derived from DIR's path, moved up in
# steps of 10 until it and the NODES ports after it are free. Derived ports stay in
# 20000-31999, below Linux's ephemeral range (32768-60999), where srun's own ports come from.
pick_port() {
  local dir=$1 nodes=$2 port i ok
  if [[ -n "${TARN_SLURM_PORT:-}" ]]; then
    for ((i = 0; i <= nodes; i++)); do
      port_free $((TARN_SLURM_PORT + i)) ||
        { log "TARN_SLURM_PORT=$TARN_SLURM_PORT: port $((TARN_SLURM_PORT + i)) is in use"; exit 1; }
    done
    echo "$TARN_SLURM_PORT"
    return
  fi
  port=$((20000 + $(printf '%s' "$dir" | cksum | cut -d' ' -f1) % 1200 * 10))
  for _ in $(seq 100); do
    ok=1
    for ((i = 0; i <= nodes; i++)); do
      port_free $((port + i)) || { ok=0; break; }
    done
    ((ok)) && { echo "$port"; return; }
    port=$((port + 10))
    ((port + nodes < 32000)) || port=20000
  done
  log "no $((nodes + 1)) consecutive free ports found between 20000 and 32000"
  exit 1
}

# Writes slurm.conf, gres.conf and cgroup.conf into DIR and makes the fake GPU devices.
write_config() {
  local dir=$1 nodes=$2 gpus=$3 port=$4 host n g minor first_job
  local memory=${TARN_SLURM_NODE_MEMORY_MB:-4096}
  host=$(hostname -s)
  # Job ids differ between clusters started in parallel: the cgroup directories of a job
  # (/sys/fs/cgroup/*/slurm_nodeN/uid_U/job_ID) are named by node and job only, so two
  # clusters running job 1 on their "node1" would share them.
  first_job=$((port % 20000 * 3000 + 1))

  mkdir -p "$dir"/{state,log,run,dev}
  for ((n = 1; n <= nodes; n++)); do mkdir -p "$dir/spool/node$n"; done

  cat >"$dir/slurm.conf" <<EOF
# Written by tests/slurm/cluster.sh for a test cluster on this machine; do not edit.
ClusterName=tarn
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
# Test-only authentication: no munge daemon to start and stop.
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
FirstJobId=$first_job
MpiDefault=none
# Real process tracking and limits from cgroup v1 (see cgroup.conf): memory is enforced
# (--mem), GPUs are isolated by the devices controller. No task/affinity: the nodes
# advertise more CPUs than the machine has.
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
JobAcctGatherType=jobacct_gather/cgroup
JobAcctGatherFrequency=5
AccountingStorageType=accounting_storage/none
# Final job states for the backend (no slurmdbd, so no sacct): one line per ended job.
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
# Heterogeneous jobs are started only by the backfill scheduler: run it every second.
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,bf_resolution=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# A job without --mem gets 256 MB per CPU, not (the default) the whole node's memory.
DefMemPerCPU=256
GresTypes=gpu
# Trust the configured node sizes, not the machine's: every node is CPUs=4 and
# RealMemory=$memory (TARN_SLURM_NODE_MEMORY_MB; 4096 by default).
SlurmdParameters=config_overrides
ReturnToService=2
# tarn restarts instances by its own policy: a job whose node fails ends as NODE_FAIL instead
# of being requeued by Slurm (the default) as PENDING (BeginTime) with the same job id.
JobRequeue=0
# Fast timers, so tests see node failures, kills and ends within seconds.
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=5
TCPTimeout=2
InactiveLimit=0
KillWait=2
# A job stays in squeue for 60-120 s after it ends (slurmctld purges once a minute), long
# enough for a poller, or a restarted tarn server, to read its final state there.
MinJobAge=60
MailProg=/bin/true
EOF
  for ((n = 1; n <= nodes; n++)); do
    echo "NodeName=node$n NodeHostname=$host NodeAddr=127.0.1.$n Port=$((port + n))" \
      "CPUs=4 RealMemory=$memory Gres=gpu:$gpus State=UNKNOWN" >>"$dir/slurm.conf"
  done
  echo "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$dir/slurm.conf"

  # GPUs: node N owns the minors (N-1)*GPUS .. N*GPUS-1, so each node's device cgroup
  # differs and a job on node 2 cannot be given node 1's files.
  echo "# Written by tests/slurm/cluster.sh: fake GPUs (major 195) per node." >"$dir/gres.conf"
  echo "AutoDetect=off" >>"$dir/gres.conf"
  for ((n = 1; n <= nodes; n++)); do
    for ((g = 0; g < gpus; g++)); do
      minor=$(((n - 1) * gpus + g))
      [[ -e "$dir/dev/nvidia$minor" ]] || mknod "$dir/dev/nvidia$minor" c 195 "$minor"
      echo "NodeName=node$n Name=gpu File=$dir/dev/nvidia$minor" >>"$dir/gres.conf"
    done
  done

  cat >"$dir/cgroup.conf" <<EOF
# Written by tests/slurm/cluster.sh. cgroup v1; no cpuset binding (the nodes advertise
# CPUs the machine lacks); memory limited to --mem; devices limited to the job's GPUs.
CgroupPlugin=cgroup/v1
CgroupAutomount=no
ConstrainCores=no
ConstrainRAMSpace=yes
ConstrainSwapSpace=no
ConstrainDevices=yes
EOF
}

# Starts one daemon in the foreground mode (-D) as its own session and records its pid in
# DIR/run/NAME.pid (the daemon writes the same pid there itself).
start_daemon() {
  local dir=$1 name=$2
  shift 2
  setsid "$@" -D >"$dir/log/$name.out" 2>&1 </dev/null &
  echo $! >"$dir/run/$name.pid"
}

# wait_idle DIR NODES TIMEOUT: until sinfo lists NODES nodes, all idle.
wait_idle() {
  local dir=$1 nodes=$2 timeout=$3 states="" n
  local deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    pid_alive "$dir/run/slurmctld.pid" || {
      log "slurmctld exited; read $dir/log/slurmctld.out and $dir/log/slurmctld.log"
      return 1
    }
    for ((n = 1; n <= nodes; n++)); do
      pid_alive "$dir/run/slurmd-node$n.pid" || {
        log "slurmd of node$n exited; read $dir/log/slurmd-node$n.out and slurmd-node$n.log"
        return 1
      }
    done
    states=$(SLURM_CONF=$dir/slurm.conf timeout 5 sinfo -h -N -o '%N=%t' 2>/dev/null | sort -u |
      tr '\n' ' ' || true)
    if [[ $(grep -o '=idle' <<<"$states" | wc -l) -eq $nodes ]]; then
      return 0
    fi
    sleep 0.5
  done
  log "nodes not all idle after ${timeout} s (sinfo: ${states:-no answer}); read" \
    "$dir/log/slurmctld.log and $dir/log/slurmd-nodeN.log / slurmd-nodeN.out"
  return 1
}

start() {
  local dir=$1 nodes=$2 gpus=$3 port n f
  [[ "$nodes" =~ ^[1-9][0-9]?$ && "$nodes" -le 99 ]] || { log "NODES must be 1..99"; exit 2; }
  [[ "$gpus" =~ ^[0-9]+$ ]] || { log "GPUS_PER_NODE must be a number"; exit 2; }
  [[ "${TARN_SLURM_NODE_MEMORY_MB:-4096}" =~ ^[1-9][0-9]{2,6}$ ]] ||
    { log "TARN_SLURM_NODE_MEMORY_MB must be a number of MiB (100..9999999)"; exit 2; }
  [[ $(id -u) -eq 0 ]] || { log "must run as root (slurmd, cgroups, mknod)"; exit 1; }
  check_packages
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  for f in "$dir"/run/*.pid; do
    if [[ -e "$f" ]] && pid_alive "$f"; then
      log "a cluster is already running in $dir ($(basename "$f" .pid) pid $(<"$f"));" \
        "run '$0 stop $dir' first"
      exit 1
    fi
  done
  # A clean slate: no state, logs or job records of an earlier cluster in DIR.
  rm -rf "$dir"/{state,spool,log,run,slurm.conf,gres.conf,cgroup.conf}

  port=$(pick_port "$dir" "$nodes")
  write_config "$dir" "$nodes" "$gpus" "$port"
  trap 'log "start failed; stopping what was started"; stop "$dir" >/dev/null 2>&1 || true' ERR
  trap 'stop "$dir" >/dev/null 2>&1 || true; exit 130' INT TERM

  log "slurmctld on 127.0.0.1:$port, $nodes nodes (127.0.1.1..$nodes, ports $((port + 1))..$((port + nodes))), $gpus GPUs each, in $dir"
  # -i: ignore state of an earlier run (there is none after the clean slate above).
  start_daemon "$dir" slurmctld slurmctld -f "$dir/slurm.conf" -i
  for ((n = 1; n <= nodes; n++)); do
    start_daemon "$dir" "slurmd-node$n" slurmd -f "$dir/slurm.conf" -N "node$n"
  done
  if ! wait_idle "$dir" "$nodes" "${TARN_SLURM_START_TIMEOUT:-60}"; then
    stop "$dir" >/dev/null 2>&1 || true
    exit 1
  fi
  trap - ERR INT TERM
  echo "export SLURM_CONF=$dir/slurm.conf"
}

# alive PID -> true while PID runs (a zombie, waiting for PID 1 to reap it, counts as dead).
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ "${stat##*) }" != Z* ]]
}

# kill_pids SIGNAL PID...: sends SIGNAL, then waits up to 5 s; SIGKILLs what is left.
kill_pids() {
  local sig=$1 pid left
  shift
  (($# > 0)) || return 0
  kill "-$sig" "$@" 2>/dev/null || true
  for _ in $(seq 50); do
    left=()
    for pid in "$@"; do alive "$pid" && left+=("$pid"); done
    ((${#left[@]} == 0)) && return 0
    sleep 0.1
  done
  log "pids ${left[*]} ignored SIG$sig for 5 s; sending SIGKILL"
  kill -KILL "${left[@]}" 2>/dev/null || true
}

# The slurmstepds of this DIR's slurmds: a slurmstepd overwrites its environment with its
# process title, but it keeps SlurmdLogFile (DIR/log/slurmd-nodeN.log) open, which names DIR.
stepd_pids() {
  local dir=$1 pid
  for pid in $(pgrep -x slurmstepd || true); do
    find "/proc/$pid/fd" -lname "$dir/log/*" 2>/dev/null | grep -q . && echo "$pid"
  done
  return 0
}

# The freezer cgroups of those slurmstepds' jobs, as /slurm_nodeN/uid_U/job_J.
job_cgroups() {
  local pid
  for pid in "$@"; do
    sed -n 's|^[0-9]*:freezer:\(/slurm_[^/]*/uid_[0-9]*/job_[0-9]*\).*|\1|p' \
      "/proc/$pid/cgroup" 2>/dev/null || true
  done | sort -u
}

stop() {
  local dir=$1 f cg pids=() cgroups=()
  [[ -d "$dir" ]] || return 0
  dir=$(cd "$dir" && pwd)
  # Jobs first, while their slurmstepds still tell which cgroups are ours: every process in a
  # job's cgroup (the tasks, including ones that double-forked), and the slurmstepds.
  mapfile -t pids < <(stepd_pids "$dir")
  mapfile -t cgroups < <(job_cgroups "${pids[@]}")
  for cg in "${cgroups[@]}"; do
    [[ -d "/sys/fs/cgroup/freezer$cg" ]] || continue
    mapfile -t -O "${#pids[@]}" pids < <(find "/sys/fs/cgroup/freezer$cg" -name cgroup.procs \
      -exec cat {} + 2>/dev/null)
  done
  mapfile -t pids < <(printf '%s\n' "${pids[@]}" | sort -u | grep .)
  kill_pids KILL "${pids[@]}"
  # A killed slurmstepd leaves its job's cgroups behind in every controller.
  for cg in "${cgroups[@]}"; do
    find /sys/fs/cgroup/*"$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  # The daemons, all at once: SIGTERM, SIGKILL after 5 s (a slurmd whose controller is gone
  # ignores SIGTERM; slurmctld waits up to MessageTimeout for nodes that are gone).
  pids=()
  for f in "$dir"/run/*.pid; do
    [[ -e "$f" ]] && pid_alive "$f" && pids+=("$(<"$f")")
  done
  kill_pids TERM "${pids[@]}"
  # Slurm writes its own pid files to the same paths; the pids are dead now.
  rm -f "$dir"/run/*.pid
}

(($# >= 2)) || usage
case $1 in
  start) (($# <= 4)) || usage; start "$2" "${3:-2}" "${4:-2}" ;;
  stop) (($# == 2)) || usage; stop "$2" ;;
  *) usage ;;
esac
