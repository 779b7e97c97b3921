#!/usr/bin/env bash
# A server cannot hold a run: against the hostile server (asyncbench/sim/hostile.py) a run
# ends partial (exit 3) within about one --timeout whether the server only answers 429
# with "Retry-After: 1e9", drips a byte every half second, or sends a gzip bomb; a body
# over --max-response-bytes is refused while it streams. The table for every behaviour
# and transport: bench/hostile_servers.md.
set -uo pipefail
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
cd "$(dirname "$0")/.."
TMP=$(mktemp -d)
.venv/bin/python -m asyncbench.sim.hostile --port-file "$TMP/port" > /dev/null &
SERVER=$!
trap 'kill $SERVER' EXIT
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
PORT=$(cat "$TMP/port")
for i in 0 1 2 3; do echo "{\"id\": \"q$i\", \"prompt\": \"question $i\", \"answers\": [\"a\"]}"; done > "$TMP/d.jsonl"
for behaviour in retry-after-huge slow-drip gzip-bomb; do
  start=$(date +%s)
  asyncbench run "jsonl:$TMP/d.jsonl" --model openai-compat:m --base-url "http://127.0.0.1:$PORT/$behaviour/v1" \
    --timeout 5 --max-response-bytes 1000000 --cache "$TMP/$behaviour.duckdb" --out "$TMP/$behaviour" --no-progress \
    > /dev/null 2> "$TMP/$behaviour.err"
  echo "$behaviour: exit $? after $(( $(date +%s) - start )) s: $(tail -1 "$TMP/$behaviour.err" | cut -c1-110)"
done
