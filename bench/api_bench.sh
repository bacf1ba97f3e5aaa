#!/usr/bin/env bash
# bench/run api: requests/s and latency (p50/p99) of tarn server's
# `GET /app/v1/services/NAME?user.name=U` for a small STABLE assembly (2 instances of
# `sleep 100000`), under `wrk -t2 -c64 -d10s --latency`, next to nginx serving a static file
# with the very bytes of that GET's body, same wrk parameters, same run; plus tarn's
# `GET /healthz`. Needs root (tarn server), wrk, curl and /usr/sbin/nginx. Talks to
# 127.0.0.1 only. Prints one flat JSON object on stdout; progress goes to stderr.
#
# usage: bench/api_bench.sh [TARN_BINARY]   (env: WRK_DURATION=10s WRK_WARMUP=2s API_ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."

TARN=$(readlink -f "${1:-build/release/bin/tarn}")
DURATION=${WRK_DURATION:-10s}
ROUNDS=${API_ROUNDS:-3}
WARMUP=${WRK_WARMUP:-2s}
THREADS=2
CONNS=64
BENCH_USER=bench
NAME="api-bench-$$"

log() { echo "api_bench: $*" >&2; }
die() { log "FAILED: $*"; exit 1; }
# instance_pids, http, stop_tarn_server, kill_leftovers_and_clean
source bench/lib.sh
# nginx_config
source bench/nginx_peer.sh

[[ $(id -u) -eq 0 ]] || die "needs root (tarn server runs containers in namespaces/cgroups)"
[[ -x "$TARN" ]] || die "$TARN is not an executable; run scripts/build"
for tool in wrk curl python3 timeout; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/setup installs it)"
done
[[ -x /usr/sbin/nginx ]] || die "/usr/sbin/nginx not found (scripts/setup installs nginx-light)"

DIR=$(mktemp -d /tmp/tarn-api-bench-XXXXXX)
chmod 711 "$DIR"
SERVER_PID=""
NGINX_PID=""
BASE=""
POSTED=0

cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  set +e
  if [[ -n "$NGINX_PID" ]] && kill -0 "$NGINX_PID" 2>/dev/null; then
    kill -QUIT "$NGINX_PID" 2>/dev/null   # graceful stop; TERM after 10 s
    for _ in $(seq 100); do kill -0 "$NGINX_PID" 2>/dev/null || break; sleep 0.1; done
    kill -TERM "$NGINX_PID" 2>/dev/null
    wait "$NGINX_PID" 2>/dev/null
  fi
  stop_tarn_server
  kill_leftovers_and_clean "$DIR/state"
  [[ $rc -ne 0 ]] && log "FAILED (exit $rc); see the messages above"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# --- tarn server -------------------------------------------------------------------------
cat >"$DIR/config.json" <<'EOF'
{"nodes": [{"name": "node-1", "vcores": 4096, "memory_mb": 16777216, "gpus": 0}]}
EOF
"$TARN" server --listen 127.0.0.1:0 --dns 127.0.0.1:0 --state-dir "$DIR/state" \
  --config "$DIR/config.json" \
  >"$DIR/server.log" 2>&1 </dev/null &
SERVER_PID=$!
PORT=""
for _ in $(seq 200); do
  kill -0 "$SERVER_PID" 2>/dev/null || die "tarn server exited at start: $(cat "$DIR/server.log")"
  PORT=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$DIR/server.log")
  [[ -n "$PORT" ]] && break
  sleep 0.1
done
[[ -n "$PORT" ]] || die "tarn server did not say where it listens within 20 s"
BASE="http://127.0.0.1:$PORT"
log "tarn server on $BASE"

cat >"$DIR/assembly.json" <<EOF
{"name": "$NAME", "version": "1.0", "components": [
  {"name": "sleeper", "number_of_containers": 2, "launch_command": "sleep 100000",
   "resource": {"cpus": 1, "memory": "16"}}]}
EOF
code=$(http POST "$BASE/app/v1/services?user.name=$BENCH_USER" "$DIR/assembly.json")
[[ "$code" == 202 ]] || die "POST: HTTP $code: $(head -c 2000 "$DIR/body")"
POSTED=1
STATUS_URL="$BASE/app/v1/services/$NAME?user.name=$BENCH_USER"
state=""
for _ in $(seq 300); do
  code=$(http GET "$STATUS_URL")
  [[ "$code" == 200 ]] || die "GET $STATUS_URL: HTTP $code: $(head -c 2000 "$DIR/body")"
  state=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"])' "$DIR/body")
  [[ "$state" == STABLE ]] && break
  [[ "$state" == FAILED ]] && die "assembly FAILED: $(head -c 2000 "$DIR/body")"
  sleep 0.1
done
[[ "$state" == STABLE ]] || die "assembly not STABLE after 30 s (state $state)"

# The GET's body, twice, to make sure it does not change between requests.
mkdir -p "$DIR/www"
chmod 755 "$DIR/www"
code=$(http GET "$STATUS_URL"); [[ "$code" == 200 ]] || die "GET: HTTP $code"
cp "$DIR/body" "$DIR/www/status.json"
code=$(http GET "$STATUS_URL"); [[ "$code" == 200 ]] || die "GET: HTTP $code"
cmp -s "$DIR/body" "$DIR/www/status.json" || log "note: the GET's body changed between two requests"
chmod 644 "$DIR/www/status.json"
BODY_BYTES=$(stat -c %s "$DIR/www/status.json")
code=$(http GET "$BASE/healthz"); [[ "$code" == 200 ]] || die "GET /healthz: HTTP $code"
log "assembly $NAME STABLE; GET body $BODY_BYTES bytes"

