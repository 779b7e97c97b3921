#!/usr/bin/env bash
# Adaptive testing on LongBench against the built-in simulator: a small LongBench-format
# data directory (5 samples per dataset, short contexts) is generated, the run asks the
# samples that say most about the full-LongBench Overall per token and stops at the
# target standard error (or the end of the pool); the same command again costs nothing.
# With the real data: DIR/longbench/data/*.jsonl from LongBench's data.zip and
# DIR/minilongbench/ from the MiniLongBench release.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${ASYNCBENCH_DATA_DIR:-../shared/data}
WORK=$(mktemp -d)
.venv/bin/python tests/adaptive_data.py "$WORK/data" "$DATA" 5
for _ in 1 2; do
  .venv/bin/asyncbench run longbench --adaptive --target-se 0.02 --adaptive-batch 8 --model sim \
    --data-dir "$WORK/data" --cache "$WORK/cache.duckdb" --out runs/example-adaptive
done
.venv/bin/python -c "import json; e = json.load(open('runs/example-adaptive/run.json'))['scores']['estimate']; \
print({k: e[k] for k in ('overall', 'se', 'ci95', 'samples_used', 'tokens', 'stop_reason')})"
# offline: what adaptive testing would have cost and how close it would have been, replayed
# on 10 held-out models' real per-sample LongBench scores
.venv/bin/python bench/adaptive_replay.py --data "$DATA"
