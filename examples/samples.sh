#!/usr/bin/env bash
# Every sample of a run: prompt as sent, references, prediction, parsed answer, score,
# judge calls, tokens, USD, latency. Two runs write into one cache at the same time
# while `cache runs` reads it. Built-in simulator (no key, no network); reference data in
# ../shared/data or ASYNCBENCH_DATA_DIR. Writes into ./out/samples-example/.
set -euo pipefail
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
DATA="${ASYNCBENCH_DATA_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}"
OUT="${1:-out/samples-example}"
mkdir -p "$OUT"
export ASYNCBENCH_CACHE="$OUT/cache.duckdb"   # instead of --cache on every command

# two evaluations at once on one cache file (a 100-LongBench run judged by the simulator)
asyncbench run minilongbench --model sim --data-dir "$DATA" --out "$OUT/mini" --no-progress >/dev/null &
asyncbench run 100-longbench --model sim --judge sim --lengths 2k,4k --rows 2 --data-dir "$DATA" \
  --out "$OUT/lb100" --no-progress >/dev/null &
sleep 2; asyncbench cache runs                # readable while both write
wait
MINI=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['run_id'])" "$OUT/mini/run.json")
LB100=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['run_id'])" "$OUT/lb100/run.json")

asyncbench samples "${MINI:0:6}" --task trec                  # a table, one line per sample
asyncbench samples "$MINI" --out "$OUT/mini.parquet"          # or .jsonl / .csv
asyncbench samples "$MINI" --out "$OUT/mini.jsonl"
# the run's headline again, from its export (any row order): `overall` in run.json is this estimate
asyncbench estimate minilongbench --anchor-scores "$OUT/mini.jsonl" | tail -2
asyncbench samples "$LB100" --format jsonl | head -n 1 | python -m json.tool | head -n 40   # judge calls included
asyncbench report "$MINI" "$LB100" --out "$OUT/report.html"    # with the sample viewer
echo "open $OUT/report.html#samples=$MINI&task=qasper&sort=score:asc"
