#!/usr/bin/env python3
"""bench/run serve's freshness phase: how long a newly exported version takes to answer.

tarn-serve (core 1, one HTTP thread) serves a model whose base path gets new versions the
way tarn-train exports them: the version directory is written as a hidden .N.tmp and renamed
into place. The clock starts at the rename and stops at the first 200 from
POST /v1/models/fmnist/versions/N:predict, which this client (core 0) sends in a loop. It is
measured twice with the demo's poll interval (2 s): with the inotify watch of the base path
(the default) and with --tarn_watch_base_paths=false, the poll alone, as TF Serving does.

usage: serve_fresh.py TARN_SERVE VERSION_DIR BODY_JSON WORK_DIR
Prints one flat JSON object; progress goes to stderr. Talks to 127.0.0.1 only.
"""
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

POLL_SECONDS = 2  # the demo's --file_system_poll_wait_seconds
ROUNDS = 5


def log(msg):
    print(f"serve_fresh: {msg}", file=sys.stderr, flush=True)


def start(serve, base, work, watch):
    log_path = os.path.join(work, f"serve-watch-{watch}.log")
    out = open(log_path, "w")
    proc = subprocess.Popen(
        ["taskset", "-c", "1", serve, "--rest_api_host=127.0.0.1", "--rest_api_port=0",
         "--model_name=fmnist", f"--model_base_path={base}",
         f"--file_system_poll_wait_seconds={POLL_SECONDS}",
         f"--tarn_watch_base_paths={'true' if watch else 'false'}",
         "--rest_api_num_threads=1", "--tensorflow_intra_op_parallelism=1"],
        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env=dict(os.environ, TARN_VCORES="1"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"tarn-serve exited at start: {open(log_path).read()}")
        m = re.search(r"serving on 127\.0\.0\.1:(\d+) ", open(log_path).read())
        if m:
            return proc, int(m.group(1)), log_path
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"tarn-serve did not say where it listens: {open(log_path).read()}")


def stop(proc):
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def measure(serve, version_dir, body, work, watch):
    base = os.path.join(work, f"models-watch-{watch}")
    os.makedirs(base)
    shutil.copytree(version_dir, os.path.join(base, "1"))
    proc, port, log_path = start(serve, base, work, watch)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    seconds = []
    try:
        for n in range(2, 2 + ROUNDS):
            tmp = os.path.join(base, f".{n}.tmp")
            shutil.copytree(version_dir, tmp)
            time.sleep(0.1 + 0.37 * n % POLL_SECONDS)  # the rename falls anywhere in a poll
            t0 = time.monotonic()
            os.rename(tmp, os.path.join(base, str(n)))
            while True:
                conn.request("POST", f"/v1/models/fmnist/versions/{n}:predict", body,
                             {"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                if r.status == 200:
                    break
                if r.status != 404:
                    raise SystemExit(f"version {n}: HTTP {r.status}: {open(log_path).read()}")
                if time.monotonic() - t0 > 30:
                    raise SystemExit(f"version {n} not served within 30 s: "
                                     f"{open(log_path).read()}")
            seconds.append(time.monotonic() - t0)
            log(f"watch={watch}: version {n} answered {seconds[-1] * 1000:.1f} ms after its "
                "rename")
    finally:
        conn.close()
        stop(proc)
    return seconds


def main():
    serve, version_dir, body_path, work = sys.argv[1:]
    body = open(body_path, "rb").read()
    out = {"fresh_poll_seconds": POLL_SECONDS, "fresh_rounds": ROUNDS}
    for watch, label in ((True, "inotify"), (False, "poll")):
        s = measure(serve, version_dir, body, work, watch)
        out[f"fresh_{label}_ms"] = [round(x * 1000, 1) for x in s]
        out[f"fresh_{label}_median_ms"] = round(statistics.median(s) * 1000, 1)
        out[f"fresh_{label}_max_ms"] = round(max(s) * 1000, 1)
    out["fresh_target_ms_max"] = 300
    out["fresh_target_met"] = out["fresh_inotify_max_ms"] <= 300
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
