#!/usr/bin/env bash
# Generate a docker compose file for 4 TGI replicas (2 GPUs each, 8 GPUs in all) and 2 Ray
# workers into a temp dir, then list its services and the evaluator's endpoints.
# Needs no docker; to start the stack see docker/README.md.
set -euo pipefail
# the checkout's virtual environment (make run / make test build it), when not activated
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
cd "$(dirname "$0")/.."
ASYNCBENCH=${ASYNCBENCH:-.venv/bin/asyncbench}
OUT=$(mktemp -d)/compose.yaml
# --build-context: the repo root as seen from the compose file, so the file works where it is.
"$ASYNCBENCH" deploy compose --replicas 4 --gpus-per-replica 2 --ray-workers 2 \
  --model-id meta-llama/Llama-3.1-8B-Instruct --benchmark minilongbench \
  --build-context "$(pwd)" --out "$OUT"

echo "services in $OUT:"
awk '/^services:/ {s = 1; next} /^[^ ]/ {s = 0} s && /^  [^ ]/ {sub(/:$/, "", $1); print "  " $1}' "$OUT"
echo "evaluator endpoints:"
grep -o 'http://tgi-[0-9]*:80' "$OUT" | sed 's/^/  /'
