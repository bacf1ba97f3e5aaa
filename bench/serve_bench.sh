#!/usr/bin/env bash
# bench/run serve: tarn-serve's single-image predict (TF Serving's REST API) under
# `wrk -t1 -c{1,16,64} --latency` with dynamic batching, next to the limit measured in the
# same run: the same model version called in-process (bench/serve_peer, through
# tarn-serve's own LoadTorchServable) at batch sizes 1, 16, 64 and at the mean batch size
# the server formed at each concurrency. Plus the HTTP floor: tarn-serve's
# `GET /v2/health/live` against nginx serving a file with the same bytes, same wrk, at 64
# connections and at 1 (whose round trip bounds what any server can reach at 1 client:
# ratio_c1_ceiling_from_*). And the
# freshness of versions (bench/serve_fresh.py): rename to first answer, inotify and poll.
#
# Two cores: wrk runs on core 0; tarn-serve, nginx and the in-process peer each run on
# core 1, one after the other, never at the same time, so the load generator and the
# server compete for nothing. tarn-serve runs as a one-core instance would: TARN_VCORES=1,
# one HTTP thread, one batch thread, one intra-op thread.
#
# Other processes on the machine skew every figure, so the result records how busy the
# machine was before the run and how much CPU others took during each phase
# (machine_other_cpu_s_during_*): only a run with those near 0 is a clean one.
#
# Needs wrk, curl, python3, taskset and /usr/sbin/nginx. Talks to 127.0.0.1 only. Prints
# one flat JSON object on stdout; progress goes to stderr.
#
# usage: bench/serve_bench.sh [TARN_SERVE] [SERVE_PEER]
#   env: WRK_DURATION=10s WRK_WARMUP=2s SERVE_BATCH_TIMEOUT_MICROS=1000 PEER_SECONDS=3
set -euo pipefail
cd "$(dirname "$0")/.."

SERVE=$(readlink -f "${1:-build/release/bin/tarn-serve}")
PEER=$(readlink -f "${2:-build/release/bench/serve_peer}")
DURATION=${WRK_DURATION:-10s}
WARMUP=${WRK_WARMUP:-2s}
BATCH_TIMEOUT_MICROS=${SERVE_BATCH_TIMEOUT_MICROS:-1000}
PEER_SECONDS=${PEER_SECONDS:-3}
MAX_BATCH=64
CONCURRENCIES=(1 16 64)
FLOOR_CONNS=64
DATA=/usr/share/datasets/fashion-mnist
LUA=$(readlink -f bench/serve_predict.lua)

log() { echo "serve_bench: $*" >&2; }
die() { log "FAILED: $*"; exit 1; }
# nginx_config
source bench/nginx_peer.sh

[[ -x "$SERVE" ]] || die "$SERVE is not an executable; run scripts/build"
[[ -x "$PEER" ]] || die "$PEER is not an executable; run scripts/build"
for tool in wrk curl python3 taskset timeout; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/setup installs it)"
done
[[ -x /usr/sbin/nginx ]] || die "/usr/sbin/nginx not found (scripts/setup installs nginx-light)"
[[ $(nproc) -ge 2 ]] || die "needs 2 cores (load generator on core 0, server on core 1)"

# Other work on the machine skews every figure here: measure it (cores busy over 1 s,
# before anything of ours starts), record it, and warn.
BUSY_BEFORE=$(python3 - <<'PY'
import time
def sample():
    f = open("/proc/stat").readline().split()[1:]
    v = list(map(int, f))
    return sum(v), v[3] + v[4]  # total, idle + iowait
t0, i0 = sample(); time.sleep(1); t1, i1 = sample()
import os
print(f"{os.cpu_count() * (1 - (i1 - i0) / max(1, t1 - t0)):.2f}")
PY
)
log "cores busy before the run: $BUSY_BEFORE"
python3 -c "import sys; sys.exit(float(sys.argv[1]) > 0.2)" "$BUSY_BEFORE" ||
  log "WARNING: the machine is busy ($BUSY_BEFORE cores) before the run; figures will be low"

