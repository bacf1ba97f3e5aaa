#!/usr/bin/env bash
# bench/run api: requests/s and latency (p50/p99) of tarn server's
# `GET /app/v1/services/NAME` for a small STABLE assembly (2 instances of `sleep 100000`),
# under `wrk -t2 -c64 -d10s --latency`:
#   - over TCP with a bearer token (how every remote client and script asks);
#   - the same server, same GET, with Hadoop simple auth (`?user.name=`, no credential
#     checked: the server's config turns it on) -- what the token costs;
#   - nginx serving a static file with the very bytes of that GET's body (the peer);
#   - tarn's `GET /healthz` (no authentication);
# and, by bench/http_load (our own closed-loop client; wrk cannot speak to a Unix socket),
# the same GET over the Unix socket (the kernel's uid, root's here, naming bench's tenant; no
# token) and over TCP with the token and with simple auth,
# same client, same parameters. Interleaved rounds, medians. Needs root (tarn server), wrk,
# curl and /usr/sbin/nginx. Talks to 127.0.0.1 and its own socket only. Prints one flat
# JSON object on stdout; progress goes to stderr.
#
# usage: bench/api_bench.sh [TARN_BINARY [HTTP_LOAD]]
#        (env: WRK_DURATION=10s WRK_WARMUP=2s API_ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."

TARN=$(readlink -f "${1:-build/release/bin/tarn}")
HTTP_LOAD=$(readlink -f "${2:-build/release/bench/http_load}")
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
[[ -x "$HTTP_LOAD" ]] || die "$HTTP_LOAD is not an executable; run scripts/build http_load"
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
# Simple auth on, so that the same server answers both the token's GET and the unchecked one.
cat >"$DIR/config.json" <<'EOF'
{"nodes": [{"name": "node-1", "vcores": 4096, "memory_mb": 16777216, "gpus": 0}],
 "auth": {"simple": true}}
EOF
SOCKET="$DIR/tarn.sock"
"$TARN" server --listen 127.0.0.1:0 --dns 127.0.0.1:0 --state-dir "$DIR/state" \
  --config "$DIR/config.json" --socket "$SOCKET" \
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
log "tarn server on $BASE and unix:$SOCKET"
TOKEN=$(make_token "$TARN" "$SOCKET") || die "cannot make a token of $BENCH_USER"

cat >"$DIR/assembly.json" <<EOF
{"name": "$NAME", "version": "1.0", "components": [
  {"name": "sleeper", "number_of_containers": 2, "launch_command": "sleep 100000",
   "resource": {"cpus": 1, "memory": "16"}}]}
