#!/usr/bin/env bash
# Prompt caching (--prompt-cache auto, the default) against the built-in simulator:
# BAMBOO paperqa/meetingqa ask several questions about each paper and meeting, so the
# shared context is written to the provider's cache once and read by the other questions.
# The dry run prices each mode first (list, --batch, prompt cache, both); then the same
# run live with and without prompt caching, and through the batch API with it.
set -euo pipefail
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
cd "$(dirname "$0")/.."
DATA=${ASYNCBENCH_DATA_DIR:-../shared/data}
TMP=$(mktemp -d)
.venv/bin/python -m asyncbench.sim --port 0 --latency-ms 100 --batch-turnaround-s 1 > "$TMP/sim.out" &
SIM=$!
trap 'kill $SIM' EXIT
for _ in $(seq 50); do grep -qs "listening on" "$TMP/sim.out" && break; sleep 0.1; done
URL=$(sed -n 's/listening on //p' "$TMP/sim.out")
RUN=(asyncbench run bamboo:paperqa,meetingqa --length 4k --data-dir "$DATA" --model anthropic:claude-sonnet-4-5
     --base-url "$URL" --json --no-progress)
show() { .venv/bin/python -c '
import json, sys
s = json.load(sys.stdin)
t = s["tokens"]["total"]
print("%22s: $%.3f  input %d, read from cache %d, written %d; overall score %s" % (sys.argv[1], s["cost_usd"]["total"],
      t["prompt_tokens"], t["cached_prompt_tokens"], t["cache_write_tokens"], s["scores"]["overall"]))' "$1"; }
reset() { curl -s -X POST "$URL/stats/reset" > /dev/null; }   # empties the simulator's prompt cache
"${RUN[@]}" --cache "$TMP/dry.duckdb" --dry-run | .venv/bin/python -c \
  'import json,sys; print("dry run, USD by mode:", json.load(sys.stdin)["by_purpose"]["eval"]["cost_usd_by_mode"])'
reset; "${RUN[@]}" --cache "$TMP/off.duckdb" --out "$TMP/off" --prompt-cache off | show "list price"
reset; "${RUN[@]}" --cache "$TMP/auto.duckdb" --out "$TMP/auto" | show "prompt cache"
reset; "${RUN[@]}" --cache "$TMP/batch.duckdb" --out "$TMP/batch" --batch | show "batch + prompt cache"
