#!/bin/sh
# Runs one libFuzzer target for a bounded time: run_fuzzer.sh NAME BINARY SECONDS SEEDDIR...
# The full log goes to NAME.log; NAME.summary keeps the closing lines (executions, coverage,
# corpus size) that scripts/test prints. On failure the tail of the log is printed here too.
set -u
name=$1 bin=$2 seconds=$3
shift 3
mkdir -p "corpus-$name"
"$bin" -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "corpus-$name" "$@" >"$name.log" 2>&1
rc=$?
{
  echo "fuzzer $name: exit $rc after ${seconds}s"
  grep -E '^#[0-9]+[[:space:]]+DONE' "$name.log" | tail -1
  grep -E '^stat::' "$name.log"
} >"$name.summary"
cat "$name.summary"
if [ "$rc" -ne 0 ]; then
  tail -n 60 "$name.log"
fi
exit "$rc"
