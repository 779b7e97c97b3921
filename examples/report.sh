#!/usr/bin/env bash
# Two runs side by side with the papers' published rows, in every report format.
# Uses the built-in simulator (no API key, no network); needs the reference data in
# ../shared/data or ASYNCBENCH_DATA_DIR. Writes into ./out/report-example/.
set -euo pipefail
# the checkout's virtual environment (make run / make test build it), when not activated
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
DATA="${ASYNCBENCH_DATA_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}"
OUT="${1:-out/report-example}"
mkdir -p "$OUT"
CACHE="$OUT/cache.duckdb"

# full prompts, then prompts cut in the middle to 2000 tokens (a second run; short prompts come from the cache)
asyncbench run minilongbench --model sim --data-dir "$DATA" --cache "$CACHE" --out "$OUT/full" --no-progress --limit 5
asyncbench run minilongbench --model sim --data-dir "$DATA" --cache "$CACHE" --out "$OUT/cut" --no-progress --limit 5 \
  --max-input-tokens 2000

asyncbench report --cache "$CACHE"                          # terminal tables
asyncbench report --cache "$CACHE" --out "$OUT/report.md"   # format from the suffix
asyncbench report --cache "$CACHE" --out "$OUT/report.json"
asyncbench report --cache "$CACHE" --out "$OUT/report.html" # one self-contained file with plots
echo "open $OUT/report.html"
