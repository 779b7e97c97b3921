#!/usr/bin/env bash
# An open model on a self-hosted server, asked exactly as LongBench's pred.py asks it, with
# ../shared/data as it is (it has model2maxlen.json but no model2path.json: the package
# ships the release's). Starts the built-in simulator playing TGI for
# meta-llama/Llama-2-7b-chat-hf (the real Llama-2 tokenizer, a 4096-token context, TGI's
# byte-offset /tokenize and 422s). The run finds the model from /info through
# model2path.json (llama2-7b-chat-4k: budget 3500, build_chat "[INST]...[/INST]" sent raw
# to /generate, the cut made with the server's /tokenize) and prints what run.json
# records. Then a second simulator plays vLLM started with --served-model-name llama and
# --max-model-len 2048: the model is found from /v1/models `root`, and the dry run says in
# one line that prompts are cut further to fit the smaller context. Last, a server whose
# model pred.py does not name: one line says so and how to name it (--official-model).
# Needs ../shared/data (or ASYNCBENCH_DATA_DIR); writes into ./out/open-model-example/.
set -euo pipefail
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
DATA="${ASYNCBENCH_DATA_DIR:-$HERE/../shared/data}"
OUT="${1:-out/open-model-example}"
TOK="$DATA/tokenizers/llama-2/tokenizer.json"
mkdir -p "$OUT"
python -m asyncbench.sim --port 8766 --max-context-tokens 4096 --model-id meta-llama/Llama-2-7b-chat-hf \
  --tokenizer-file "$TOK" & TGI=$!
python -m asyncbench.sim --port 8767 --max-context-tokens 2048 --model-id meta-llama/Llama-2-7b-chat-hf \
  --served-model-name llama --tokenizer-file "$TOK" & VLLM=$!
python -m asyncbench.sim --port 8768 --max-context-tokens 4096 --model-id Qwen/Qwen2-7B-Instruct & OTHER=$!
trap 'kill $TGI $VLLM $OTHER' EXIT
sleep 3
asyncbench run minilongbench:samsum,dureader --model tgi:llama --base-url http://127.0.0.1:8766 \
  --data-dir "$DATA" --cache "$OUT/cache.duckdb" --out "$OUT/tgi" --no-progress >/dev/null
python -c "import json,sys; t=json.load(open(sys.argv[1]))['truncation']; print(json.dumps(t, indent=1, ensure_ascii=False))" "$OUT/tgi/run.json"
asyncbench run minilongbench:gov_report,hotpotqa --model openai-compat:llama --base-url http://127.0.0.1:8767/v1 \
  --data-dir "$DATA" --dry-run --json \
  | python -c "import json,sys; t=json.load(sys.stdin)['truncation']; print(t['official']['why'], t['budget'], t.get('fitted', {}).get('n'))"
asyncbench run minilongbench:trec --model tgi:qwen --base-url http://127.0.0.1:8768 --data-dir "$DATA" \
  --dry-run >/dev/null