# --- nginx ---------------------------------------------------------------------------------
NGINX_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
nginx_config "$DIR" "$NGINX_PORT" auto
/usr/sbin/nginx -p "$DIR/nginx" -e "$DIR/nginx/error.log" -c "$DIR/nginx/nginx.conf" \
  >"$DIR/nginx/stdout.log" 2>&1 </dev/null &
NGINX_PID=$!
NGINX_URL="http://127.0.0.1:$NGINX_PORT/status.json"
ok=0
for _ in $(seq 100); do
  kill -0 "$NGINX_PID" 2>/dev/null ||
    die "nginx exited at start: $(cat "$DIR/nginx/stdout.log" "$DIR/nginx/error.log" 2>/dev/null)"
  code=$(curl -s -o "$DIR/nginx_body" -w '%{http_code}' --max-time 5 "$NGINX_URL" || true)
  if [[ "$code" == 200 ]]; then ok=1; break; fi
  sleep 0.1
done
[[ $ok -eq 1 ]] || die "nginx did not answer 200 on $NGINX_URL within 10 s"
cmp -s "$DIR/nginx_body" "$DIR/www/status.json" || die "nginx's body differs from tarn's"
log "nginx on 127.0.0.1:$NGINX_PORT (pid $NGINX_PID)"

# --- wrk ---------------------------------------------------------------------------------
# run_wrk LABEL URL ROUND: a warm-up, then the measured run; writes $DIR/LABEL.ROUND.json
run_wrk() {
  local label=$1 url=$2 file="$DIR/$1.$3"
  timeout 60 wrk -t"$THREADS" -c"$CONNS" -d"$WARMUP" "$url" >/dev/null ||
    die "wrk warm-up on $url failed"
  timeout 120 wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency "$url" >"$file.wrk" ||
    die "wrk on $url failed: $(cat "$file.wrk")"
  python3 - "$file.wrk" "$label" >"$file.json" <<'PY' || die "cannot read wrk's output for $label: $(cat "$file.wrk")"
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
out[f"{label}_rps"] = float(m.group(1))
for pct in ("50", "99"):
    m = re.search(rf"^\s+{pct}%\s+(\S+)", text, re.M)
    if not m:
        raise SystemExit(f"no {pct}% latency")
    out[f"{label}_latency_p{pct}_ms"] = to_ms(m.group(1))
m = re.search(r"(\d+) requests in", text)
out[f"{label}_requests"] = int(m.group(1)) if m else None
if re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text):
    raise SystemExit("non-2xx answers: " + text)
m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
out[f"{label}_socket_errors"] = sum(map(int, m.groups())) if m else 0
if m:
    out[f"{label}_socket_errors_detail"] = m.group(0)
json.dump(out, sys.stdout)
PY
  log "$label, round $3: $(cat "$file.json")"
}

# Interleaved rounds, medians reported: this machine's speed drifts by a third within minutes,
# and a peer measured minutes apart would measure the drift.
for round in $(seq "$ROUNDS"); do
  run_wrk api_get_status "$STATUS_URL" "$round"
  run_wrk nginx_static "$NGINX_URL" "$round"
  run_wrk api_healthz "$BASE/healthz" "$round"
done

RSS_KB=$(awk '/^VmHWM:/ {print $2}' "/proc/$SERVER_PID/status")
THREADS_SERVER=$(awk '/^Threads:/ {print $2}' "/proc/$SERVER_PID/status")
code=$(http GET "$STATUS_URL"); [[ "$code" == 200 ]] || die "GET after the load: HTTP $code"

python3 - "$DIR" "$BODY_BYTES" "$RSS_KB" "$THREADS_SERVER" "$THREADS" "$CONNS" "$DURATION" \
  "$ROUNDS" <<'PY'
import json, statistics, sys
d, body, rss, threads, t, c, dur, rounds = sys.argv[1:]
rounds = int(rounds)
out = {"benchmark": "api",
       "peer": "nginx (worker_processes auto, access_log off, keepalive_requests 1000000) "
               "serving a static file with the same bytes as tarn's GET body",
       "wrk": f"wrk -t{t} -c{c} -d{dur} --latency (after a warm-up run), {rounds} interleaved "
              "rounds of tarn's GET, nginx, tarn's /healthz; medians",
       "get_status_body_bytes": int(body),
       "server_peak_rss_mib": int(rss) / 1024.0,
       "server_threads": int(threads),
       "rounds": {}}
for label in ("api_get_status", "nginx_static", "api_healthz"):
    runs = [json.load(open(f"{d}/{label}.{r}.json")) for r in range(1, rounds + 1)]
    out["rounds"][label] = [{k[len(label) + 1:]: v for k, v in run.items()} for run in runs]
    for key in runs[0]:
        values = [run[key] for run in runs]
        if all(isinstance(v, (int, float)) for v in values):
            out[key] = statistics.median(values)
        else:
            out[key] = values[0]
# Per round, so that a drift between rounds does not enter the ratio.
ratios = [out["rounds"]["api_get_status"][r]["rps"] / out["rounds"]["nginx_static"][r]["rps"]
          for r in range(rounds)]
healthz = [out["rounds"]["api_healthz"][r]["rps"] / out["rounds"]["nginx_static"][r]["rps"]
           for r in range(rounds)]
out["ratio_tarn_to_nginx_per_round"] = ratios
out["ratio_tarn_to_nginx"] = statistics.median(ratios)
out["ratio_tarn_healthz_to_nginx"] = statistics.median(healthz)
print(json.dumps(out, indent=2, sort_keys=True))
PY
