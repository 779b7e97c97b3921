#!/usr/bin/env bash
# A real llama.cpp server in the loop: llama-server (built from source once by
# `make test-servers` or `python tests/servers/llama_build.py`) serves a tiny random-weight
# model with the Llama-2 vocabulary; asyncbench finds it is llama.cpp (/v1/models), cuts
# with its /tokenize as LongBench's pred.py cuts, and runs one sample per LongBench dataset.
# With your own server: `llama-server -m MODEL.gguf -c 4096 -np 1` and the same `run` line.
# Needs ../shared/data (or ASYNCBENCH_DATA_DIR); writes into ./out/llama-server-example/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="$ROOT/.venv/bin:$PATH"
DATA="${ASYNCBENCH_DATA_DIR:-$(cd "$ROOT/.." && pwd)/shared/data}"
OUT="${1:-out/llama-server-example}"
mkdir -p "$OUT"
BIN="$(python "$ROOT/tests/servers/llama_build.py" --check)" || { echo "$BIN"; exit 1; }
PYTHONPATH="$ROOT/tests" python -c "import sys; from pathlib import Path; from servers.tiny_gguf import write_model; \
write_model(Path(sys.argv[1]), Path(sys.argv[2]))" "$DATA/tokenizers/llama-2/tokenizer.json" "$OUT/tiny.gguf"
# -np N divides -c among N slots: one slot of 4,096 tokens
"$BIN" -m "$OUT/tiny.gguf" --host 127.0.0.1 --port 8766 -c 4096 -np 1 --no-webui --alias llama2-7b-chat-4k \
  >"$OUT/server.log" 2>&1 & SERVER=$!
trap 'kill $SERVER' EXIT
until curl -sf http://127.0.0.1:8766/health >/dev/null; do sleep 0.2; done
asyncbench run minilongbench --limit 1 --model openai-compat:llama2-7b-chat-4k --base-url http://127.0.0.1:8766/v1 \
  --data-dir "$DATA" --cache "$OUT/cache.duckdb" --out "$OUT/run" --no-progress >/dev/null
python -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['samples']); print(json.dumps(r['truncation'], indent=1))" "$OUT/run/run.json"
