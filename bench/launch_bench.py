#!/usr/bin/env python3
"""bench/run launch: launch-to-STABLE wall time of assemblies under `tarn server`.

(a) a 3-component, 10-instance sleeper assembly (a:3, b:3 after a, c:4 after b), repeated
    (default 5 times, median reported);
(b) a 1,000-instance assembly (one component, cpus 1 memory 16), once or twice;
each `sh -c "sleep 100000"` under tarn-shim, on a configured node inventory large enough
to hold it. The clock runs from just before the POST until a GET of the service says
STABLE. The GETs are blocking reads (`?index=N&wait=5s`, N the X-Tarn-Index of the answer
before: the server holds each until the status changes, as `tarn launch --wait` asks);
the 10-instance launch is also run, alternately, polling instead (a 10 ms sleep after each
answer), and the 1,000-instance launch once polling the small list of summaries (GET
/app/v1/services). Between runs the assembly is
destroyed and the bench waits until GET says 404 and no process with its TARN_ASSEMBLY is
left. Also reported: the server's peak RSS (VmHWM) and, as the peer in the same run, plain
posix_spawn (vfork+exec) of the same `sh -c "sleep 100000"` N times until every exec has
happened. Needs root. Only talks to 127.0.0.1. Prints one flat JSON object on stdout;
progress goes to stderr.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

USER = "bench"
COMMAND = "sleep 100000"
NODES = [{"name": "node-1", "vcores": 4096, "memory_mb": 16777216, "gpus": 0}]


class BenchError(Exception):
    pass


def log(msg):
    print(f"launch_bench: {msg}", file=sys.stderr, flush=True)


def now():
    return time.perf_counter()


def ms(seconds):
    return seconds * 1000.0


# ---------------------------------------------------------------------------------------
# Processes


def favordynmods_on():
    """Whether a cgroup or cgroup2 mount shows the kernel's favordynmods."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split(" - ", 1)
            if len(fields) == 2 and fields[1].split()[0] in ("cgroup", "cgroup2") and \
                    "favordynmods" in fields[1].split()[2].split(","):
                return True
    return False


def check_workloads(name, n):
    """After STABLE, n processes of assembly `name` run its command (not timed). An instance
    is STARTED once its shim has told the container's init to go, so the last workloads'
    exec (what shows TARN_ASSEMBLY in their environment) may still be under way: 5 s."""
    deadline = now() + 5
    while len(pids_of_assembly([name])) < n:
        if now() > deadline:
            raise BenchError(f"{name} STABLE but fewer than {n} processes of it found 5 s later: "
                             f"{len(pids_of_assembly([name]))}")
        time.sleep(0.005)


def pids_of_assembly(names):
    """Pids whose environment has TARN_ASSEMBLY=<one of names> (exact)."""
    wanted = {b"TARN_ASSEMBLY=" + n.encode() for n in names}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if wanted.intersection(env):
            found.append(int(entry))
    return found


def pids_with_cmdline(fragment):
    """Pids whose command line contains `fragment` (e.g. a state dir, for tarn-shim)."""
    frag = fragment.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if frag in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def vm_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:", "Threads:")):
                k, v = line.split(":", 1)
                out[k] = int(v.split()[0])
    return out


def memory_cgroup_base():
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if "memory" in controllers.split(","):
                return "/sys/fs/cgroup/memory" + path.rstrip("/")
            if controllers == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
                return "/sys/fs/cgroup" + path.rstrip("/")
    return None


# ---------------------------------------------------------------------------------------
# The server


