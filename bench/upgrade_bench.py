#!/usr/bin/env python3
"""bench/run upgrade: what a rolling upgrade costs the clients of a serving component.

A `tarn server` (release build) on one node serves a Fashion-MNIST MLP (tarn-train, 20
steps) with 2 tarn-serve replicas (1 CPU each, an HTTP readiness check). 16 clients
(bench/upgrade_load, closed loop, keep-alive) send single-image predictions back to back,
each choosing in turn among the replicas whose `ready` is true (this script rewrites their
list every 100 ms from the REST API) and asking the other replica once when one gives no
answer, as the demo's client does. Two phases under the same load:

  upgrade:  from 1 s before `PUT /app/v1/services/web` (UPGRADING_AUTO_FINALIZE, then the
            component) until 1 s after the assembly is STABLE on version 2 with both
            replicas READY: each replica leaves the ready set for the default
            tarn.upgrade.deregistration_delay_ms (5000), is stopped with its grace (tarn-serve
            drains), started with the new spec and READY before the next;
  baseline: the same clients and replicas, nothing changing, for as long as the upgrade
            phase took.

Figures per phase: requests answered, rps, p50/p99/max latency (first attempt to answer),
errors (non-200 or no answer from either replica), requests asked of the other replica;
the upgrade's own seconds; the ratios upgrade/baseline. Needs root (containers) and
dataset-fashion-mnist. Talks to 127.0.0.0/8 only. Prints one flat JSON object; progress on
stderr.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_bench as lb  # noqa: E402  (the Server of bench/run launch)

CONFIG = {
    "probe_interval_ms": 100,
    "dns_upstream": [],
    "nodes": [{"name": "node-1", "vcores": 8, "memory_mb": 8192}],
}
CLIENTS = 16


def log(msg):
    print(f"upgrade_bench: {msg}", file=sys.stderr, flush=True)


def web(version, models):
    return {
        "name": "web", "version": version,
        "configuration": {"env": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                                  "WEB_SPEC": version}},
        "components": [{
            "name": "serving", "number_of_containers": 2,
            "launch_command": ("exec tarn-serve --rest_api_port $TARN_PORT_HTTP "
                               f"--model_name fmnist --model_base_path {models}/fmnist"),
            "resource": {"cpus": 1, "memory": "512Mi"},
            "restart_policy": "ALWAYS",
            "configuration": {"properties": {"tarn.ports": "http:8501"}},
            "readiness_check": {"type": "HTTP", "properties": {
                "url": "http://${THIS_HOST}:8501/v1/models/fmnist"}},
        }],
    }


def service(server):
    status, data = server.request("GET", "/app/v1/services/web")
    if status != 200:
        raise lb.BenchError(f"GET web: HTTP {status}: {data[:500]!r}")
    return json.loads(data)


def containers(s):
    return [i for c in s.get("components", []) for i in c.get("containers", [])]


def publish(s, targets):
    """Writes the ready replicas' addresses for the clients (by rename: never half a list)."""
    ready = sorted(f"{i['ip']}:8501" for i in containers(s) if i.get("ready") and i.get("ip"))
    with open(targets + ".tmp", "w") as f:
        f.write("".join(a + "\n" for a in ready))
    os.replace(targets + ".tmp", targets)
    return ready


def put(server, path, body):
    status, data = server.request("PUT", path, json.dumps(body).encode())
    if status != 202:
        raise lb.BenchError(f"PUT {path}: HTTP {status}: {data[:1000]!r}")


def refresh_for(server, targets, seconds, until=None):
    """Keeps the clients' list current for `seconds`, or until `until(service)` is true (then
    returns the time it was)."""
    deadline = lb.now() + seconds
    while lb.now() < deadline:
        s = service(server)
        publish(s, targets)
        if until is not None and until(s):
            return lb.now()
        time.sleep(0.1)
    if until is not None:
        raise lb.BenchError(f"not done within {seconds} s: {json.dumps(service(server))[:2000]}")
    return lb.now()


