#!/usr/bin/env bash
# bench/run dns: queries per second of tarn server's DNS server (`--dns`) answering the
# instances' A names of a STABLE assembly (20 instances of `sleep 100000`, named port
# grpc:2222), under dnsperf over UDP, next to dnsmasq serving the same name->address lines
# (--addn-hosts) in the same run, with the same dnsperf parameters. The two servers are
# measured alternately (tarn, dnsmasq, tarn, dnsmasq, ...; DNS_ROUNDS rounds), each run after
# a short warm-up; the figures are the medians, and every run's rate is listed too. Before
# the load, every name is asked of both servers once and must answer exactly its address.
# Fails when a run loses more than 1% of its queries or any answer is not NOERROR.
# Needs root (tarn server), dnsperf, curl and /usr/sbin/dnsmasq. Talks to 127.0.0.1 only.
# Prints one flat JSON object on stdout; progress goes to stderr.
#
# usage: bench/dns_bench.sh [TARN_BINARY]
#   env: DNS_INSTANCES=20 DNS_DURATION=10 DNS_WARMUP=2 DNS_CLIENTS=8 DNS_THREADS=2 DNS_OUTSTANDING=200
#        DNS_MAX_QPS=500000 DNS_ROUNDS=3
set -euo pipefail
cd "$(dirname "$0")/.."

TARN=$(readlink -f "${1:-build/release/bin/tarn}")
INSTANCES=${DNS_INSTANCES:-20}
DURATION=${DNS_DURATION:-10}
WARMUP=${DNS_WARMUP:-2}
CLIENTS=${DNS_CLIENTS:-8}
THREADS=${DNS_THREADS:-2}
OUTSTANDING=${DNS_OUTSTANDING:-200}
MAX_QPS=${DNS_MAX_QPS:-500000}
ROUNDS=${DNS_ROUNDS:-3}
BENCH_USER=bench
NAME="dns-bench-$$"
DNSMASQ=/usr/sbin/dnsmasq

log() { echo "dns_bench: $*" >&2; }
die() { log "FAILED: $*"; exit 1; }
# instance_pids, http, stop_tarn_server, kill_leftovers_and_clean
source bench/lib.sh

[[ $(id -u) -eq 0 ]] || die "needs root (tarn server runs containers in namespaces/cgroups)"
[[ -x "$TARN" ]] || die "$TARN is not an executable; run scripts/build"
for tool in dnsperf curl python3 timeout; do
  command -v "$tool" >/dev/null || die "$tool not found (apt-get install dnsperf curl)"
done
[[ -x "$DNSMASQ" ]] || die "$DNSMASQ not found (apt-get install dnsmasq-base)"
for v in INSTANCES DURATION WARMUP CLIENTS THREADS OUTSTANDING MAX_QPS ROUNDS; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "DNS_$v must be a positive integer (got \"${!v}\")"
done

DIR=$(mktemp -d /tmp/tarn-dns-bench-XXXXXX)
chmod 711 "$DIR"
SERVER_PID=""
DNSMASQ_PID=""
BASE=""
POSTED=0

cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  set +e
  if [[ -n "$DNSMASQ_PID" ]] && kill -0 "$DNSMASQ_PID" 2>/dev/null; then
    kill -TERM "$DNSMASQ_PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$DNSMASQ_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$DNSMASQ_PID" 2>/dev/null
    wait "$DNSMASQ_PID" 2>/dev/null
  fi
  stop_tarn_server
  kill_leftovers_and_clean "$DIR/"
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
"$TARN" server --listen 127.0.0.1:0 --socket "$DIR/tarn.sock" --dns 127.0.0.1:0 --state-dir "$DIR/state" \
  --config "$DIR/config.json" >"$DIR/server.log" 2>&1 </dev/null &
SERVER_PID=$!
PORT=""
DNS_PORT=""
for _ in $(seq 200); do
  kill -0 "$SERVER_PID" 2>/dev/null || die "tarn server exited at start: $(cat "$DIR/server.log")"
  line=$(grep -m1 'listening on http://127\.0\.0\.1:' "$DIR/server.log" || true)
  if [[ -n "$line" ]]; then
    PORT=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' <<<"$line")
    DNS_PORT=$(sed -n 's|.*(DNS on 127\.0\.0\.1:\([0-9]*\).*|\1|p' <<<"$line")
    break
  fi
  sleep 0.1
