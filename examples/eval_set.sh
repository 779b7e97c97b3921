#!/usr/bin/env bash
# An eval set (examples/eval_set.toml: 3 models x 2 benchmarks) against two simulators:
# "OpenAI" with a 500 RPM limit that two models share, and "Anthropic". Prices it first
# (--dry-run: each run and the set's total), runs it, then runs it again (all cached:
# nothing sent, nothing paid). Needs the reference data in ../shared/data or ASYNCBENCH_DATA_DIR.
set -euo pipefail
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
cd "$(dirname "$0")/.."
DATA=${ASYNCBENCH_DATA_DIR:-../shared/data}
TMP=$(mktemp -d)
start_sim() {  # $1: name, the rest: simulator flags; prints its URL
  .venv/bin/python -m asyncbench.sim --port 0 "${@:2}" > "$TMP/$1.out" &
  echo $! >> "$TMP/pids"
  for _ in $(seq 100); do grep -qs "listening on" "$TMP/$1.out" && break; sleep 0.1; done
  sed -n 's/listening on //p' "$TMP/$1.out"
}
trap 'kill $(cat "$TMP/pids")' EXIT
export OPENAI_BASE_URL="$(start_sim openai --rpm 500)/v1" ANTHROPIC_BASE_URL="$(start_sim anthropic)"
export OPENAI_API_KEY=sim-key ANTHROPIC_API_KEY=sim-key   # the simulators take any key
SET=(asyncbench run --set examples/eval_set.toml --data-dir "$DATA" --cache "$TMP/cache.duckdb" --out "$TMP/set"
     --no-progress)
"${SET[@]}" --dry-run
"${SET[@]}"
"${SET[@]}"   # again: every answer from the cache, $0 more
curl -s "${OPENAI_BASE_URL%/v1}/stats" | .venv/bin/python -c \
  'import json, sys; s = json.load(sys.stdin); print("OpenAI simulator:", s["ok"], "answered,", s["rate_limited"], "429s")'
cat "$TMP/set/set.json"
