# Shared by the bench scripts that drive a `tarn server` over HTTP (api_bench.sh,
# dns_bench.sh). Source it after setting DIR (the run's temporary directory), NAME (the
# benchmark's assembly), BENCH_USER, and, once known, BASE (http://127.0.0.1:PORT),
# SERVER_PID, TOKEN (BENCH_USER's bearer token, from make_token) and POSTED (1 once the
# assembly was posted); and after defining log().

# Pids whose environment has TARN_ASSEMBLY=$NAME exactly.
instance_pids() {
  python3 - "$NAME" <<'PY'
import os, sys
want = b"TARN_ASSEMBLY=" + sys.argv[1].encode()
for e in os.listdir("/proc"):
    if e.isdigit():
        try:
            if want in open(f"/proc/{e}/environ", "rb").read().split(b"\0"):
                print(e)
        except OSError:
            pass
PY
}

# make_token TARN SOCKET -> prints a bearer token of $BENCH_USER, made by root acting as it
# over the server's Unix socket.
make_token() {
  TARN_USER="$BENCH_USER" "$1" token create --socket "$2" --name "bench-$$" --ttl 1d
}

# http METHOD URL [BODYFILE] -> prints the status; the body goes to $DIR/body. Sends $TOKEN.
http() {
  local method=$1 url=$2 data=${3:-}
  local args=(-s -o "$DIR/body" -w '%{http_code}' --max-time 30 -X "$method")
  [[ -n "${TOKEN:-}" ]] && args+=(-H "Authorization: Bearer $TOKEN")
  [[ -n "$data" ]] && args+=(-H 'Content-Type: application/json' --data-binary "@$data")
  curl "${args[@]}" "$url" || echo "curl-failed"
}

# For the cleanup trap: destroys the assembly (when it was posted) and waits up to 30 s
# until it is gone (404, no instance process), then stops the server: SIGTERM, SIGKILL
# after 40 s.
stop_tarn_server() {
  [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null || return 0
  if [[ $POSTED -eq 1 ]]; then
    curl -s -o /dev/null --max-time 30 -X DELETE -H "Authorization: Bearer $TOKEN" \
      "$BASE/app/v1/services/$NAME"
    local gone=0 code
    for _ in $(seq 300); do
      code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
        -H "Authorization: Bearer $TOKEN" "$BASE/app/v1/services/$NAME")
      if [[ "$code" == 404 ]] && ! instance_pids | grep -q .; then gone=1; break; fi
      sleep 0.1
    done
    [[ $gone -eq 1 ]] || log "cleanup: assembly $NAME not gone (404, no instances) within 30 s"
  fi
  kill -TERM "$SERVER_PID"
  for _ in $(seq 400); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    log "cleanup: tarn server ignored SIGTERM for 40 s; killing it"
    kill -KILL "$SERVER_PID"
  fi
  wait "$SERVER_PID" 2>/dev/null
}

# For the cleanup trap: kills anything of the run still alive (instances by their
# environment, shims and peers by `pattern` on their command lines) and removes $DIR.
kill_leftovers_and_clean() {
  local pattern=$1 left
  left=$( { instance_pids; pgrep -f "$pattern" || true; } | sort -u)
  if [[ -n "$left" ]]; then
    log "cleanup: killing leftover processes: $(echo $left)"
    kill -KILL $left 2>/dev/null
  fi
  rm -rf "$DIR"
}