class Server:
    def __init__(self, tarn, label, keep_logs_dir, config=None):
        self.dir = tempfile.mkdtemp(prefix=f"tarn-launch-bench-{label}-", dir="/tmp")
        os.chmod(self.dir, 0o711)
        self.state_dir = os.path.join(self.dir, "state")
        self.config = os.path.join(self.dir, "config.json")
        self.log_path = os.path.join(self.dir, "server.log")
        self.keep_logs_dir = keep_logs_dir
        self.assemblies = []  # every name ever posted, for cleanup
        with open(self.config, "w") as f:
            json.dump(config if config is not None else {"nodes": NODES}, f)
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [tarn, "server", "--listen", "127.0.0.1:0", "--dns", "127.0.0.1:0",
             "--state-dir", self.state_dir,
             "--config", self.config, "--socket", os.path.join(self.dir, "tarn.sock")],
            stdout=self.log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.port = None
        self.token = ""
        self.conn = None
        self.last_index = 0
        self.shutdown_ms = None
        try:
            deadline = now() + 20
            while now() < deadline:
                if self.proc.poll() is not None:
                    raise BenchError(f"tarn server exited with {self.proc.returncode} at "
                                     "start: " + self.log_text())
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log_text())
                if m:
                    self.port = int(m.group(1))
                    break
                time.sleep(0.01)
            if self.port is None:
                raise BenchError("tarn server did not say where it listens within 20 s: "
                                 + self.log_text())
            # USER's bearer token for the TCP API, made by root acting as USER over the socket.
            r = subprocess.run([tarn, "token", "create", "--name", f"bench-{os.getpid()}",
                                "--socket", os.path.join(self.dir, "tarn.sock")],
                               env=dict(os.environ, TARN_USER=USER), capture_output=True,
                               text=True, timeout=30)
            if r.returncode != 0 or not r.stdout.startswith("tarn_"):
                raise BenchError("tarn token create failed: " + r.stderr)
            self.token = r.stdout.strip()
        except BaseException:
            self.stop()
            raise

    def log_text(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except OSError:
            return ""

    def request(self, method, path, body=None, timeout=30):
        """One request on a kept-alive connection; returns (status, bytes)."""
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            try:
                headers = {"Authorization": "Bearer " + self.token}
                if body is not None:
                    headers["Content-Type"] = "application/json"
                self.conn.request(method, path, body=body, headers=headers)
                r = self.conn.getresponse()
                data = r.read()
                self.last_index = int(r.getheader("X-Tarn-Index", "0") or "0")
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status, data
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                if attempt == 1 or self.proc.poll() is not None:
                    raise BenchError(f"{method} {path}: {e!r}; server log: "
                                     + self.log_text()[-2000:])
        raise AssertionError("unreachable")

    def service_path(self, name):
        return f"/app/v1/services/{name}"

    def launch(self, assembly, timeout_s, mode="poll"):
        """POSTs the assembly, then GETs it until STABLE: "watch" (each GET held until the
        status changes past the index of the answer before), "poll" (a 10 ms sleep after
        each answer) or "poll_list" (the summaries, polled); returns (post_ms, stable_ms,
        GETs, bytes of the last GET body)."""
        poll_list = mode == "poll_list"
        name = assembly["name"]
        body = json.dumps(assembly).encode()
        self.assemblies.append(name)
        t0 = now()
        status, data = self.request("POST", "/app/v1/services", body)
        t_post = now()
        if status != 202:
            raise BenchError(f"POST {name}: HTTP {status}: {data[:2000]!r}")
        polls = 0
        deadline = t0 + timeout_s
        last = None
        index = 0
        while True:
            if poll_list:  # the summaries of the user's assemblies: small
                status, data = self.request("GET", "/app/v1/services")
            elif mode == "watch" and index > 0:
                status, data = self.request(
                    "GET", self.service_path(name) + f"?index={index}&wait=5s")
            else:
                status, data = self.request("GET", self.service_path(name))
            index = self.last_index
            polls += 1
            if status != 200:
                raise BenchError(f"GET {name}: HTTP {status}: {data[:2000]!r}")
            if poll_list:
                mine = [a for a in json.loads(data) if a.get("name") == name]
                if len(mine) != 1:
                    raise BenchError(f"GET /app/v1/services does not list {name}: {data[:2000]!r}")
                state = mine[0]["state"]
            else:
                state = json.loads(data)["state"]
            if state == "STABLE":
                t1 = now()
                return ms(t_post - t0), ms(t1 - t0), polls, len(data)
            if state in ("FAILED", "STOPPED", "SUCCEEDED"):
                raise BenchError(f"{name} went {state}: {data[:2000]!r}")
            last = data
            if now() > deadline:
                raise BenchError(f"{name} not STABLE after {timeout_s} s; last answer: "
                                 f"{(last or b'')[:2000]!r}")
            if mode != "watch":
                time.sleep(0.01)
            elif index == 0:
                raise BenchError(f"GET {name}: no X-Tarn-Index in the answer")

    def destroy(self, name, timeout_s):
        """DELETE, then wait until GET says 404 and no process of it remains (returns ms to
        then), and then until its directories under the state dir are gone too (so that the
        next run does not overlap this one's cleanup); returns (gone_ms, cleaned_ms)."""
        t0 = now()
        status, data = self.request("DELETE", self.service_path(name))
        if status != 200:
            raise BenchError(f"DELETE {name}: HTTP {status}: {data[:2000]!r}")
        deadline = t0 + timeout_s
        gone_404 = False
        while True:
            if not gone_404:
                status, data = self.request("GET", self.service_path(name))
                if status == 404:
                    gone_404 = True
                elif status != 200:
                    raise BenchError(f"GET {name} after DELETE: HTTP {status}: {data[:500]!r}")
            if gone_404 and not pids_of_assembly([name]):
                t1 = now()
                self.assemblies.remove(name)
                break
            if now() > deadline:
                raise BenchError(f"{name}: after DELETE, still 404={gone_404} and "
                                 f"{len(pids_of_assembly([name]))} processes after {timeout_s} s")
            time.sleep(0.01)
        dirs = [os.path.join(self.state_dir, d, USER, name) for d in ("shims", "containers")]
        while any(os.path.exists(d) for d in dirs):
            if now() > deadline:
                raise BenchError(f"{name}: its directories {dirs} still there {timeout_s} s "
                                 "after DELETE")
            time.sleep(0.01)
        return ms(t1 - t0), ms(now() - t0)

    def rss(self):
        return vm_status(self.proc.pid)

    def stop(self):
        """Best effort, never raises: destroys what is left, stops the server (SIGTERM),
        then kills anything of ours still running and removes the temporary directory."""
        names = list(self.assemblies)
        if self.proc.poll() is None:
            for name in names:
                try:
                    self.destroy(name, 60)
                except Exception as e:  # noqa: BLE001
                    log(f"cleanup: destroying {name}: {e}")
            # Close our kept-alive connection first: the server's shutdown waits for open
            # connections (up to its 30 s read timeout).
            if self.conn is not None:
                self.conn.close()
                self.conn = None
            t0 = now()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
                self.shutdown_ms = ms(now() - t0)
            except subprocess.TimeoutExpired:
                log("cleanup: tarn server ignored SIGTERM for 40 s; killing it")
                self.proc.kill()
                self.proc.wait(timeout=20)
        if self.conn is not None:
            self.conn.close()
        self.log_file.close()
        # Anything left: the instances (by their environment) and shims (by state dir).
        leftovers = set(pids_of_assembly(names)) | set(pids_with_cmdline(self.state_dir))
        if leftovers:
            log(f"cleanup: killing {len(leftovers)} leftover processes")
            for pid in leftovers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.5)
        base = memory_cgroup_base()
        if base:
            for name in names:
                d = os.path.join(base, "tarn", USER, name)
                if os.path.isdir(d):
                    subprocess.run(["find", d, "-depth", "-type", "d", "-exec", "rmdir", "{}", ";"],
                                   stderr=subprocess.DEVNULL, check=False)
        if self.keep_logs_dir:
            try:
                shutil.copy(self.log_path, self.keep_logs_dir)
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# Assemblies and the peer


