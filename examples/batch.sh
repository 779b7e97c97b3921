#!/usr/bin/env bash
# Half-price evaluation through a provider's batch API (--batch), against the built-in
# simulator's OpenAI and Anthropic batch endpoints: submit and exit (--no-wait, exit 3 =
# partial), collect with the same command, then the same run through Anthropic.
set -euo pipefail
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
cd "$(dirname "$0")/.."
DATA=${ASYNCBENCH_DATA_DIR:-../shared/data}
TMP=$(mktemp -d)
.venv/bin/python -m asyncbench.sim --port 0 --batch-turnaround-s 2 > "$TMP/sim.out" &
SIM=$!
trap 'kill $SIM' EXIT
for _ in $(seq 50); do grep -qs "listening on" "$TMP/sim.out" && break; sleep 0.1; done
URL=$(sed -n 's/listening on //p' "$TMP/sim.out")
RUN=(asyncbench run minilongbench --data-dir "$DATA" --cache "$TMP/cache.duckdb" --batch)
"${RUN[@]}" --model openai:gpt-4o-mini --base-url "$URL/v1" --no-wait --out "$TMP/submit" || echo "exit $? (partial: the batch is still running)"
sleep 3
"${RUN[@]}" --model openai:gpt-4o-mini --base-url "$URL/v1" --out "$TMP/collect"   # re-attaches, submits nothing new
"${RUN[@]}" --model anthropic:claude-haiku-4-5 --base-url "$URL" --out "$TMP/anthropic"
curl -s "$URL/stats" | .venv/bin/python -c 'import json,sys; s=json.load(sys.stdin); print("batches submitted:", s["batches_submitted"], "live requests:", s["requests"])'