DIR=$(mktemp -d /tmp/tarn-serve-bench-XXXXXX)
chmod 711 "$DIR"
SERVE_PID=""
NGINX_PID=""

# stop_pid PID SIGNAL SECONDS: signal, wait, then SIGKILL.
stop_pid() {
  local pid=$1 sig=$2 secs=$3
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -"$sig" "$pid" 2>/dev/null
  for _ in $(seq $((secs * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    log "cleanup: pid $pid ignored SIG$sig for $secs s; killing it"
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
  return 0
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  set +e
  stop_pid "$SERVE_PID" TERM 15
  stop_pid "$NGINX_PID" QUIT 10
  rm -rf "$DIR"
  [[ $rc -ne 0 ]] && log "FAILED (exit $rc); see the messages above"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# And during each phase of the run: the machine's busy CPU time (/proc/stat) less this
# script's and its children's (bash's `times`; every process of the run is a waited-for
# child).
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
# `times` must run in this shell (not in $(...) or a pipe, whose subshell has no children).
cpu_seconds_ours() {
  times >"$DIR/times"
  python3 -c '
import re, sys
text = open(sys.argv[1]).read()
print(sum(float(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", text)))' \
    "$DIR/times"
}
# mark NAME: the machine's busy seconds and ours, now, into $DIR/mark.NAME
mark() {
  cpu_seconds_ours >"$DIR/ours"
  echo "$(busy_ticks) $(getconf CLK_TCK) $(cat "$DIR/ours")" >"$DIR/mark.$1"
}
mark start

# --- the model version and the request -----------------------------------------------------
VERSION_DIR=$("$PEER" export "$DIR/models") || die "serve_peer export failed"
log "model version $VERSION_DIR"

# One Fashion-MNIST test image as a Python client sends it: (pixels / 255.0).tolist() of a
# [1, 1, 28, 28] array; pseudo-random pixels when the data set is not installed.
python3 - "$DATA/t10k-images-idx3-ubyte.gz" "$DIR/body.json" >"$DIR/image_source" <<'PY'
import gzip, json, os, random, struct, sys
src, out = sys.argv[1:]
if os.path.exists(src):
    with gzip.open(src) as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        assert magic == 0x803 and rows == 28 and cols == 28, "not an IDX image file"
        pixels = list(f.read(rows * cols))
    print("fashion-mnist t10k image 0")
else:
    rng = random.Random(1)
    pixels = [rng.randrange(256) for _ in range(28 * 28)]
    print("pseudo-random pixels")
image = [[[p / 255.0 for p in pixels[r * 28:(r + 1) * 28]] for r in range(28)]]
with open(out, "w") as f:
    json.dump({"instances": [image]}, f)
PY
BODY_BYTES=$(stat -c %s "$DIR/body.json")
log "request: $(cat "$DIR/image_source"), $BODY_BYTES bytes"

cat >"$DIR/batching.json" <<EOF
{"max_batch_size": $MAX_BATCH, "batch_timeout_micros": $BATCH_TIMEOUT_MICROS,
 "num_batch_threads": 1, "max_enqueued_batches": 16}
EOF

# --- tarn-serve on core 1 --------------------------------------------------------------------
: >"$DIR/serve.log"  # before the start: the loop below reads it at once
TARN_VCORES=1 taskset -c 1 "$SERVE" --rest_api_host=127.0.0.1 --rest_api_port=0 \
  --model_name=fmnist --model_base_path="$DIR/models/fmnist" \
  --file_system_poll_wait_seconds=0 \
  --enable_batching --batching_parameters_file="$DIR/batching.json" \
  --rest_api_num_threads=1 --tensorflow_intra_op_parallelism=1 \
  >"$DIR/serve.log" 2>&1 </dev/null &
SERVE_PID=$!
PORT=""
for _ in $(seq 600); do
  kill -0 "$SERVE_PID" 2>/dev/null || die "tarn-serve exited at start: $(cat "$DIR/serve.log")"
  PORT=$(sed -n 's|.*serving on 127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$DIR/serve.log")
  [[ -n "$PORT" ]] && break
  sleep 0.1
done
[[ -n "$PORT" ]] ||
  die "tarn-serve did not say where it listens within 60 s: $(cat "$DIR/serve.log")"
BASE="http://127.0.0.1:$PORT"
ready=0
for _ in $(seq 600); do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$BASE/v2/models/fmnist/ready" || true)
  if [[ "$code" == 200 ]]; then ready=1; break; fi
  sleep 0.1
done
[[ $ready -eq 1 ]] || die "fmnist not ready within 60 s: $(cat "$DIR/serve.log")"
log "tarn-serve on $BASE (pid $SERVE_PID): $(grep -o 'serving on.*' "$DIR/serve.log")"

PREDICT_URL="$BASE/v1/models/fmnist:predict"
code=$(curl -s -o "$DIR/answer.json" -w '%{http_code}' --max-time 30 \
  -H 'Content-Type: application/json' --data-binary "@$DIR/body.json" "$PREDICT_URL" || true)
[[ "$code" == 200 ]] || die "predict: HTTP $code: $(head -c 2000 "$DIR/answer.json")"
python3 - "$DIR/answer.json" <<'PY' ||
import json, sys
p = json.load(open(sys.argv[1]))["predictions"]
assert len(p) == 1 and len(p[0]) == 10, p
PY
  die "predict answer is not 1 x 10 scores: $(head -c 2000 "$DIR/answer.json")"

# --- wrk ---------------------------------------------------------------------------------
# run_wrk LABEL CONNS URL [LUA]: a warm-up, then the measured run (wrk on core 0);
# writes $DIR/LABEL.json with LABEL_qps, _p50_ms, _p99_ms, _requests. Any non-2xx answer or
# socket error fails the bench.
run_wrk() {
  local label=$1 conns=$2 url=$3 script=${4:-}
  local args=(-t1 -c"$conns")
  [[ -n "$script" ]] && args+=(-s "$script")
  SERVE_BODY="$DIR/body.json" timeout 60 taskset -c 0 wrk "${args[@]}" -d"$WARMUP" "$url" \
    >"$DIR/$label.warmup" || die "wrk warm-up on $url failed: $(cat "$DIR/$label.warmup")"
  [[ -n "${before_run:-}" ]] && $before_run "$label"
  SERVE_BODY="$DIR/body.json" timeout 120 taskset -c 0 wrk "${args[@]}" -d"$DURATION" \
    --latency "$url" >"$DIR/$label.wrk" || die "wrk on $url failed: $(cat "$DIR/$label.wrk")"
  python3 - "$DIR/$label.wrk" "$label" >"$DIR/$label.json" <<'PY' ||
import json, re, sys
text = open(sys.argv[1]).read()
label = sys.argv[2]
def to_ms(v):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", v)
    if not m:
        raise SystemExit(f"unknown latency {v!r}")
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[m.group(2)]
out = {}
m = re.search(r"Requests/sec:\s+([\d.]+)", text)
if not m:
    raise SystemExit("no Requests/sec")
out[f"{label}_qps"] = float(m.group(1))
for pct in ("50", "99"):
    m = re.search(rf"^\s+{pct}(?:\.000)?%\s+(\S+)", text, re.M)
    if not m:
        raise SystemExit(f"no {pct}% latency")
    out[f"{label}_p{pct}_ms"] = to_ms(m.group(1))
m = re.search(r"(\d+) requests in", text)
out[f"{label}_requests"] = int(m.group(1))
m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
if m:
    raise SystemExit(f"{m.group(1)} non-2xx answers")
m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
if m:
    raise SystemExit("socket errors: " + m.group(0))
json.dump(out, sys.stdout)
PY
    die "wrk's run $label: $(cat "$DIR/$label.wrk")"
  [[ -n "${after_run:-}" ]] && $after_run "$label"
  log "$label: $(cat "$DIR/$label.json")"
}

# /metrics snapshots around each predict run: batch sizes, compute and queue time, answers.
snapshot() {
  curl -sf --max-time 10 "$BASE/metrics" >"$DIR/$1.metrics" || die "GET /metrics failed"
}
metrics_before() { snapshot "$1.before"; }
metrics_after() {
  snapshot "$1.after"
  python3 - "$DIR/$1.before.metrics" "$DIR/$1.after.metrics" "$1" "$DIR/$1.json" <<'PY' ||
import json, re, sys
before, after, label, path = sys.argv[1:]
def read(p):
    v = {}
    for line in open(p):
        m = re.match(r'^(tarn_serve_[a-z_]+)(\{[^}]*\})? (\S+)$', line.strip())
        if m and 'le="' not in (m.group(2) or ""):
            v[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return v
b, a = read(before), read(after)
d = lambda k: a.get(k, 0.0) - b.get(k, 0.0)
out = json.load(open(path))
m = '{model="fmnist"}'
batches = d("tarn_serve_batch_size_count" + m)
if batches <= 0:
    raise SystemExit("no batches ran during the run")
out[f"{label}_mean_batch"] = d("tarn_serve_batch_size_sum" + m) / batches
out[f"{label}_batches"] = int(batches)
out[f"{label}_mean_compute_ms"] = 1000 * d("tarn_serve_compute_seconds_sum" + m) / batches
tasks = d("tarn_serve_queue_seconds_count" + m)
out[f"{label}_mean_queue_ms"] = (1000 * d("tarn_serve_queue_seconds_sum" + m) / tasks
                                 if tasks else None)
ok = sum(d(k) for k in a if k.startswith("tarn_serve_requests_total{") and 'api="predict"' in k
         and 'code="200"' in k)
bad = sum(d(k) for k in a if k.startswith("tarn_serve_requests_total{") and 'api="predict"' in k
          and 'code="200"' not in k)
if bad:
    raise SystemExit(f"the server answered {int(bad)} predict requests with an error")
out[f"{label}_server_answers"] = int(ok)
json.dump(out, open(path, "w"))
PY
    die "reading /metrics for $1"
}

for c in "${CONCURRENCIES[@]}"; do
  before_run=metrics_before after_run=metrics_after \
    run_wrk "serve_predict_c$c" "$c" "$PREDICT_URL" "$LUA"
done
before_run="" after_run="" run_wrk serve_static "$FLOOR_CONNS" "$BASE/v2/health/live"
# One connection: what a lone client's round trip costs before any model or JSON.
before_run="" after_run="" run_wrk serve_static_c1 1 "$BASE/v2/health/live"
curl -sf --max-time 5 -o "$DIR/live_body" "$BASE/v2/health/live" || die "GET /v2/health/live failed"
SERVE_RSS_KB=$(awk '/^VmHWM:/ {print $2}' "/proc/$SERVE_PID/status")
SERVE_THREADS=$(awk '/^Threads:/ {print $2}' "/proc/$SERVE_PID/status")
stop_pid "$SERVE_PID" TERM 15
SERVE_PID=""
mark tarn_serve

# --- nginx on core 1, after tarn-serve has gone -------------------------------------------------
NGINX_PORT=$(python3 -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
mkdir -p "$DIR/www/v2/health"
cp "$DIR/live_body" "$DIR/www/v2/health/live"
chmod -R a+rX "$DIR/www"
nginx_config "$DIR" "$NGINX_PORT" 1
taskset -c 1 /usr/sbin/nginx -p "$DIR/nginx" -e "$DIR/nginx/error.log" -c "$DIR/nginx/nginx.conf" \
  >"$DIR/nginx/stdout.log" 2>&1 </dev/null &
NGINX_PID=$!
NGINX_URL="http://127.0.0.1:$NGINX_PORT/v2/health/live"
ok=0
for _ in $(seq 100); do
  kill -0 "$NGINX_PID" 2>/dev/null ||
    die "nginx exited at start: $(cat "$DIR/nginx/stdout.log" "$DIR/nginx/error.log" 2>/dev/null)"
  code=$(curl -s -o "$DIR/nginx_body" -w '%{http_code}' --max-time 5 "$NGINX_URL" || true)
  if [[ "$code" == 200 ]]; then ok=1; break; fi
  sleep 0.1
done
[[ $ok -eq 1 ]] || die "nginx did not answer 200 on $NGINX_URL within 10 s"
cmp -s "$DIR/nginx_body" "$DIR/live_body" || die "nginx's body differs from tarn-serve's"
log "nginx on 127.0.0.1:$NGINX_PORT (pid $NGINX_PID)"
before_run="" after_run="" run_wrk nginx_static "$FLOOR_CONNS" "$NGINX_URL"
before_run="" after_run="" run_wrk nginx_static_c1 1 "$NGINX_URL"
stop_pid "$NGINX_PID" QUIT 10
NGINX_PID=""
mark nginx

# --- the in-process peer on core 1, alone ------------------------------------------------------
python3 - "$DIR" "${CONCURRENCIES[@]}" >"$DIR/served_batches" <<'PY'
import json, sys
d = sys.argv[1]
def served(c):
    return json.load(open(f"{d}/serve_predict_c{c}.json"))[f"serve_predict_c{c}_mean_batch"]
print(" ".join(str(max(1, round(served(c)))) for c in sys.argv[2:]))
PY
read -r -a SERVED_BATCHES <"$DIR/served_batches"
BATCHES=$(printf '%s\n' 1 16 64 "${SERVED_BATCHES[@]}" | sort -n -u | tr '\n' ' ')
log "in-process peer at batch sizes $BATCHES"
# shellcheck disable=SC2086
taskset -c 1 "$PEER" inprocess "$VERSION_DIR" "$PEER_SECONDS" $BATCHES >"$DIR/inprocess.json" \
  2>"$DIR/inprocess.log" || die "serve_peer inprocess failed: $(cat "$DIR/inprocess.log")"

mark inprocess_peer

# --- freshness: a version renamed into place until its first answer, inotify and poll -------
mkdir -p "$DIR/fresh"
taskset -c 0 python3 bench/serve_fresh.py "$SERVE" "$VERSION_DIR" "$DIR/body.json" "$DIR/fresh" \
  >"$DIR/fresh.json" || die "bench/serve_fresh.py failed"
log "freshness: $(cat "$DIR/fresh.json")"
mark fresh

python3 - "$DIR" <<'PY'
import json, sys
d = sys.argv[1]
def read(name):
    ticks, hz, ours = open(f"{d}/mark.{name}").read().split()
    return int(ticks) / int(hz), float(ours)
out = {}
marks = ["start", "tarn_serve", "nginx", "inprocess_peer", "fresh"]
for a, b in zip(marks, marks[1:]):
    (b0, o0), (b1, o1) = read(a), read(b)
    out[f"machine_other_cpu_s_during_{b}"] = round(max(0.0, (b1 - b0) - (o1 - o0)), 1)
json.dump(out, open(f"{d}/other_cpu.json", "w"))
PY
log "CPU seconds other processes used, by phase: $(cat "$DIR/other_cpu.json")"

# --- the result --------------------------------------------------------------------------------
python3 - "$DIR" "$BODY_BYTES" "$(cat "$DIR/image_source")" "$SERVE_RSS_KB" "$SERVE_THREADS" \
  "$BUSY_BEFORE" "$DURATION" "$BATCH_TIMEOUT_MICROS" "$MAX_BATCH" "$FLOOR_CONNS" \
  "${CONCURRENCIES[@]}" <<'PY'
import json, sys
d, body, image, rss, threads, busy, dur, timeout, max_batch, floor_conns, *conc = sys.argv[1:]
inproc = json.load(open(f"{d}/inprocess.json"))
out = {
    "benchmark": "serve",
    "peer": "the same model.pt called in-process through tarn-serve's LoadTorchServable and "
            "Servable::Run (bench/serve_peer, 1 torch thread, core 1) at the same batch sizes; "
            "HTTP floor: nginx (worker_processes 1, core 1, access_log off, keepalive_requests "
            "1000000) serving the same bytes as tarn-serve's GET /v2/health/live",
    "model": "zoo cnn (225,034 parameters), input [1, 28, 28] float32",
    "request": f"POST /v1/models/fmnist:predict, 1 instance ({image}), {body} bytes of JSON",
    "wrk": f"taskset -c 0 wrk -t1 -c{{1,16,64}} -d{dur} --latency (after a warm-up run)",
    "server": f"taskset -c 1, TARN_VCORES=1, --rest_api_num_threads 1, "
              f"--tensorflow_intra_op_parallelism 1, --enable_batching max_batch_size {max_batch} "
              f"batch_timeout_micros {timeout} num_batch_threads 1",
    "serve_request_body_bytes": int(body),
    "serve_server_peak_rss_mib": int(rss) / 1024.0,
    "serve_server_threads": int(threads),
    "machine_busy_cores_before": float(busy),
}
out.update(json.load(open(f"{d}/other_cpu.json")))
out.update(json.load(open(f"{d}/fresh.json")))
out["fresh"] = ("a version directory renamed into the base path until the first 200 from "
                "/v1/models/fmnist/versions/N:predict (bench/serve_fresh.py, a client on core "
                "0 asking in a loop), --file_system_poll_wait_seconds 2 (the demo's), with the "
                "inotify watch (default) and with --tarn_watch_base_paths=false")
for c in conc:
    out.update(json.load(open(f"{d}/serve_predict_c{c}.json")))
for label in ("serve_static", "nginx_static", "serve_static_c1", "nginx_static_c1"):
    r = json.load(open(f"{d}/{label}.json"))
    out.update({k.replace(f"{label}_qps", f"{label}_rps"): v for k, v in r.items()})
for b, r in inproc.items():
    out[f"inprocess_b{b}_images_per_s"] = r["images_per_s"]
    out[f"inprocess_b{b}_batch_ms"] = r["batch_ms"]
for c in conc:
    b = str(max(1, round(out[f"serve_predict_c{c}_mean_batch"])))
    out[f"inprocess_at_served_batch_c{c}_batch"] = int(b)
    out[f"inprocess_at_served_batch_c{c}_images_per_s"] = inproc[b]["images_per_s"]
    out[f"ratio_served_to_inprocess_c{c}"] = (out[f"serve_predict_c{c}_qps"] /
                                              inproc[b]["images_per_s"])
out["inprocess_at_served_batch_images_per_s"] = out["inprocess_at_served_batch_c64_images_per_s"]
out["ratio_served_to_inprocess_b64"] = out["serve_predict_c64_qps"] / inproc["64"]["images_per_s"]
out["ratio_static_tarn_serve_to_nginx"] = out["serve_static_rps"] / out["nginx_static_rps"]
out["static_wrk"] = f"taskset -c 0 wrk -t1 -c{floor_conns} -d{dur} --latency GET /v2/health/live"
# At one connection a request costs the model's time plus at least the HTTP round trip of a
# bodiless GET: the best ratio any server could reach at 1 client, with tarn-serve's floor
# and with nginx's.
inproc1 = inproc["1"]["images_per_s"]
for label in ("serve_static_c1", "nginx_static_c1"):
    floor = out[f"{label}_rps"]
    out[f"ratio_c1_ceiling_from_{label}"] = floor / (floor + inproc1)
# Issue 27's goals: >= 0.8x the in-process peer at 1 and at 64 clients, p99 < 5 ms at 16.
out["target_ratio_served_to_inprocess_min"] = 0.8
out["target_ratio_c1_met"] = out["ratio_served_to_inprocess_c1"] >= 0.8
out["target_ratio_c64_met"] = out["ratio_served_to_inprocess_c64"] >= 0.8
out["target_p99_c16_ms_max"] = 5.0
out["target_p99_met"] = out["serve_predict_c16_p99_ms"] < 5.0
print(json.dumps(out, indent=2, sort_keys=True))
PY
