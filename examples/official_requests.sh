#!/usr/bin/env bash
# What reaches the model: prompt budgets, the model's own tokenizer and the official cut.
# Starts the built-in simulator as a TGI server with a 4096-token context (it serves
# /info and /tokenize like TGI), runs MiniLongBench against it and prints how prompts were
# cut; then a dry run for a model LongBench's model2maxlen.json names (3500 tokens).
# Needs ../shared/data (or ASYNCBENCH_DATA_DIR); writes into ./out/official-example/.
set -euo pipefail
# the checkout's virtual environment (make run / make test build it), when not activated
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
DATA="${ASYNCBENCH_DATA_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}"
OUT="${1:-out/official-example}"
mkdir -p "$OUT"
python -m asyncbench.sim --port 8765 --max-context-tokens 4096 & SIM=$!
trap 'kill $SIM' EXIT
sleep 2
asyncbench run minilongbench --model tgi:llama --base-url http://127.0.0.1:8765 --data-dir "$DATA" \
  --cache "$OUT/cache.duckdb" --out "$OUT/tgi" --no-progress >/dev/null
python -c "import json,sys; t=json.load(open(sys.argv[1]))['truncation']; print(json.dumps(t, indent=1))" "$OUT/tgi/run.json"
# budget 3500 from model2maxlen.json; trec, triviaqa, samsum, lsht, lcc, repobench-p go raw to /v1/completions
asyncbench run minilongbench --model openai-compat:llama2-7b-chat-4k --base-url http://127.0.0.1:8765/v1 \
  --tokenizer cl100k_base --data-dir "$DATA" --dry-run --json | python -c "import json,sys; print(json.load(sys.stdin)['truncation'])"
