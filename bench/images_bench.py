#!/usr/bin/env python3
"""bench/run images: request-to-started time of an image's instances under `tarn server`,
against podman itself in the same run (issue 23; the goal: tarn's image path <= 1.2x podman).

For N = 1 and N = 10 instances, each run `touch DIR/started-<i>; exec sleep 100000`, and the
event is "every instance's file exists" (the directory polled every 5 ms by a thread):
(a) tarn, image: an assembly of one component of N instances with a DOCKER artifact
    (localhost/tarn-base:latest), cpus 1 memory 64, DIR = its shared directory
    (<state-dir>/shared/<user>/<assembly>); the clock starts just before the POST. Then it
    is DELETEd and the bench waits until GET says 404, no process of it is left and
    `podman ps -a` shows none of its containers (label tarn.id).
(b) the peer, podman: `podman [--runtime runc] run -d --rm --init --network host --ulimit
    nofile=1024:1024 --ulimit nproc=4096:4096 -v DIR:DIR IMAGE sh -c '...'` N times one
    after another, the clock from just before the first; for N > 1 also N at once from N
    threads (tarn starts an assembly's instances concurrently, from its backend's pool of
    worker_threads, 4 by default). `--runtime runc` only where /sys/fs/cgroup is not cgroup2
    (tarn's own rule). Then `podman rm -f --time 0` of them.
(c) tarn, processes: the same assembly without the artifact (under tarn-shim).
Each is run once unmeasured to warm up, then --repeat times (interleaved); medians in ms
and the ratios are reported. Needs root and podman with the image present (scripts/images
base). Only talks to 127.0.0.1. Prints one flat JSON object on stdout; progress goes to
stderr.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

# The server, its API and the process checks are launch_bench's (same directory).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_bench  # noqa: E402
from launch_bench import USER, BenchError, ms, now  # noqa: E402

IMAGE = "localhost/tarn-base:latest"
TARN_COMMAND = "touch $TARN_SHARED_DIR/started-$TARN_INSTANCE; exec sleep 100000"
COMPONENT = "c"  # its instances are c-0, c-1, ...
NODES = [{"name": "node-1", "vcores": 4096, "memory_mb": 16777216, "gpus": 0}]
POLL_S = 0.005
LAUNCH_TIMEOUT_S = 120
DESTROY_TIMEOUT_S = 120


def log(msg):
    print(f"images_bench: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Files and podman


def _fs_type(path):
    r = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True)
    return r.stdout.strip()


def podman(*args, timeout=120, runtime=False):
    """Runs podman; `runtime` adds --runtime runc where tarn would (not on cgroup2)."""
    cmd = ["podman"]
    if runtime and PODMAN_RUNTIME:
        cmd += ["--runtime", PODMAN_RUNTIME]
    cmd += list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def tarn_containers(names):
    """Names of the engine's containers (any state) that tarn made for these assemblies."""
    r = podman("ps", "-a", "--filter", "label=tarn.id", "--format", "json", timeout=60)
    if r.returncode != 0:
        raise BenchError("podman ps: " + r.stderr.strip())
    prefixes = tuple(f"{USER}/{n}/" for n in names)
    found = []
    for c in json.loads(r.stdout or "[]"):
        if (c.get("Labels") or {}).get("tarn.id", "").startswith(prefixes):
            found.append((c.get("Names") or ["?"])[0])
    return found


class FileWatch:
    """A thread that lists `directory` every 5 ms and notes the first moment every wanted
    file is there. start() -> wait()."""

    def __init__(self, directory, files):
        self.directory = directory
        self.files = set(files)
        self.done_at = None
        self.seen = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            try:
                present = set(os.listdir(self.directory))
            except OSError:
                present = set()
            self.seen = self.files & present
            if self.seen == self.files:
                self.done_at = now()
                return
            time.sleep(POLL_S)

    def wait(self, timeout_s, check=None, check_every_s=1.0):
        """Until every file is there (returns the moment) or timeout_s; `check` is called
        every check_every_s (after the first) to fail early."""
        deadline = now() + timeout_s
        next_check = now() + check_every_s
        while True:
            self._thread.join(min(0.05, max(0.0, deadline - now())))
            if self.done_at is not None:
                return self.done_at
            if now() >= deadline:
                self._stop.set()
                raise BenchError(f"after {timeout_s} s only {len(self.seen)} of "
                                 f"{len(self.files)} files in {self.directory}")
            if check is not None and now() >= next_check:
                check()
                next_check = now() + check_every_s

    def cancel(self):
        self._stop.set()
        self._thread.join(1)


