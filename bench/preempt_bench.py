#!/usr/bin/env python3
"""bench/run preempt: what a preemption costs a training gang, with tarn-train's checkpoint on
SIGTERM against the same run killed at the same moment.

A `tarn server` (release build) on one node with 4 fake GPUs, its default queue allowing
priorities up to 10. A priority-1 gang trains the Fashion-MNIST MLP (tarn-train: 1 ps + 2
workers with 2 GPUs each, periodic checkpoints every 60 s, `--checkpoint_every_secs 60`).
At --preempt-after seconds after the chief's first progress line, a priority-10 assembly
asks for 2 GPUs; the scheduler preempts the gang; once the urgent one is READY it is
destroyed and the gang is placed again. Two runs, the same in everything but the stop:

  sigterm: tarn's stop: SIGTERM, the chief ends its step, checkpoints it and exits (its
           tarn.stop.grace_secs, 30 s, is never reached);
  kill:    tarn.stop.grace_secs 0: SIGKILL at once, as a kill at the same moment would;
           the gang resumes from its last periodic checkpoint.

Figures, per run: the step the gang resumed from (the resumed chief's own log line), the
step it had reached (the chief's checkpoint on SIGTERM says it exactly; after a kill, its
last progress line: --log_every_secs 0.2, so up to 0.2 s of steps short), the steps redone (reached less resumed) and what
tarn's counter says of it (tarn_preempted_steps_redone_total on the server's /metrics,
from the chief's tarn_train_global_step, scraped every 500 ms), the seconds of training
that is (at the run's own steps per second), and the time from the urgent POST until its
instance is READY. Needs root (containers) and dataset-fashion-mnist. Talks to 127.0.0.0/8
only. Prints one flat JSON object; progress on stderr.
"""
import argparse
import glob
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_bench as lb  # noqa: E402  (the Server of bench/run launch)

CONFIG = {
    "probe_interval_ms": 100,
    "dns_upstream": [],
    "metrics": {"scrape_interval_ms": 500, "scrape_timeout_ms": 400},
    "queues": [{"name": "default", "capacity": 100, "max-application-priority": 10}],
    "nodes": [{"name": "node-1", "vcores": 16, "memory_mb": 16384, "gpus": 4}],
}


def log(msg):
    print(f"preempt_bench: {msg}", file=sys.stderr, flush=True)


def gang(grace_secs):
    train = ("exec tarn-train --model mlp --epochs 200 --threads 1 --log_every_secs 0.2"
             " --checkpoint_dir $TARN_SHARED_DIR/checkpoints --checkpoint_every_secs 60"
             " --export_every_secs 0")

    def props(role):
        p = {"tarn.tf.role": role, "tarn.ports": "grpc:2222,metrics:9100"}
        if grace_secs is not None:
            p["tarn.stop.grace_secs"] = str(grace_secs)
        return {"properties": p}

    return {
        "name": "train", "version": "1",
        "configuration": {"env": {"OPENBLAS_NUM_THREADS": "1"},
                          "properties": {"tarn.priority": "1"}},
        "components": [
            {"name": "ps", "number_of_containers": 1, "launch_command": train,
             "resource": {"cpus": 1, "memory": "1Gi"}, "configuration": props("ps"),
             "readiness_check": {"type": "PORT", "properties": {"port": "2222"}}},
            {"name": "worker", "number_of_containers": 2, "dependencies": ["ps"],
             "restart_policy": "ON_FAILURE", "launch_command": train + " --metrics_port 9100",
             "resource": {"cpus": 1, "memory": "1Gi",
                          "additional": {"yarn.io/gpu": {"value": 2}}},
             "configuration": props("worker")},
        ],
    }


URGENT = {
    "name": "urgent", "version": "1",
    "configuration": {"properties": {"tarn.priority": "10"}},
    "components": [{"name": "job", "number_of_containers": 1, "launch_command": "sleep 100000",
                    "resource": {"cpus": 1, "memory": "64",
                                 "additional": {"yarn.io/gpu": {"value": 2}}}}],
}


def get(server, path):
    status, data = server.request("GET", path)
    if status != 200:
        raise lb.BenchError(f"GET {path}: HTTP {status}: {data[:500]!r}")
    return json.loads(data)


def instance(server, name, inst):
    for c in get(server, f"/app/v1/services/{name}").get("components", []):
        for i in c.get("containers", []):
            if i.get("component_instance_name") == inst:
                return i
    return {}


def wait(what, timeout_s, fn, interval=0.05):
    deadline = lb.now() + timeout_s
    while True:
        v = fn()
        if v:
            return v
        if lb.now() > deadline:
            raise lb.BenchError(f"{what}: not within {timeout_s} s")
        time.sleep(interval)


def current_log(server, inst, stream):
    """The instance's current run's log (its previous run's moves to <dir>.previous/ when
    it starts again)."""
    path = os.path.join(server.state_dir, "shims", lb.USER, "train", inst, stream + ".log")
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def steps_of(text):
    """(time_ms, step) of each progress line of the chief."""
    out = []
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if "step" in j and "time_ms" in j:
            out.append((j["time_ms"], j["step"]))
    return out


def counter(server, name):
    status, data = server.request("GET", "/metrics")
    if status != 200:
        raise lb.BenchError(f"GET /metrics: HTTP {status}")
    m = re.search(rf"^{name} ([0-9.e+]+)$", data.decode(), re.M)
    return float(m.group(1)) if m else None


