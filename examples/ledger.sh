#!/usr/bin/env bash
# The ledger: samples by status, a budget kept across invocations, a partial run and its
# exit code, history kept on re-runs. Uses the built-in simulator (no key, no network).
# Writes into ./out/ledger-example/.
set -uo pipefail
# the checkout's virtual environment (make run / make test build it), when not activated
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
OUT="${1:-out/ledger-example}"
mkdir -p "$OUT"
CACHE="$OUT/cache.duckdb"
DATA="$OUT/data.jsonl"
PRICES="$OUT/prices.json"
# 30 questions; q1 is too long for any context (the simulator's marker), q3 repeats q0
python - "$DATA" <<'PY'
import json, sys
rows = [{"id": f"q{i}", "prompt": ("<<SIM:CONTEXT_TOO_LONG>> " if i == 1 else "") + f"Passage {i}: "
         + " ".join(f"w{(i * 7 + k) % 97}" for k in range(400)) + "\nAnswer:", "answers": ["w1"], "max_tokens": 8}
        for i in range(30)]
rows[3] = dict(rows[0], id="q3")
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in rows))
PY
echo '{"models": {"sim": {"input": 1000.0, "output": 1000.0}}}' > "$PRICES"   # expensive on purpose
RUN=(asyncbench run "jsonl:$DATA" --model sim --prices "$PRICES" --cache "$CACHE" --out "$OUT/run" --no-progress)

asyncbench run "jsonl:$DATA" --model sim --prices "$PRICES" --cache "$CACHE" --dry-run   # what it would cost
"${RUN[@]}" --max-cost 5;    echo "exit $? (3: partial — budget reached, q1 failed)"
"${RUN[@]}" --max-cost 5;    echo "exit $? (the budget is the run's: nothing more is spent)"
"${RUN[@]}" --max-cost 100;  echo "exit $? (more budget: the run continues; q1 still fails)"
asyncbench cache runs --cache "$CACHE"                       # partial n/N, invocations, cost to produce
asyncbench report --cache "$CACHE" --out "$OUT/report.md"    # the same figures, with every invocation
python -c "import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({k: r[k] for k in ('complete','partial','samples','cost_usd')}, indent=1)); print([(i['invocation'], i['requests'], i['cost_usd']) for i in r['invocations']])" "$OUT/run/run.json"
# the dry run again: every answer is cached now, so what is left is exact (q1 and the
# budget-skipped ones are an upper bound); `--json` prints the same as JSON
asyncbench run "jsonl:$DATA" --model sim --prices "$PRICES" --cache "$CACHE" --dry-run
asyncbench samples "$(asyncbench cache runs --cache "$CACHE" | head -1 | cut -d' ' -f1)" --cache "$CACHE" \
  --format jsonl | python -c "import json,sys; print([(r['sample_id'], r['status'], r['shared_with']) for r in map(json.loads, sys.stdin) if r['status'] == 'shared'])"  # q3 shares q0's answer