def component(name, n, deps=(), memory="16"):
    c = {"name": name, "number_of_containers": n, "launch_command": COMMAND,
         "resource": {"cpus": 1, "memory": memory}}
    if deps:
        c["dependencies"] = list(deps)
    return c


def assembly_10(name):
    return {"name": name, "version": "1.0",
            "components": [component("a", 3), component("b", 3, ["a"]),
                           component("c", 4, ["b"])]}


def assembly_n(name, n):
    return {"name": name, "version": "1.0", "components": [component("sleeper", n)]}


def peer_spawn(n):
    """posix_spawn (vfork+exec; returns once exec has happened) of sh -c "sleep 100000",
    each in its own process group, n times; returns ms, then kills and reaps them."""
    env = {"PATH": "/usr/bin:/bin"}
    pids = []
    try:
        t0 = now()
        for _ in range(n):
            pids.append(os.posix_spawn("/bin/sh", ["sh", "-c", COMMAND], env, setpgroup=0))
        t1 = now()
    finally:
        for p in pids:
            try:
                os.killpg(p, signal.SIGKILL)
            except OSError:
                pass
        for p in pids:
            os.waitpid(p, 0)
    return ms(t1 - t0)


def check_cgroups_gone(names):
    base = memory_cgroup_base()
    if not base:
        return []
    return [n for n in names if os.path.isdir(os.path.join(base, "tarn", USER, n))]


