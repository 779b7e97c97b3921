#!/usr/bin/env bash
# Error bars and a paired comparison: MiniLongBench with full prompts (A) and with prompts
# cut in the middle to 2000 tokens (B). Is the cut's effect on the score distinguishable
# from sampling noise? Uses the built-in simulator (no API key, no network); needs the
# reference data in ../shared/data or ASYNCBENCH_DATA_DIR. Writes into ./out/compare-example/.
set -euo pipefail
# the checkout's virtual environment (make run / make test build it), when not activated
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
DATA="${ASYNCBENCH_DATA_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}"
OUT="${1:-out/compare-example}"
mkdir -p "$OUT"
CACHE="$OUT/cache.duckdb"
run_id() { python -c 'import json, sys; print(json.load(sys.stdin)["run_id"])'; }

A=$(asyncbench run minilongbench --model sim --data-dir "$DATA" --cache "$CACHE" --out "$OUT/full" --no-progress --json | run_id)
B=$(asyncbench run minilongbench --model sim --data-dir "$DATA" --cache "$CACHE" --out "$OUT/cut" --no-progress --json \
  --max-input-tokens 2000 | run_id)

# every score in run.json has its 95% bootstrap interval in scores.ci95 (same tree shape)
python -c 'import json, sys; s = json.load(open(sys.argv[1]))["scores"]; print("overall", s["overall"], "95% CI", s["ci95"]["overall"])' \
  "$OUT/full/run.json"
asyncbench compare "${A:0:8}" "${B:0:8}" --cache "$CACHE"                    # B - A per task, category, overall
asyncbench compare "$A" "$B" --cache "$CACHE" --json > "$OUT/compare.json"   # the same as plain data
asyncbench report "$A" "$B" --cache "$CACHE" --out "$OUT/report.html"        # scores ± and the comparison
echo "open $OUT/report.html"
