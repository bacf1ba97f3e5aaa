#!/usr/bin/env python3
"""bench/run ui: the dashboard's assembly page of a 1,000-instance assembly, in Chromium.

Starts a `tarn server` (launch_bench's: its own state directory, a bearer token), launches
one component of N instances (`sleep 100000` under tarn-shim) and waits until it is STABLE,
then runs web/bench/ui_bench.mjs in Debian's headless Chromium through playwright-core:
the time to first render of the assembly page and to a live update on it (a flex shown),
and, as the peer in the same run, one unpaged GET of the same assembly with its JSON.parse
in the same browser. Needs root, the built dashboard (scripts/web) and Chromium. Only talks
to 127.0.0.1. Prints one flat JSON object on stdout; progress goes to stderr.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_bench  # noqa: E402
from launch_bench import BenchError, Server  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(f"ui_bench: {msg}", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tarn", default="build/release/bin/tarn")
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise BenchError("needs root (tarn server runs containers in namespaces/cgroups)")
    for need in ("web/dist/index.html", "web/node_modules/playwright-core"):
        if not os.path.exists(os.path.join(ROOT, need)):
            raise BenchError(f"{need} is missing: run scripts/web")
    server = Server(os.path.abspath(args.tarn), "ui", "")
    name = f"ui{os.getpid()}"
    try:
        log(f"launching {args.instances} instances")
        post_ms, stable_ms, _, _ = server.launch(launch_bench.assembly_n(name, args.instances),
                                                 timeout_s=600)
        log(f"STABLE after {stable_ms:.0f} ms; the browser")
        r = subprocess.run(["node", os.path.join(ROOT, "web/bench/ui_bench.mjs"),
                            f"http://127.0.0.1:{server.port}", server.token, name, "sleeper",
                            str(args.repeats)],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise BenchError(f"ui_bench.mjs exited {r.returncode}: {r.stderr[-3000:]}")
        out = json.loads(r.stdout.strip().splitlines()[-1])
        out.update({
            "benchmark": "ui",
            "browser": "chromium-headless-shell (Debian) via playwright-core",
            "peer": "one GET of the same assembly unpaged (YARN's GET /app/v1/services/NAME) "
                    "and its JSON.parse, in the same browser",
            "launch_to_stable_ms": round(stable_ms),
        })
        out["first_render_vs_peer"] = round(
            out["first_render_ms_median"] / max(out["peer_unpaged_get_and_parse_ms_median"], 0.1), 2)
        server.destroy(name, timeout_s=120)
        print(json.dumps(out, indent=2, sort_keys=True))
    finally:
        server.stop()


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"ui_bench: {e}", file=sys.stderr)
        sys.exit(1)
