#!/usr/bin/env bash
# One leaderboard for three models on one benchmark: ranked with 95% intervals, which
# pairs the data can tell apart, cost and latency per model, and a fourth model whose
# endpoint fails half its requests (partial: listed below, never ranked). All against the
# built-in simulator (no API key, no network): models differ in how much of the context
# they keep (a look-up file whose answer sits at a varying depth), as models with smaller
# context windows would. Writes into ./out/leaderboard-example/ (or $1).
set -euo pipefail
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
cd "$(dirname "$0")/.."
OUT="${1:-out/leaderboard-example}"
mkdir -p "$OUT"
CACHE="$OUT/cache.duckdb"
python - "$OUT/lookup.jsonl" <<'PY'
import json, sys
filler = "The weather was mild that day and the birds sang in the old garden behind the house. "
with open(sys.argv[1], "w") as fh:
    for i in range(40):
        depth = (i * 37) % 40  # where the answer sits among 40 filler sentences
        context = filler * depth + f"The secret code of box {i} is {1000 + 7 * i}. " + filler * (40 - depth)
        fh.write(json.dumps({"id": f"q{i}", "task": "lookup" if i % 2 else "recall", "metric": "contains",
                             "prompt": f"Context: {context}\nQuestion: What is the secret code of box {i}?\nAnswer:",
                             "answers": [str(1000 + 7 * i)]}) + "\n")
PY
python -m asyncbench.sim --port 0 > "$OUT/sim-ok.out" &
SIMS=($!)
python -m asyncbench.sim --port 0 --error-rate 0.5 > "$OUT/sim-flaky.out" &  # half the requests fail
SIMS+=($!)
trap 'kill "${SIMS[@]}"' EXIT
url_of() {  # the URL a simulator prints once it listens
  for _ in $(seq 100); do grep -qs "listening on" "$1" && break; sleep 0.1; done
  sed -n 's/listening on //p' "$1"
}
OK=$(url_of "$OUT/sim-ok.out")
FLAKY=$(url_of "$OUT/sim-flaky.out")
run_id() { python -c 'import json, sys; print(json.load(sys.stdin)["run_id"])'; }
RUN=(asyncbench run "jsonl:$OUT/lookup.jsonl" --cache "$CACHE" --no-progress --json)

A=$("${RUN[@]}" --model sim --out "$OUT/sim" | run_id)                      # the whole context
B=$("${RUN[@]}" --model openai-compat:mid-ctx --base-url "$OK/v1" --max-input-tokens 500 --out "$OUT/mid" | run_id)
C=$("${RUN[@]}" --model openai-compat:small-ctx --base-url "$OK/v1" --max-input-tokens 300 --out "$OUT/small" | run_id)
D=$("${RUN[@]}" --model openai-compat:flaky --base-url "$FLAKY/v1" --max-attempts 1 --out "$OUT/flaky" || true)
D=$(echo "$D" | run_id)                                                   # exit 3: partial

asyncbench report --leaderboard "$A" "$B" "$C" "$D" --cache "$CACHE"        # terminal, 100 columns
# the same from an eval set's list of runs, as Markdown, JSON and one HTML file
python - "$OUT/set.json" "$A" "$B" "$C" "$D" <<'PY'
import json, sys
models = ["sim", "openai-compat:mid-ctx", "openai-compat:small-ctx", "openai-compat:flaky"]
json.dump([{"model": m, "benchmark": "lookup", "run_id": r, "status": "done"} for m, r in zip(models, sys.argv[2:])],
          open(sys.argv[1], "w"))
PY
asyncbench report --set "$OUT/set.json" --cache "$CACHE" --out "$OUT/leaderboard.md"
asyncbench report --set "$OUT" --cache "$CACHE" --out "$OUT/leaderboard.json"
asyncbench report --set "$OUT" --cache "$CACHE" --out "$OUT/leaderboard.html"  # with the samples they disagree on
echo "open $OUT/leaderboard.html"