def phase(load, targets, body, server, during):
    """Runs the clients while `during()` runs; their figures."""
    proc = subprocess.Popen([load, "--targets", targets, "--path", "/v1/models/fmnist:predict",
                             "--body", body, "--clients", str(CLIENTS)],
                            stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    try:
        extra = during()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    if proc.returncode != 0:
        raise lb.BenchError(f"upgrade_load exited with {proc.returncode}")
    return json.loads(out), extra


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tarn", required=True)
    ap.add_argument("--load", required=True, help="bench/upgrade_load")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("upgrade_bench: needs root (containers)")
    bindir = os.path.dirname(os.path.abspath(args.tarn))
    server = lb.Server(args.tarn, "upgrade", None, config=CONFIG)
    try:
        models = os.path.join(server.dir, "models")
        os.makedirs(models)
        os.chmod(models, 0o755)
        subprocess.run([os.path.join(bindir, "tarn-train"), "--model", "mlp", "--max_steps", "20",
                        "--threads", "1", "--export_base", models,
                        "--checkpoint_dir", os.path.join(server.dir, "checkpoints")],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        body = os.path.join(server.dir, "predict.json")
        with open(body, "w") as f:
            json.dump({"instances": [[[[0.5] * 28] * 28]]}, f)
        targets = os.path.join(server.dir, "targets")
        publish({}, targets)

        server.launch(web("1", models), 120)
        refresh_for(server, targets, 60,
                    lambda s: sum(1 for i in containers(s) if i.get("ready")) == 2)
        log("2 replicas READY; warming up for 2 s")
        phase(args.load, targets, body, server, lambda: refresh_for(server, targets, 2))

        def upgrade():
            refresh_for(server, targets, 1)
            t0 = lb.now()
            nxt = web("2", models)
            nxt["state"] = "UPGRADING_AUTO_FINALIZE"
            put(server, "/app/v1/services/web", nxt)
            put(server, "/app/v1/services/web/components",
                [{"name": "serving", "state": "UPGRADING"}])
            t1 = refresh_for(server, targets, 300, lambda s: (
                s.get("state") == "STABLE" and s.get("version") == "2" and
                all(i.get("version") == "2" and i.get("ready") for i in containers(s))))
            refresh_for(server, targets, 1)
            return t1 - t0

        log(f"upgrading under {CLIENTS} clients")
        during, upgrade_s = phase(args.load, targets, body, server, upgrade)
        log(f"upgraded in {upgrade_s:.2f} s: {json.dumps(during)}")
        seconds = during["seconds"]
        log(f"baseline: the same load for {seconds:.1f} s")
        baseline, _ = phase(args.load, targets, body, server,
                            lambda: refresh_for(server, targets, seconds))
        log(f"baseline: {json.dumps(baseline)}")
        events = json.loads(server.request("GET", "/tarn/v1/services/web/events")[1])
        first = next(k for k, e in enumerate(events) if e.get("type") == "UPGRADE")
        order = [f"{e['type']} {e.get('instance', '')}".strip() for e in events[first:]
                 if e.get("type") in ("UPGRADING", "UNREADY", "STOP", "LAUNCH", "READY",
                                      "UPGRADED", "UPGRADE_FINALIZED")]
        out = {"clients": CLIENTS, "replicas": 2, "deregistration_delay_ms": 5000,
               "model": "mlp", "upgrade_seconds": round(upgrade_s, 2),
               "upgrade_events": order}
        for name, figures in (("upgrade", during), ("baseline", baseline)):
            for k, v in figures.items():
                out[f"{name}_{k}"] = v
        out["p99_upgrade_over_baseline"] = round(
            during["latency_p99_ms"] / baseline["latency_p99_ms"], 2)
        out["rps_upgrade_over_baseline"] = round(during["rps"] / baseline["rps"], 3)
        print(json.dumps(out, indent=2, sort_keys=True))
    finally:
        server.stop()


if __name__ == "__main__":
    try:
        main()
    except (lb.BenchError, subprocess.CalledProcessError) as e:
        print(f"upgrade_bench: {e}", file=sys.stderr)
        sys.exit(1)