def one_run(tarn, mode, preempt_after_s):
    server = lb.Server(tarn, f"preempt-{mode}", None, config=CONFIG)
    try:
        status, data = server.request("POST", "/app/v1/services",
                                      json.dumps(gang(0 if mode == "kill" else None)).encode())
        if status != 202:
            raise lb.BenchError(f"POST train: HTTP {status}: {data[:1000]!r}")
        server.assemblies.append("train")
        first = wait("the chief's first progress line", 120,
                     lambda: steps_of(current_log(server, "worker-0", "stdout")))
        log(f"{mode}: the chief trains; preempting {preempt_after_s} s after its first step")
        time.sleep(preempt_after_s)

        t0 = lb.now()
        status, data = server.request("POST", "/app/v1/services", json.dumps(URGENT).encode())
        if status != 202:
            raise lb.BenchError(f"POST urgent: HTTP {status}: {data[:1000]!r}")
        server.assemblies.append("urgent")
        wait("the urgent job to be READY", 120,
             lambda: instance(server, "urgent", "job-0").get("state") == "READY", 0.01)
        to_ready_ms = round(lb.ms(lb.now() - t0), 1)
        wait("the gang to stop", 120, lambda: all(
            instance(server, "train", i).get("state") == "PENDING"
            for i in ("ps-0", "worker-0", "worker-1")))
        stopped_at_ms = int(time.time() * 1000)
        chief = instance(server, "train", "worker-0")
        log(f"{mode}: urgent READY after {to_ready_ms} ms; the gang waits: "
            f"{chief.get('diagnostics')}")
        progress = steps_of(current_log(server, "worker-0", "stdout"))
        reached = progress[-1][1]
        steps_per_s = ((progress[-1][1] - progress[0][1]) * 1000.0 /
                       max(1, progress[-1][0] - progress[0][0]))
        m = re.search(r"stopped by SIGTERM: checkpoint at step (\d+)",
                      current_log(server, "worker-0", "stderr"))
        checkpointed_on_sigterm = int(m.group(1)) if m else None
        if checkpointed_on_sigterm is not None:  # the step it had reached, exactly
            reached = max(reached, checkpointed_on_sigterm)

        server.destroy("urgent", 60)
        # Placed again: the resumed chief's first progress line, and its word on where it
        # resumed (no such line: from the start).
        resumed = wait("the resumed chief's first progress line", 180, lambda: [
            p for p in steps_of(current_log(server, "worker-0", "stdout"))
            if p[0] > stopped_at_ms])
        first_step_after = resumed[0][1]
        m = re.search(r"resuming from the checkpoint of step (\d+)",
                      current_log(server, "worker-0", "stdout"))
        resumed_from = int(m.group(1)) if m else 0
        events = get(server, "/tarn/v1/services/train/events")
        resumed_event = next((e["message"] for e in events if e.get("type") == "RESUMED"), "")
        tarn_redone = counter(server, "tarn_preempted_steps_redone_total")
        redone = max(0, reached - resumed_from)
        log(f"{mode}: reached step {reached}, resumed from {resumed_from} "
            f"({redone} steps redone by the logs, {tarn_redone} by tarn); {resumed_event}")
        server.destroy("train", 120)
        return {
            f"{mode}_urgent_to_ready_ms": to_ready_ms,
            f"{mode}_reached_step": reached,
            f"{mode}_resumed_from_step": resumed_from,
            f"{mode}_first_logged_step_after_resume": first_step_after,
            f"{mode}_checkpoint_on_sigterm_step": checkpointed_on_sigterm,
            f"{mode}_steps_redone": redone,
            f"{mode}_steps_redone_tarn_counter": tarn_redone,
            f"{mode}_steps_per_second": round(steps_per_s, 1),
            f"{mode}_seconds_redone": round(redone / steps_per_s, 2) if steps_per_s > 0 else None,
            f"{mode}_first_step_to_preemption_s": round(preempt_after_s, 1),
            f"{mode}_first_progress_step": first[0][1],
        }
    except lb.BenchError:
        try:  # what the server says of the gang, for the error
            events = get(server, "/tarn/v1/services/train/events")
            log("the gang's last events: " + json.dumps(events[-15:], indent=1))
        except Exception:  # noqa: BLE001
            pass
        raise
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tarn", required=True)
    ap.add_argument("--preempt-after", type=float, default=80.0,
                    help="seconds after the chief's first step (after the 60 s checkpoint)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("preempt_bench: needs root (containers)")
    out = {"preempt_after_s": args.preempt_after, "checkpoint_every_secs": 60,
           "model": "mlp", "gang": "1 ps + 2 workers x 2 GPUs (fake), priority 1",
           "urgent": "1 x 2 GPUs, priority 10"}
    for mode in ("sigterm", "kill"):
        out.update(one_run(args.tarn, mode, args.preempt_after))
    out["steps_redone_kill_less_sigterm"] = out["kill_steps_redone"] - out["sigterm_steps_redone"]
    print(json.dumps(out, indent=2, sort_keys=True))


if __name__ == "__main__":
    try:
        main()
    except lb.BenchError as e:
        print(f"preempt_bench: {e}", file=sys.stderr)
        sys.exit(1)