EOF
code=$(http POST "$BASE/app/v1/services" "$DIR/assembly.json")
[[ "$code" == 202 ]] || die "POST: HTTP $code: $(head -c 2000 "$DIR/body")"
POSTED=1
STATUS_PATH="/app/v1/services/$NAME"
STATUS_URL="$BASE$STATUS_PATH"
SIMPLE_URL="$STATUS_URL?user.name=$BENCH_USER"
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
# The unchecked GET answers the same bytes; without a credential the server says 401.
code=$(TOKEN="" http GET "$SIMPLE_URL"); [[ "$code" == 200 ]] || die "GET ?user.name=: HTTP $code"
cmp -s "$DIR/body" "$DIR/www/status.json" || log "note: the simple-auth GET's body differs"
code=$(TOKEN="" http GET "$STATUS_URL"); [[ "$code" == 401 ]] || die "GET without a token: HTTP $code, not 401"
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
# run_wrk LABEL URL ROUND [HEADER]: a warm-up, then the measured run; writes
# $DIR/LABEL.ROUND.json
run_wrk() {
  local label=$1 url=$2 file="$DIR/$1.$3"
  local header=()
  [[ -n "${4:-}" ]] && header=(-H "$4")
  timeout 60 wrk -t"$THREADS" -c"$CONNS" -d"$WARMUP" "${header[@]}" "$url" >/dev/null ||
    die "wrk warm-up on $url failed"
  timeout 120 wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency "${header[@]}" "$url" \
    >"$file.wrk" || die "wrk on $url failed: $(cat "$file.wrk")"
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
# run_own LABEL ROUND PATH http_load-ARGS...: bench/http_load, same connections, threads,
# warm-up and duration as wrk; writes $DIR/LABEL.ROUND.json with wrk's keys.
run_own() {
  local label=$1 round=$2 path=$3 file="$DIR/$1.$2"
  shift 3
  timeout 120 "$HTTP_LOAD" "$@" --path "$path" --connections "$CONNS" \
    --threads "$THREADS" --warmup "${WARMUP%s}" --duration "${DURATION%s}" >"$file.raw" ||
    die "http_load $label failed: $(cat "$file.raw")"
  python3 - "$file.raw" "$label" >"$file.json" <<'PY'
import json, sys
raw = json.load(open(sys.argv[1]))
label = sys.argv[2]
json.dump({f"{label}_rps": raw["rps"], f"{label}_latency_p50_ms": raw["latency_p50_ms"],
           f"{label}_latency_p99_ms": raw["latency_p99_ms"],
           f"{label}_requests": raw["requests"]}, sys.stdout)
PY
  log "$label, round $round: $(cat "$file.json")"
}

for round in $(seq "$ROUNDS"); do
  run_wrk api_get_status "$STATUS_URL" "$round" "Authorization: Bearer $TOKEN"
  run_wrk api_get_status_simple "$SIMPLE_URL" "$round"
  run_wrk nginx_static "$NGINX_URL" "$round"
  run_wrk api_healthz "$BASE/healthz" "$round"
  # On the socket this script is root (an admin, by its uid): it reads bench's assembly by
  # naming the tenant, as an operator would.
  run_own own_unix_socket "$round" "$STATUS_PATH?tenant=$BENCH_USER" --unix "$SOCKET"
  run_own own_tcp_token "$round" "$STATUS_PATH" --tcp "127.0.0.1:$PORT" \
    --header "Authorization: Bearer $TOKEN"
  run_own own_tcp_simple "$round" "$STATUS_PATH?user.name=$BENCH_USER" --tcp "127.0.0.1:$PORT"
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
              "rounds of tarn's GET with a token, the same GET with simple auth, nginx, "
              "tarn's /healthz; medians",
       "own_client": f"bench/http_load, {c} keep-alive connections on {t} threads, closed "
                     f"loop, {dur} after a warm-up, in the same rounds: the GET over the Unix "
                     "socket (no token: the kernel's uid) and over TCP with the token and "
                     "with simple auth",
       "get_status_body_bytes": int(body),
       "server_peak_rss_mib": int(rss) / 1024.0,
       "server_threads": int(threads),
       "rounds": {}}
labels = ("api_get_status", "api_get_status_simple", "nginx_static", "api_healthz",
          "own_unix_socket", "own_tcp_token", "own_tcp_simple")
for label in labels:
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
def per_round(a, b):
    return [out["rounds"][a][r]["rps"] / out["rounds"][b][r]["rps"] for r in range(rounds)]
# What the token costs: 1 - token/simple, same server, same GET, same round.
out["token_cost_per_round"] = [1 - x for x in per_round("api_get_status", "api_get_status_simple")]
out["token_cost"] = statistics.median(out["token_cost_per_round"])
# The same, measured by bench/http_load (a lighter client than wrk on these shared cores).
out["token_cost_own_client_per_round"] = [
    1 - x for x in per_round("own_tcp_token", "own_tcp_simple")]
out["token_cost_own_client"] = statistics.median(out["token_cost_own_client_per_round"])
out["ratio_socket_to_tcp_token_per_round"] = per_round("own_unix_socket", "own_tcp_token")
out["ratio_socket_to_tcp_token"] = statistics.median(out["ratio_socket_to_tcp_token_per_round"])
out["ratio_tarn_to_nginx_per_round"] = ratios
out["ratio_tarn_to_nginx"] = statistics.median(ratios)
out["ratio_tarn_healthz_to_nginx"] = statistics.median(healthz)
print(json.dumps(out, indent=2, sort_keys=True))
PY