# ---------------------------------------------------------------------------------------
# The server


class Server(launch_bench.Server):
    """launch_bench's server (its own state dir, a bearer token, kept-alive requests), with
    image assemblies' launch (until their files exist) and destroy (until their containers
    are gone too)."""

    def __init__(self, tarn, keep_logs_dir):
        super().__init__(tarn, "images", keep_logs_dir, {"nodes": NODES})

    def shared_dir(self, name):
        return os.path.join(self.state_dir, "shared", USER, name)

    def launch(self, assembly, files):
        """POSTs the assembly and waits until every file is in its shared directory;
        returns ms from just before the POST."""
        name = assembly["name"]
        body = json.dumps(assembly).encode()
        watch = FileWatch(self.shared_dir(name), files).start()
        self.assemblies.append(name)

        def check():  # a failed start ends the wait (not before a second has passed)
            status, data = self.request("GET", self.service_path(name))
            if status != 200 or json.loads(data).get("state") in ("FAILED", "STOPPED",
                                                                    "SUCCEEDED"):
                raise BenchError(f"{name}: HTTP {status}: {data[:4000]!r}; server log: "
                                 + self.log_text()[-3000:])

        try:
            t0 = now()
            status, data = self.request("POST", "/app/v1/services", body)
            if status != 202:
                raise BenchError(f"POST {name}: HTTP {status}: {data[:2000]!r}")
            try:
                t1 = watch.wait(LAUNCH_TIMEOUT_S, check=check)
            except BenchError as e:
                _, data = self.request("GET", self.service_path(name))
                raise BenchError(f"{e}; GET {name}: {data[:4000]!r}; server log: "
                                 + self.log_text()[-3000:]) from None
        finally:
            watch.cancel()
        return ms(t1 - t0)

    def destroy(self, name, timeout_s=DESTROY_TIMEOUT_S):
        """launch_bench's destroy (DELETE, then until GET says 404, no process of it is left
        and its directories are gone), then until the engine holds none of its containers;
        returns ms from the DELETE to the last."""
        t0 = now()
        super().destroy(name, timeout_s)
        while tarn_containers([name]):
            if now() > t0 + timeout_s:
                raise BenchError(f"{name}: containers {tarn_containers([name])} still there "
                                 f"{timeout_s} s after DELETE; server log: "
                                 + self.log_text()[-2000:])
            time.sleep(0.02)
        return ms(now() - t0)

    def stop(self):
        """launch_bench's stop (never raises), then the containers a failed run left."""
        names = list(self.assemblies)
        super().stop()
        try:
            left = tarn_containers(names) if names else []
            if left:
                log(f"cleanup: removing {len(left)} leftover containers")
                podman("rm", "-f", "--time", "0", *left)
        except Exception as e:  # noqa: BLE001
            log(f"cleanup: containers: {e}")


# ---------------------------------------------------------------------------------------
# The assemblies and the peer


def assembly(name, n, image):
    c = {"name": COMPONENT, "number_of_containers": n, "launch_command": TARN_COMMAND,
         "resource": {"cpus": 1, "memory": "64"}}
    if image:
        c["artifact"] = {"type": "DOCKER", "id": IMAGE}
    return {"name": name, "version": "1.0", "components": [c]}


def tarn_files(n):
    return [f"started-{COMPONENT}-{i}" for i in range(n)]