done
[[ -n "$PORT" ]] || die "tarn server did not say where it listens within 20 s"
[[ -n "$DNS_PORT" ]] || die "tarn server did not say where its DNS listens: $line"
BASE="http://127.0.0.1:$PORT"
log "tarn server on $BASE, DNS on 127.0.0.1:$DNS_PORT"

cat >"$DIR/assembly.json" <<EOF
{"name": "$NAME", "version": "1.0", "components": [
  {"name": "sleeper", "number_of_containers": $INSTANCES, "launch_command": "sleep 100000",
   "resource": {"cpus": 1, "memory": "16"},
   "configuration": {"properties": {"tarn.ports": "grpc:2222"}}}]}
EOF
TOKEN=$(make_token "$TARN" "$DIR/tarn.sock") || die "tarn token create failed"
code=$(http POST "$BASE/app/v1/services" "$DIR/assembly.json")
[[ "$code" == 202 ]] || die "POST: HTTP $code: $(head -c 2000 "$DIR/body")"
POSTED=1
STATUS_URL="$BASE/app/v1/services/$NAME"

# Wait for STABLE with every instance READY and addressed; then write the name->ip lines.
ready=""
for _ in $(seq 600); do
  code=$(http GET "$STATUS_URL")
  [[ "$code" == 200 ]] || die "GET $STATUS_URL: HTTP $code: $(head -c 2000 "$DIR/body")"
  ready=$(python3 - "$DIR/body" "$INSTANCES" "$DIR/hosts" <<'PY'
import json, sys
body, want, hosts = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
if body["state"] == "FAILED":
    print("FAILED")
    raise SystemExit
if body["state"] != "STABLE":
    print(f"state {body['state']}")
    raise SystemExit
pairs = []
for comp in body.get("components", []):
    for c in comp.get("containers", []):
        if c.get("ip") and c.get("hostname") and c.get("state") == "READY":
            pairs.append((c["hostname"], c["ip"]))
if len(pairs) != want:
    print(f"STABLE with {len(pairs)} of {want} instances READY and addressed")
    raise SystemExit
if len({h for h, _ in pairs}) != want or len({i for _, i in pairs}) != want:
    print("duplicate hostnames or addresses: " + repr(pairs))
    raise SystemExit
with open(hosts, "w") as f:
    for h, i in sorted(pairs):
        f.write(f"{i}\t{h}\n")
print("ok")
PY
)
  [[ "$ready" == ok ]] && break
  [[ "$ready" == FAILED ]] && die "assembly FAILED: $(head -c 2000 "$DIR/body")"
  sleep 0.1
done
[[ "$ready" == ok ]] || die "assembly not STABLE with $INSTANCES READY addressed instances after 60 s ($ready)"
chmod 644 "$DIR/hosts"
awk '{print $2 " A"}' "$DIR/hosts" >"$DIR/queries.txt"
log "assembly $NAME STABLE; $(wc -l <"$DIR/hosts") names, e.g. $(head -1 "$DIR/hosts" | tr '\t' ' ')"

# --- dnsmasq -------------------------------------------------------------------------------
# A port free on 127.0.0.1 for both UDP and TCP (dnsmasq binds both).
DNSMASQ_PORT=$(python3 - <<'PY'
import socket
for _ in range(100):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 0))
    port = u.getsockname()[1]
    t = socket.socket()
    try:
        t.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        t.close()
        u.close()
    print(port)
    break
PY
)
[[ -n "$DNSMASQ_PORT" ]] || die "no free port for dnsmasq"
"$DNSMASQ" --keep-in-foreground --no-resolv --no-hosts --addn-hosts="$DIR/hosts" \
  --listen-address=127.0.0.1 --bind-interfaces --port="$DNSMASQ_PORT" \
  --pid-file="$DIR/dnsmasq.pid" --cache-size=10000 --user=root \
  --log-facility="$DIR/dnsmasq.log" >"$DIR/dnsmasq.out" 2>&1 </dev/null &
DNSMASQ_PID=$!
log "dnsmasq on 127.0.0.1:$DNSMASQ_PORT (pid $DNSMASQ_PID)"