# ---------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tarn", default="build/release/bin/tarn")
    ap.add_argument("--small-reps", type=int, default=5)
    ap.add_argument("--big", type=int, default=1000)
    ap.add_argument("--big-reps", type=int, default=2)
    ap.add_argument("--deadline-s", type=int, default=1500, help="whole-run limit")
    ap.add_argument("--keep-logs", default="", help="copy the server logs here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise BenchError("needs root (tarn server runs containers in namespaces/cgroups)")
    tarn = os.path.abspath(args.tarn)
    if not os.access(tarn, os.X_OK):
        raise BenchError(f"{tarn} is not an executable; run scripts/build")

    def on_signal(signum, _frame):
        raise BenchError(f"stopped by signal {signum}")

    def on_alarm(_signum, _frame):
        raise BenchError(f"the whole run took over {args.deadline_s} s")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.deadline_s)

    tag = f"lb{os.getpid()}"
    out = {"benchmark": "launch",
           "command": COMMAND,
           "peer": "posix_spawn (vfork+exec) of sh -c \"sleep 100000\" N times in one process, "
                   "each in its own process group, until every exec has happened",
           "poll_interval_ms": 10,
           "status_reads": "blocking GETs (?index=N&wait=5s); polled ones alternately for "
                           "the 10-instance launch",
           # the kernel's favordynmods (runtime/cgroup_dynmods.h), as a mount shows it
           "favordynmods": favordynmods_on()}
    servers = []
    try:
        # (a) 10 instances, 3 components in a dependency chain.
        s = Server(tarn, "10", args.keep_logs)
        servers.append(s)
        stable, polled, post, destroy, cleaned = [], [], [], [], []
        # One launch first, not counted: the server's first start of a shim, its first
        # SQLite writes and GETs pay for what later ones find warm.
        s.launch(assembly_10(f"{tag}-ten-warm-up"), timeout_s=60)
        s.destroy(f"{tag}-ten-warm-up", timeout_s=60)
        for i in range(args.small_reps):
            # Alternately, in turn first: this machine's speed drifts.
            for mode in (("watch", "poll") if i % 2 == 0 else ("poll", "watch")):
                name = f"{tag}-ten-{i}-{mode}"
                p_ms, s_ms, polls, size = s.launch(assembly_10(name), timeout_s=60, mode=mode)
                check_workloads(name, 10)
                d_ms, c_ms = s.destroy(name, timeout_s=60)
                log(f"10 instances ({mode}): STABLE after {s_ms:.1f} ms (POST {p_ms:.1f} ms, "
                    f"{polls} GETs); DELETE to 404 and no process {d_ms:.1f} ms, "
                    f"to directories gone {c_ms:.1f} ms")
                if mode == "poll":
                    polled.append(s_ms)
                    continue
                stable.append(s_ms)
                post.append(p_ms)
                destroy.append(d_ms)
                cleaned.append(c_ms)
        rss10 = s.rss()
        peer10 = [peer_spawn(10) for _ in range(args.small_reps)]
        out["launch_10_instances_stable_ms_median"] = statistics.median(stable)
        out["launch_10_instances_stable_ms_all"] = ", ".join(f"{v:.1f}" for v in stable)
        out["launch_10_instances_stable_ms_median_polling"] = statistics.median(polled)
        out["launch_10_instances_stable_ms_all_polling"] = ", ".join(f"{v:.1f}" for v in polled)
        out["launch_10_instances_post_ms_median"] = statistics.median(post)
        out["destroy_10_instances_gone_ms_median"] = statistics.median(destroy)
        out["destroy_10_instances_dirs_removed_ms_median"] = statistics.median(cleaned)
        out["peer_fork_exec_10_ms_median"] = statistics.median(peer10)
        out["ratio_launch_10_tarn_to_peer"] = (out["launch_10_instances_stable_ms_median"]
                                               / out["peer_fork_exec_10_ms_median"])
        out["server_peak_rss_mib_10_instances"] = rss10["VmHWM"] / 1024.0
        s.stop()
        out["server_sigterm_exit_ms_10_instances"] = s.shutdown_ms
        servers.remove(s)

        # (b) the big one, on a fresh server and state dir.
        n = args.big
        s = Server(tarn, str(n), args.keep_logs)
        servers.append(s)
        stable, post, destroy, cleaned, body = [], [], [], [], 0
        threads_max = 0
        for i in range(args.big_reps):
            name = f"{tag}-big-{i}"
            p_ms, s_ms, polls, body = s.launch(assembly_n(name, n), timeout_s=600, mode="watch")
            check_workloads(name, n)
            threads_max = max(threads_max, s.rss()["Threads"])
            d_ms, c_ms = s.destroy(name, timeout_s=300)
            left = check_cgroups_gone([name])
            if left:
                log(f"WARNING: cgroup of {name} still there after destroy")
                out["cgroups_left_after_destroy"] = True
            log(f"{n} instances: STABLE after {s_ms:.1f} ms (POST {p_ms:.1f} ms, {polls} GETs, "
                f"GET body {body} bytes); DELETE to 404 and no process {d_ms:.1f} ms, "
                f"to directories gone {c_ms:.1f} ms")
            stable.append(s_ms)
            post.append(p_ms)
            destroy.append(d_ms)
            cleaned.append(c_ms)
        # Once more, polling the small list of summaries instead of the 1,000-instance
        # service: shows what the status GETs themselves cost the launch.
        name = f"{tag}-big-listpoll"
        _, list_ms, polls, _ = s.launch(assembly_n(name, n), timeout_s=600, mode="poll_list")
        check_workloads(name, n)
        s.destroy(name, timeout_s=300)
        log(f"{n} instances, polling GET /app/v1/services: STABLE after {list_ms:.1f} ms "
            f"({polls} polls)")
        rssn = s.rss()
        peern = [peer_spawn(n) for _ in range(args.big_reps)]
        key = f"{n}_instances"
        out[f"launch_{key}_stable_ms"] = statistics.median(stable)
        out[f"launch_{key}_stable_ms_all"] = ", ".join(f"{v:.0f}" for v in stable)
        out[f"launch_{key}_stable_ms_polling_list"] = list_ms
        out[f"launch_{key}_post_ms"] = statistics.median(post)
        out[f"launch_{key}_get_body_bytes"] = body
        out[f"destroy_{key}_gone_ms"] = statistics.median(destroy)
        out[f"destroy_{key}_dirs_removed_ms"] = statistics.median(cleaned)
        out[f"peer_fork_exec_{n}_ms"] = statistics.median(peern)
        out[f"ratio_launch_{n}_tarn_to_peer"] = (out[f"launch_{key}_stable_ms"]
                                                 / out[f"peer_fork_exec_{n}_ms"])
        out[f"server_peak_rss_mib_{key}"] = rssn["VmHWM"] / 1024.0
        out[f"server_rss_mib_after_{key}_destroyed"] = rssn["VmRSS"] / 1024.0
        out[f"server_threads_max_{key}"] = threads_max
        out["server_peak_rss_mib"] = max(out["server_peak_rss_mib_10_instances"],
                                         out[f"server_peak_rss_mib_{key}"])
        out["server_peak_rss_goal_mib"] = 64
        s.stop()
        out[f"server_sigterm_exit_ms_{key}"] = s.shutdown_ms
        servers.remove(s)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for s in servers:
            s.stop()
    print(json.dumps(out, indent=2, sort_keys=True))


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        log(f"FAILED: {e}")
        sys.exit(1)
