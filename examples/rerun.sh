#!/usr/bin/env bash
# Re-running a finished evaluation: the second invocation of a complete run that nothing
# changed since (data, settings, prompts, prices, asyncbench itself) is booked from the
# store — its request rows copied from the last invocation's, read from the cache, the
# stored scores kept — instead of reading back, scoring and aggregating every sample
# again; its run.json and ledger are the ones the full path writes (tests/test_reuse.py).
# Uses the built-in simulator (no key, no network). Writes into ./out/rerun-example/.
set -euo pipefail
# the checkout's virtual environment (make run / make test build it), when not activated
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
OUT="${1:-out/rerun-example}"
N="${2:-20000}"
mkdir -p "$OUT"
DATA="$OUT/data.jsonl"
python - "$DATA" "$N" <<'PY'
import json, sys
n = int(sys.argv[2])
open(sys.argv[1], "w").write("".join(json.dumps({"id": f"q{i}", "prompt": f"Item {i}: what is w{i % 97}?\nAnswer:",
                                                 "answers": [f"w{i % 97}"], "max_tokens": 4}) + "\n" for i in range(n)))
PY
RUN=(asyncbench run "jsonl:$DATA" --model sim --cache "$OUT/cache.duckdb" --out "$OUT/run" --no-progress
     --concurrency 256)
cpu() {  # the CPU seconds of one invocation (user + system), and what it booked
  python - "$@" <<'PY'
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
run = json.load(open(sys.argv[sys.argv.index("--out") + 1] + "/run.json"))
this = run["this_invocation"]
print(f"invocation {this['invocation']}: {ru.ru_utime + ru.ru_stime:.2f} CPU-s, {this['requests']} requests, "
      f"saved by cache ${this['saved_by_cache_usd']:.4f}; samples {run['samples']['settled']}/{run['samples']['total']}, "
      f"overall {run['scores']['overall']:.2f} (exit {done.returncode})")
PY
}
cpu "${RUN[@]}"   # cold: every request sent
cpu "${RUN[@]}"   # warm: booked from the store
cpu "${RUN[@]}"   # and again: each invocation is one more in the run's history
asyncbench cache runs --cache "$OUT/cache.duckdb"