# --- the answers, checked ------------------------------------------------------------------
ok=0
for _ in $(seq 100); do
  kill -0 "$DNSMASQ_PID" 2>/dev/null ||
    die "dnsmasq exited at start: $(cat "$DIR/dnsmasq.out" "$DIR/dnsmasq.log" 2>/dev/null)"
  if [[ -s "$DIR/dnsmasq.log" ]] && grep -q 'read .*hosts' "$DIR/dnsmasq.log" &&
     timeout 20 python3 - "$DNSMASQ_PORT" >/dev/null 2>&1 <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.2)
s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x06\x00\x01", ("127.0.0.1", int(sys.argv[1])))
s.recvfrom(512)
PY
  then ok=1; break; fi
  sleep 0.1
done
[[ $ok -eq 1 ]] || die "dnsmasq did not answer within 10 s: $(cat "$DIR/dnsmasq.out" "$DIR/dnsmasq.log" 2>/dev/null)"
TARN_ANSWER_BYTES=$(timeout 120 bench/dns_check.py "$DIR/hosts" "$DNS_PORT" tarn) || die "tarn's answers are wrong"
DNSMASQ_ANSWER_BYTES=$(timeout 120 bench/dns_check.py "$DIR/hosts" "$DNSMASQ_PORT" dnsmasq) || die "dnsmasq's answers are wrong"
log "both servers answer every name with its address (answer sizes: tarn $TARN_ANSWER_BYTES B, dnsmasq $DNSMASQ_ANSWER_BYTES B)"

# --- dnsperf -------------------------------------------------------------------------------
DNSPERF_ARGS=(-c "$CLIENTS" -T "$THREADS" -q "$OUTSTANDING" -Q "$MAX_QPS")
DNSPERF_CMD="dnsperf -s 127.0.0.1 -p PORT -d queries.txt -l $DURATION ${DNSPERF_ARGS[*]}"
# run_dnsperf LABEL PORT: a warm-up, then the measured run; writes $DIR/LABEL.json
run_dnsperf() {
  local label=$1 port=$2
  timeout $((WARMUP + 60)) dnsperf -s 127.0.0.1 -p "$port" -d "$DIR/queries.txt" \
    -l "$WARMUP" "${DNSPERF_ARGS[@]}" >"$DIR/$label.warmup" 2>&1 ||
    die "dnsperf warm-up on port $port failed: $(cat "$DIR/$label.warmup")"
  timeout $((DURATION + 60)) dnsperf -s 127.0.0.1 -p "$port" -d "$DIR/queries.txt" \
    -l "$DURATION" "${DNSPERF_ARGS[@]}" >"$DIR/$label.out" 2>&1 ||
    die "dnsperf on port $port failed: $(cat "$DIR/$label.out")"
  python3 - "$DIR/$label.out" "$label" >"$DIR/$label.json" <<'PY' || die "$label: $(cat "$DIR/$label.out")"
import json, re, sys
text = open(sys.argv[1]).read()
label = sys.argv[2]
def grab(pattern, what):
    m = re.search(pattern, text, re.M)
    if not m:
        raise SystemExit(f"{label}: no {what!r} in dnsperf's output")
    return m
out = {}
out["qps"] = float(grab(r"Queries per second:\s+([\d.]+)", "Queries per second").group(1))
sent = int(grab(r"Queries sent:\s+(\d+)", "Queries sent").group(1))
completed = int(grab(r"Queries completed:\s+(\d+)", "Queries completed").group(1))
lost = int(grab(r"Queries lost:\s+(\d+)", "Queries lost").group(1))
out["sent"], out["completed"], out["lost"] = sent, completed, lost
if sent == 0 or lost > 0.01 * sent:
    raise SystemExit(f"{label}: {lost} of {sent} queries lost (over 1%)")
codes = grab(r"Response codes:\s+(.*)$", "Response codes").group(1).strip()
parts = re.findall(r"([A-Z]+)\s+(\d+)", codes)
if [c for c, n in parts if int(n) > 0] != ["NOERROR"]:
    raise SystemExit(f"{label}: answers other than NOERROR: {codes}")
m = grab(r"Average Latency \(s\):\s+([\d.]+)\s+\(min\s+([\d.]+),\s+max\s+([\d.]+)\)", "Average Latency")
out["latency_avg_ms"] = float(m.group(1)) * 1e3
out["latency_max_ms"] = float(m.group(3)) * 1e3
m = re.search(r"Latency StdDev \(s\):\s+([\d.]+)", text)
if m:
    out["latency_stddev_ms"] = float(m.group(1)) * 1e3
m = re.search(r"Average packet size:\s+request\s+(\d+),\s+response\s+(\d+)", text)
if m:
    out["response_bytes"] = int(m.group(2))
json.dump(out, sys.stdout)
PY
  log "$label: $(cat "$DIR/$label.json")"
}

