#!/usr/bin/env python3
"""bench/run slurm: the slurm backend against Slurm itself and against the local backend, on a
throw-away three-node Slurm (tests/slurm/cluster.sh: 4 CPUs per node, on this machine).

(a) chain: the 10-instance sleeper assembly of bench/run launch (a:3, b:3 after a, c:4
    after b; 1 CPU and 16 MiB each), POST until GET says STABLE, on a `tarn server` with
    the slurm backend and on one with the local backend. The peer is Slurm doing the same
    by itself: 10 `sbatch --wrap "sleep 100000"` submitted back to back, b's with
    `--dependency=after:<a's ids>` and c's after b's (Slurm's "start after these started"),
    timed until squeue shows all 10 RUNNING.
(b) flat: one component of 10 instances against 10 plain `sbatch --wrap` (no
    dependencies), until all RUNNING: the jobs/s tarn sustains against sbatch used
    directly.
(c) fmnist: examples/fashion-mnist/assembly.json (2 ps, 2 workers, 2 serving replicas; one
    epoch) on the slurm backend and on the local backend: ms from POST until every training
    instance was READY, and until both replicas serve an exported version (train, export,
    load). The same processes do the same work on the same two cores either way, so the
    ratio is what Slurm adds: submission, scheduling, the squeue poll, srun.
Each repeated (default 3 times, medians). The slurm backend reads squeue every
poll_interval_ms (100 here; the default is 500), so its figures include up to that much
per dependency level. Needs root and slurm-wlm. Talks to 127.0.0.0/8 only. Prints one flat
JSON object; progress on stderr.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_bench as lb  # noqa: E402  (the Server and the assemblies of bench/run launch)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLL_MS = 100


def log(msg):
    print(f"slurm_bench: {msg}", file=sys.stderr, flush=True)


class Cluster:
    def __init__(self, nodes):
        self.dir = tempfile.mkdtemp(prefix="tarn-slurm-bench-", dir="/tmp")
        os.chmod(self.dir, 0o711)
        self.conf = os.path.join(self.dir, "cluster", "slurm.conf")
        r = subprocess.run([os.path.join(ROOT, "tests/slurm/cluster.sh"), "start",
                            os.path.join(self.dir, "cluster"), str(nodes), "1"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.stop()
            raise lb.BenchError("tests/slurm/cluster.sh start failed: " + r.stderr[-2000:])
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def run(self, argv):
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise lb.BenchError(f"{' '.join(argv)}: {r.stderr.strip()}")
        return r.stdout

    def states(self, ids):
        out = self.run(["squeue", "-h", "-a", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T"])
        return dict(line.split("|", 1) for line in out.split())

    def stop(self):
        subprocess.run([os.path.join(ROOT, "tests/slurm/cluster.sh"), "stop",
                        os.path.join(self.dir, "cluster")], capture_output=True)


def sbatch_peer(cluster, tag, chain):
    """Submits the 10 jobs as (a) or (b) describes; returns ms until all RUNNING, then
    cancels them and waits until none is left."""
    def submit(name, after):
        argv = ["sbatch", "--parsable", "--no-requeue", "--cpus-per-task=1", "--mem=16M",
                "-J", name, "-o", "/dev/null", "-e", "/dev/null"]
        if after:
            argv.append("--dependency=after:" + ":".join(after))
        return cluster.run(argv + ["--wrap", lb.COMMAND]).strip().split(";")[0]

    ids = []
    t0 = lb.now()
    if chain:
        a = [submit(f"{tag}.a{i}", []) for i in range(3)]
        b = [submit(f"{tag}.b{i}", a) for i in range(3)]
        c = [submit(f"{tag}.c{i}", b) for i in range(4)]
        ids = a + b + c
    else:
        ids = [submit(f"{tag}.s{i}", []) for i in range(10)]
    while True:
        st = cluster.states(ids)
        if all(st.get(i) == "RUNNING" for i in ids):
            break
        bad = [f"{i}: {s}" for i, s in st.items() if s not in ("PENDING", "RUNNING", "CONFIGURING")]
        if bad or lb.now() - t0 > 120:
            raise lb.BenchError(f"sbatch peer: not all RUNNING: {bad or st}")
        time.sleep(0.01)
    took = lb.ms(lb.now() - t0)
    cluster.run(["scancel"] + ids)
    deadline = lb.now() + 60
    while any(s in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")
              for s in cluster.states(ids).values()):
        if lb.now() > deadline:
            raise lb.BenchError("sbatch peer: jobs still there 60 s after scancel")
        time.sleep(0.05)
    return took


def fmnist_assembly(name):
    with open(os.path.join(ROOT, "examples/fashion-mnist/assembly.json")) as f:
        doc = json.load(f)
    doc["name"] = name
    for c in doc["components"]:
        c["launch_command"] = re.sub(r"--epochs \d+", "--epochs 1", c["launch_command"])
    return doc


def served_version(instance):
    """The newest AVAILABLE version a serving replica answers with, or None."""
    if instance.get("state") != "READY" or not instance.get("ip"):
        return None
    conn = http.client.HTTPConnection(instance["ip"], instance.get("ports", {}).get("http", 8501),
                                      timeout=2)
    try:
        conn.request("GET", "/v1/models/fmnist")
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            return None
        versions = [int(v["version"]) for v in json.loads(body)["model_version_status"]
                    if v["state"] == "AVAILABLE"]
        return max(versions) if versions else None
    except (OSError, ValueError, KeyError):
        return None
    finally:
        conn.close()


def fmnist_runs(server, tag, reps):
    """Per rep: (ms until every ps and worker was READY, ms until both replicas serve)."""
    out = []
    for i in range(reps):
        name = f"{tag}-{i}"
        server.assemblies.append(name)
        t0 = lb.now()
        status, data = server.request("POST", "/app/v1/services",
                                      json.dumps(fmnist_assembly(name)).encode())
        if status != 202:
            raise lb.BenchError(f"POST {name}: HTTP {status}: {data[:2000]!r}")
        trained_ready = served = None
        ever_ready = set()
        while served is None:
            if lb.now() - t0 > 600:
                raise lb.BenchError(f"{name}: no served model after 600 s: {data[:3000]!r}")
            status, data = server.request("GET", server.service_path(name))
            st = json.loads(data)
            if st.get("state") == "FAILED":
                raise lb.BenchError(f"{name} FAILED: {st.get('diagnostics')}")
            by_comp = {c["name"]: c["containers"] for c in st.get("components", [])}
            for comp in ("ps", "worker"):
                for c in by_comp.get(comp, []):
                    if c["state"] == "READY":
                        ever_ready.add(c["component_instance_name"])
            if trained_ready is None and len(ever_ready) == 4:
                trained_ready = lb.ms(lb.now() - t0)
            versions = [served_version(c) for c in by_comp.get("serving", [])]
            if len(versions) == 2 and all(v is not None for v in versions):
                served = lb.ms(lb.now() - t0)
            time.sleep(0.1)
        server.destroy(name, timeout_s=120)
        out.append((trained_ready, served))
        log(f"{name}: training cluster READY {trained_ready:.0f} ms, served {served:.0f} ms")
    return out


def tarn_runs(server, tag, reps, make):
    out = []
    for i in range(reps):
        name = f"{tag}-{i}"
        _, stable_ms, _, _ = server.launch(make(name), timeout_s=120)
        # On Slurm, RUNNING (with the node's address reported) can come just before srun has
        # started the shim and the workload: give them a moment, outside the timing.
        deadline = lb.now() + 10
        while len(lb.pids_of_assembly([name])) < 10:
            if lb.now() > deadline:
                raise lb.BenchError(f"{name} STABLE but fewer than 10 instance processes found")
            time.sleep(0.05)
        server.destroy(name, timeout_s=120)
        out.append(stable_ms)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tarn", default="build/release/bin/tarn")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise lb.BenchError("needs root (slurmd, and tarn's containers)")
    tarn = os.path.abspath(args.tarn)
    tag = f"sb{os.getpid()}"
    cluster = Cluster(3)
    servers = []
    runs = {}
    ok = False
    try:
        shared = os.path.join(cluster.dir, "shared")
        os.makedirs(shared)
        slurm = lb.Server(tarn, "slurm", "", {"backend": {
            "type": "slurm", "slurm_conf": cluster.conf, "shared_dir": shared,
            # Not the default 20000-29999: cluster.sh derives slurmd ports from there.
            "port_range": "12000-12999",
            "poll_interval_ms": POLL_MS}})
        servers.append(slurm)
        local = lb.Server(tarn, "local", "")
        servers.append(local)
        for shape, make, chain in (("chain", lb.assembly_10, True),
                                   ("flat", lambda n: lb.assembly_n(n, 10), False)):
            runs[f"slurm_backend_{shape}"] = tarn_runs(slurm, f"{tag}-s{shape}", args.reps, make)
            runs[f"local_backend_{shape}"] = tarn_runs(local, f"{tag}-l{shape}", args.reps, make)
            runs[f"sbatch_{shape}"] = [sbatch_peer(cluster, f"{tag}.{shape}{i}", chain)
                                       for i in range(args.reps)]
            log(shape + ": " + ", ".join(f"{k} {runs[k]}" for k in runs if k.endswith(shape)))
        for label, server in (("slurm_backend", slurm), ("local_backend", local)):
            pairs = fmnist_runs(server, f"{tag}-{label[0]}fm", args.reps)
            runs[f"{label}_fmnist_training_ready"] = [p[0] for p in pairs]
            runs[f"{label}_fmnist_served"] = [p[1] for p in pairs]
        ok = True
    finally:
        for s in servers:
            s.stop()
        cluster.stop()
        # Slurm's logs stay for whoever looks into a failed run.
        if ok:
            shutil.rmtree(cluster.dir, ignore_errors=True)
        else:
            log(f"kept {cluster.dir}")
    med = {k: statistics.median(v) for k, v in runs.items()}
    out = {"benchmark": "slurm", "nodes": 3, "cpus_per_node": 4, "instances": 10,
           "fmnist": "examples/fashion-mnist/assembly.json, --epochs 1",
           "slurm_poll_interval_ms": POLL_MS, "reps": args.reps}
    for k, v in runs.items():
        unit = "ms" if "fmnist" in k else "running_ms"
        out[f"{k}_{unit}_median"] = round(med[k], 1)
        out[f"{k}_{unit}_all"] = ", ".join(f"{x:.1f}" for x in v)
    for what in ("training_ready", "served"):
        out[f"ratio_slurm_backend_vs_local_fmnist_{what}"] = round(
            med[f"slurm_backend_fmnist_{what}"] / med[f"local_backend_fmnist_{what}"], 2)
    for shape in ("chain", "flat"):
        out[f"ratio_slurm_backend_vs_sbatch_{shape}"] = round(
            med[f"slurm_backend_{shape}"] / med[f"sbatch_{shape}"], 2)
        out[f"ratio_slurm_backend_vs_local_{shape}"] = round(
            med[f"slurm_backend_{shape}"] / med[f"local_backend_{shape}"], 2)
    out["slurm_backend_jobs_per_s_flat"] = round(10 / (med["slurm_backend_flat"] / 1000), 1)
    out["sbatch_jobs_per_s_flat"] = round(10 / (med["sbatch_flat"] / 1000), 1)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    try:
        main()
    except lb.BenchError as e:
        print(f"slurm_bench: {e}", file=sys.stderr)
        sys.exit(1)
