#!/usr/bin/env bash
# Evaluate your own data and MiniLongBench against the built-in simulator, then re-run
# (served from the cache: 0 requests), then price a real model without sending anything.
set -euo pipefail
# the checkout's virtual environment (make run / make test build it), when not activated
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
cd "$(dirname "$0")/.."
DATA=${ASYNCBENCH_DATA_DIR:-../shared/data}
CACHE=$(mktemp -d)/cache.duckdb
.venv/bin/asyncbench run jsonl:examples/my_data.jsonl --model sim --cache "$CACHE" --out runs/example-jsonl
.venv/bin/asyncbench run minilongbench --model sim --data-dir "$DATA" --cache "$CACHE" --max-input-tokens 8000 --out runs/example-mini
.venv/bin/asyncbench run minilongbench --model sim --data-dir "$DATA" --cache "$CACHE" --max-input-tokens 8000 --out runs/example-mini
OPENAI_API_KEY=${OPENAI_API_KEY:-dry-run} .venv/bin/asyncbench run minilongbench --model openai:gpt-4o-mini --data-dir "$DATA" --dry-run
.venv/bin/asyncbench cache stats --cache "$CACHE"
