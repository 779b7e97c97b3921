#!/usr/bin/env bash
# An open model on a self-hosted server, asked exactly as LongBench's pred.py asks it.
# Starts the built-in simulator playing TGI for meta-llama/Llama-2-7b-chat-hf (the real
# Llama-2 tokenizer from ../shared/data, a 4096-token context, TGI's byte-offset /tokenize
# and 422s). The run finds the model from /info through LongBench's model2path.json
# (llama2-7b-chat-4k: budget 3500, build_chat "[INST]...[/INST]" sent raw to /generate,
# the cut made with the server's /tokenize) and prints what run.json records; then a dry
# run naming the model with --official-model and cutting with a local tokenizer.json.
# Needs ../shared/data (or ASYNCBENCH_DATA_DIR); writes into ./out/open-model-example/.
set -euo pipefail
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
DATA="${ASYNCBENCH_DATA_DIR:-$HERE/../shared/data}"
OUT="${1:-out/open-model-example}"
TOK="$DATA/tokenizers/llama-2/tokenizer.json"
mkdir -p "$OUT/data/longbench"
# a data folder with LongBench's model2path.json beside its other tables
for f in "$DATA"/longbench/*; do ln -sf "$f" "$OUT/data/longbench/"; done
ln -sf "$HERE/tests/data/longbench/model2path.json" "$OUT/data/longbench/model2path.json"
ln -sfn "$DATA/minilongbench" "$OUT/data/minilongbench"
python -m asyncbench.sim --port 8766 --max-context-tokens 4096 --model-id meta-llama/Llama-2-7b-chat-hf \
  --tokenizer-file "$TOK" & SIM=$!
trap 'kill $SIM' EXIT
sleep 3
asyncbench run minilongbench:samsum,dureader --model tgi:llama --base-url http://127.0.0.1:8766 \
  --data-dir "$OUT/data" --cache "$OUT/cache.duckdb" --out "$OUT/tgi" --no-progress >/dev/null
python -c "import json,sys; t=json.load(open(sys.argv[1]))['truncation']; print(json.dumps(t, indent=1, ensure_ascii=False))" "$OUT/tgi/run.json"
asyncbench run minilongbench --model openai-compat:my-llama --base-url http://127.0.0.1:8766/v1 \
  --official-model llama2-7b-chat-4k --tokenizer "$TOK" --data-dir "$OUT/data" --dry-run \
  | python -c "import json,sys; t=json.load(sys.stdin)['truncation']; print(t['official'], t['tokenizer'], t['budget'])"