class Peer:
    """podman run of the same image and command, N containers, into directories of its
    own under `base`."""

    def __init__(self, base, tag):
        self.base = base
        self.tag = tag
        self.count = 0
        self.names = []  # containers not yet removed

    def run(self, n, parallel):
        """Returns (ms to every file, ms of the removal)."""
        self.count += 1
        d = os.path.join(self.base, f"peer-{self.count}")
        os.makedirs(d)
        names = [f"{self.tag}-{self.count}-{i}" for i in range(1, n + 1)]
        self.names += names
        cmds = [["run", "-d", "--rm", "--init", "--name", names[i - 1],
                 "--label", f"tarn.bench={self.tag}", "--network", "host",
                 "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096",
                 "-v", f"{d}:{d}", IMAGE, "sh", "-c", f"touch {d}/started-{i}; exec sleep 100000"]
                for i in range(1, n + 1)]
        errors = []

        def one(args):
            r = podman(*args, timeout=LAUNCH_TIMEOUT_S, runtime=True)
            if r.returncode != 0:
                errors.append(f"podman {' '.join(args[:4])}...: {r.stderr.strip()[-1000:]}")

        watch = FileWatch(d, [f"started-{i}" for i in range(1, n + 1)]).start()
        try:
            t0 = now()
            if parallel:
                threads = [threading.Thread(target=one, args=(c,)) for c in cmds]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            else:
                for c in cmds:
                    one(c)
                    if errors:
                        break
            if errors:
                raise BenchError("; ".join(errors))
            t1 = watch.wait(LAUNCH_TIMEOUT_S)
        finally:
            watch.cancel()
        t2 = now()
        r = podman("rm", "-f", "--time", "0", *names, runtime=True)
        if r.returncode != 0:
            raise BenchError("podman rm: " + r.stderr.strip())
        t3 = now()
        self.names = [x for x in self.names if x not in names]
        shutil.rmtree(d, ignore_errors=True)
        return ms(t1 - t0), ms(t3 - t2)

    def cleanup(self):
        if self.names:
            log(f"cleanup: removing {len(self.names)} podman containers")
            podman("rm", "-f", "--time", "0", *self.names, runtime=True)
            self.names = []


# ---------------------------------------------------------------------------------------


PODMAN_RUNTIME = ""


