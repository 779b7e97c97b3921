#!/usr/bin/env bash
# MiniLongBench on the Ray backend against a fleet of two simulator replicas: the
# endpoints come from a file, two Ray workers share one 600 RPM limit, the driver keeps
# the only DuckDB writer. Without --ray-address, asyncbench starts a private local Ray
# instance on 127.0.0.1 (needs the ray extra: pip install -e '.[ray]').
set -euo pipefail
# the checkout's virtual environment (make run / make test build it), when not activated
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
cd "$(dirname "$0")/.."
DATA=${ASYNCBENCH_DATA_DIR:-../shared/data}
WORK=$(mktemp -d)
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
for i in 0 1; do
  .venv/bin/asyncbench simulate --port 0 --port-file "$WORK/port$i" --latency-ms 50 >/dev/null 2>&1 &
done
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
for i in 0 1; do
  while [ ! -s "$WORK/port$i" ]; do sleep 0.1; done
  echo "http://127.0.0.1:$(cat "$WORK/port$i")/v1" >> "$WORK/fleet.txt"
done
echo "fleet:"; cat "$WORK/fleet.txt"
.venv/bin/asyncbench run minilongbench --model openai-compat:sim --base-urls-file "$WORK/fleet.txt" \
  --endpoint-id example-fleet --data-dir "$DATA" --cache "$WORK/cache.duckdb" --out "$WORK/run" \
  --backend ray --ray-workers 2 --rpm 600 --no-progress
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('backend', r['backend'], 'endpoints', r['endpoints'])" "$WORK/run/run.json"