for r in $(seq "$ROUNDS"); do
  run_dnsperf "tarn_$r" "$DNS_PORT"
  run_dnsperf "dnsmasq_$r" "$DNSMASQ_PORT"
done

kill -0 "$SERVER_PID" 2>/dev/null || die "tarn server died during the load: $(tail -20 "$DIR/server.log")"
kill -0 "$DNSMASQ_PID" 2>/dev/null || die "dnsmasq died during the load"
RSS_KB=$(awk '/^VmHWM:/ {print $2}' "/proc/$SERVER_PID/status")
THREADS_SERVER=$(awk '/^Threads:/ {print $2}' "/proc/$SERVER_PID/status")
code=$(http GET "$BASE/healthz"); [[ "$code" == 200 ]] || die "GET /healthz after the load: HTTP $code"
# tarn's own count of what it answered, from its metrics (best effort).
METRICS=$(curl -s --max-time 10 "$BASE/metrics" | grep '^tarn_dns_queries_total' | tr '\n' ';' || true)

python3 - "$DIR" "$ROUNDS" "$INSTANCES" "$DNSPERF_CMD" "$RSS_KB" "$THREADS_SERVER" \
  "$TARN_ANSWER_BYTES" "$DNSMASQ_ANSWER_BYTES" "$METRICS" <<'PY'
import json, statistics, sys
d, rounds, instances, cmd, rss, threads, tbytes, dbytes, metrics = sys.argv[1:]
rounds = int(rounds)
runs = {p: [json.load(open(f"{d}/{p}_{r}.json")) for r in range(1, rounds + 1)]
        for p in ("tarn", "dnsmasq")}
med = lambda p, k: statistics.median(x[k] for x in runs[p])
out = {"benchmark": "dns",
       "peer": "dnsmasq (--no-resolv --no-hosts --addn-hosts with the same name/address lines, "
               "--cache-size=10000, single process) on 127.0.0.1",
       "dnsperf": cmd + " (UDP; after a warm-up run; servers measured alternately, "
                  f"{rounds} runs each; figures are medians)",
       "queries": f"the {instances} instances' A names, cycled",
       "instances": int(instances),
       "rounds": rounds,
       "tarn_dns_qps": med("tarn", "qps"),
       "dnsmasq_qps": med("dnsmasq", "qps"),
       "tarn_dns_qps_runs": [x["qps"] for x in runs["tarn"]],
       "dnsmasq_qps_runs": [x["qps"] for x in runs["dnsmasq"]],
       "tarn_dns_latency_avg_ms": med("tarn", "latency_avg_ms"),
       "dnsmasq_latency_avg_ms": med("dnsmasq", "latency_avg_ms"),
       "tarn_dns_latency_max_ms": max(x["latency_max_ms"] for x in runs["tarn"]),
       "dnsmasq_latency_max_ms": max(x["latency_max_ms"] for x in runs["dnsmasq"]),
       "tarn_dns_queries_lost": sum(x["lost"] for x in runs["tarn"]),
       "dnsmasq_queries_lost": sum(x["lost"] for x in runs["dnsmasq"]),
       "tarn_dns_queries_sent": sum(x["sent"] for x in runs["tarn"]),
       "dnsmasq_queries_sent": sum(x["sent"] for x in runs["dnsmasq"]),
       "tarn_dns_answer_bytes": int(tbytes),
       "dnsmasq_answer_bytes": int(dbytes),
       "server_peak_rss_mib": int(rss) / 1024.0,
       "server_threads": int(threads)}
if metrics:
    out["tarn_dns_metrics_after"] = metrics.rstrip(";")
out["ratio_tarn_to_dnsmasq"] = out["tarn_dns_qps"] / out["dnsmasq_qps"]
out["ratio_tarn_to_dnsmasq_runs"] = [t["qps"] / m["qps"] for t, m in zip(runs["tarn"], runs["dnsmasq"])]
print(json.dumps(out, indent=2, sort_keys=True))
PY
