#!/usr/bin/env bash
# Serving latency from the run that scores (issue 38): BAMBOO (4k against 16k) and
# MiniLongBench (prompt-token deciles) against the built-in simulator print TTFT and TPOT
# percentiles per context-length bin; a second model (the simulator with a slower prefill
# and decode) makes the two-model report and leaderboard, whose HTML files draw the
# prefill curve and score against cost and against p95 time to first token.
set -euo pipefail
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
cd "$(dirname "$0")/.."
DATA=${ASYNCBENCH_DATA_DIR:-../shared/data}
TMP=$(mktemp -d)
asyncbench run bamboo --model sim --data-dir "$DATA" --cache "$TMP/c.duckdb" --out "$TMP/bamboo" --no-progress \
  | sed -n '/^serving latency/,/^  all/p'
asyncbench run minilongbench --model sim --data-dir "$DATA" --cache "$TMP/c.duckdb" --out "$TMP/fast" --no-progress \
  | sed -n '/^serving latency/,/^  all/p'
# the same samples through a slower server: 25 ms of prefill per 1,000 prompt tokens, 3 ms a token
.venv/bin/python -m asyncbench.sim --port 0 --latency-ms 5 --prefill-ms-per-ktok 25 --per-token-ms 3 \
  --model-id big-model > "$TMP/sim.out" &
SIM=$!
trap 'kill $SIM' EXIT
for _ in $(seq 50); do grep -qs "listening on" "$TMP/sim.out" && break; sleep 0.1; done
URL=$(sed -n 's/listening on //p' "$TMP/sim.out")
asyncbench run minilongbench --model openai-compat:big-model --base-url "$URL/v1" --data-dir "$DATA" \
  --cache "$TMP/c.duckdb" --out "$TMP/slow" --no-progress > /dev/null
FAST=$(.venv/bin/python -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$TMP/fast/run.json")
SLOW=$(.venv/bin/python -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$TMP/slow/run.json")
asyncbench samples "$FAST" --cache "$TMP/c.duckdb" --format jsonl | head -1 | .venv/bin/python -c '
import json, sys
r = json.loads(sys.stdin.readline())
print({k: r[k] for k in ("sample_id", "timing", "prompt_tokens", "ttft_ms", "tpot_ms", "e2e_ms")})'
asyncbench report "$FAST" "$SLOW" --cache "$TMP/c.duckdb" --out "$TMP/report.html"
asyncbench report "$FAST" "$SLOW" --cache "$TMP/c.duckdb" --leaderboard --out "$TMP/leaderboard.html"
echo "open $TMP/report.html (#serving, #plot-prefill) and $TMP/leaderboard.html"
