#!/usr/bin/env bash
# Every run of a cache in the browser: two MiniLongBench runs on the built-in simulator
# (full prompts, and prompts cut to 2000 tokens), then `asyncbench view` over their
# cache at http://127.0.0.1:${PORT:-8765}/ until Ctrl-C. Open a run for its live figures
# and samples (filter, search, page, open one: the link keeps it), tick two runs and
# "compare two checked" for the samples where they differ first, or "leaderboard of
# checked". Start another run into the same cache meanwhile (the third command below in
# a second terminal) and watch its page count up without a reload.
set -euo pipefail
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
DATA="${ASYNCBENCH_DATA_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}"
OUT="${1:-out/view-example}"
mkdir -p "$OUT"
CACHE="$OUT/cache.duckdb"
asyncbench run minilongbench --model sim --data-dir "$DATA" --cache "$CACHE" --out "$OUT/full" --no-progress
asyncbench run minilongbench --model sim --data-dir "$DATA" --cache "$CACHE" --out "$OUT/cut" --no-progress \
  --max-input-tokens 2000
# in a second terminal, live: asyncbench run longbench --model sim --data-dir "$DATA" --cache "$CACHE" --limit 20
asyncbench view --cache "$CACHE" --port "${PORT:-8765}"