def main():
    global PODMAN_RUNTIME
    ap = argparse.ArgumentParser()
    ap.add_argument("--tarn", default="build/release/bin/tarn")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--sizes", default="1,10", help="instance counts, comma-separated")
    ap.add_argument("--no-parallel", action="store_true",
                    help="skip podman's N-at-once peer")
    ap.add_argument("--deadline-s", type=int, default=1200, help="whole-run limit")
    ap.add_argument("--keep-logs", default="", help="copy the server log here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise BenchError("needs root (tarn server runs containers in namespaces/cgroups)")
    tarn = os.path.abspath(args.tarn)
    if not os.access(tarn, os.X_OK):
        raise BenchError(f"{tarn} is not an executable; run scripts/build")
    if shutil.which("podman") is None:
        raise BenchError("podman is not installed (scripts/setup installs it)")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    cgroup2 = _fs_type("/sys/fs/cgroup") == "cgroup2fs"
    PODMAN_RUNTIME = "" if cgroup2 or shutil.which("runc") is None else "runc"
    r = podman("image", "exists", IMAGE)
    if r.returncode != 0:
        raise BenchError(f"image {IMAGE} is not there; make it with scripts/images base")

    def on_signal(signum, _frame):
        raise BenchError(f"stopped by signal {signum}")

    def on_alarm(_signum, _frame):
        raise BenchError(f"the whole run took over {args.deadline_s} s")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.deadline_s)

    tag = f"ib{os.getpid()}"
    version = podman("--version").stdout.strip()
    out = {"benchmark": "images",
           "image": IMAGE,
           "podman": version,
           "podman_oci_runtime": PODMAN_RUNTIME or "default",
           "cgroup": "v2" if cgroup2 else "v1",
           "repeat": args.repeat,
           "poll_interval_ms": ms(POLL_S),
           "note": ("time from request to every instance's `touch DIR/started-<i>` (then "
                    "exec sleep 100000), medians in ms. tarn: POST of one component of N "
                    "instances (cpus 1, memory 64) to `tarn server` (TCP, bearer token), "
                    f"image = DOCKER artifact {IMAGE}, process = no artifact (tarn-shim); "
                    "DIR = its shared dir. podman: `podman "
                    + (f"--runtime {PODMAN_RUNTIME} " if PODMAN_RUNTIME else "")
                    + "run -d --rm --init --network host --ulimit nofile=1024:1024 "
                    "--ulimit nproc=4096:4096 -v DIR:DIR IMAGE sh -c ...` N times one after "
                    "another (parallel: N at once from N threads; tarn starts instances from a pool of "
                    "worker_threads, 4 by default). One unmeasured warm-up of "
                    "each first; runs interleaved.")}
    servers = []
    peer = None
    work = tempfile.mkdtemp(prefix="tarn-images-bench-peer-", dir="/tmp")
    try:
        s = Server(tarn, args.keep_logs)
        servers.append(s)
        peer = Peer(work, tag)
        runs = 0

        def tarn_run(n, image):
            nonlocal runs
            runs += 1
            name = f"{tag}-{'img' if image else 'proc'}-{n}-{runs}"
            t = s.launch(assembly(name, n, image), tarn_files(n))
            if image:  # they run in the engine, not on the host (after the clock stopped)
                held = tarn_containers([name])
                if len(held) != n:
                    raise BenchError(f"{name}: {n} files, but the engine holds {len(held)} "
                                     f"containers of it: {held}")
            d = s.destroy(name)
            return t, d

        # Warm-up: the server makes its engine at its first image; page cache; podman's.
        log("warm-up")
        tarn_run(1, True)
        peer.run(1, False)
        tarn_run(1, False)

        res = {}  # key -> list of ms
        for rep in range(args.repeat):
            for n in sizes:
                kinds = [("image", lambda n=n: tarn_run(n, True)),
                         ("podman", lambda n=n: peer.run(n, False))]
                if n > 1 and not args.no_parallel:
                    kinds.append(("podman_parallel", lambda n=n: peer.run(n, True)))
                kinds.append(("process", lambda n=n: tarn_run(n, False)))
                line = []
                for kind, fn in kinds:
                    t, d = fn()
                    res.setdefault((kind, n), []).append(t)
                    res.setdefault((kind + "_cleanup", n), []).append(d)
                    line.append(f"{kind} {t:.0f} ms (cleanup {d:.0f} ms)")
                log(f"run {rep + 1}/{args.repeat}, N={n}: " + ", ".join(line))

        def med(kind, n):
            return statistics.median(res[(kind, n)])

        for n in sizes:
            img = med("image", n)
            out[f"image_{n}_tarn_ms"] = img
            out[f"image_{n}_tarn_ms_all"] = ", ".join(f"{v:.0f}" for v in res[("image", n)])
            out[f"image_{n}_podman_ms"] = med("podman", n)
            out[f"image_{n}_podman_ms_all"] = ", ".join(f"{v:.0f}" for v in res[("podman", n)])
            out[f"image_{n}_ratio_vs_podman"] = img / med("podman", n)
            if ("podman_parallel", n) in res:
                out[f"image_{n}_podman_parallel_ms"] = med("podman_parallel", n)
                out[f"image_{n}_ratio_vs_podman_parallel"] = img / med("podman_parallel", n)
            out[f"process_{n}_tarn_ms"] = med("process", n)
            out[f"image_{n}_ratio_vs_process"] = img / med("process", n)
            out[f"image_{n}_tarn_destroy_ms"] = med("image_cleanup", n)
            out[f"image_{n}_podman_rm_ms"] = med("podman_cleanup", n)
            out[f"process_{n}_tarn_destroy_ms"] = med("process_cleanup", n)
        out["ratio_goal_vs_podman"] = 1.2
        engine = re.search(r"images run through ([^\n]*)", s.log_text())
        if engine:
            out["tarn_engine"] = engine.group(1).strip()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if peer is not None:
            try:
                peer.cleanup()
            except Exception as e:  # noqa: BLE001
                log(f"cleanup: {e}")
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=2, sort_keys=True))


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        log(f"FAILED: {e}")
        sys.exit(1)
