#!/usr/bin/env bash
# MiniLongBench's estimate of the full LongBench score with its 90% interval, from a
# model's 237 anchor scores: the shipped parameters (default) against the release's, and a
# cost-aware anchor set built for 3% of the full benchmark's length. Uses a real model's
# scores from the reference data (../shared/data or ASYNCBENCH_DATA_DIR), no API key, no
# network. Writes into ./out/minilongbench-example/.
set -euo pipefail
export PATH="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin:$PATH"
DATA="${ASYNCBENCH_DATA_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}"
OUT="${1:-out/minilongbench-example}"
mkdir -p "$OUT"

# one model's 237 anchor scores (0-1, sorted-anchor order) and its true full-LongBench Overall
python - "$DATA/minilongbench" "$OUT/anchor_scores.json" <<'PY'
import json, sys
import numpy as np
from asyncbench.estimators.irt import aggregate
root, out = sys.argv[1], sys.argv[2]
z = np.load(f"{root}/longbench_scores.npz")
anchors = json.load(open(f"{root}/anchors.json"))["sorted_anchors"]
row = list(z["models"]).index("llama-30b")
json.dump({"scores": z["scores"][row, anchors].tolist()}, open(out, "w"))
print(f"llama-30b true full-LongBench Overall: {100 * aggregate(z['scores'][row])['overall']:.2f}")
PY

echo "--- shipped parameters (the default method, chosen by its error on unseen models; 90% intervals)"
asyncbench estimate minilongbench --anchor-scores "$OUT/anchor_scores.json" | tail -10
echo "--- the release's own example file (its llama-30b re-run's anchor scores), as it is"
asyncbench estimate minilongbench --anchor-scores "$DATA/minilongbench/example_reference_scores.json" | grep -A1 "^estimated"
echo "--- the release's parameters (irt, no interval)"
asyncbench estimate minilongbench --anchor-scores "$OUT/anchor_scores.json" --params release --data-dir "$DATA" | tail -3

echo "--- cost-aware anchors for 3% of the full benchmark's length (about a minute)"
asyncbench minilongbench build --scores "$DATA/minilongbench/longbench_scores.npz" \
  --embeddings "$DATA/minilongbench/embeddings_pca.npy" --cost-aware --budget 0.03 --out "$OUT/cost-aware"
python - "$DATA/minilongbench" "$OUT/cost-aware" <<'PY'
import json, sys
import numpy as np
from pathlib import Path
from asyncbench.estimators.minilongbench import estimate, load_estimator
root, built = sys.argv[1], Path(sys.argv[2])
params = load_estimator(built)
z = np.load(f"{root}/longbench_scores.npz")
row = list(z["models"]).index("llama-30b")  # one of the 30 the build saw: a demonstration, not a test
est = estimate(params, z["scores"][row, params.params.anchors])
print(f"{len(params.params.anchors)} anchors, {100 * est['token_cost']['fraction']:.2f}% of the length: "
      f"{est['method']} {100 * est['overall']:.2f}, 90% interval {100 * est['overall_ci90'][0]:.2f}-{100 * est['overall_ci90'][1]:.2f}")
PY
