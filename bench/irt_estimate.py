"""Time one MiniLongBench estimate (θ fit + 4,750 predictions + aggregation) per model.

    python bench/irt_estimate.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from asyncbench.estimators.irt import estimate, load_params

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    params = load_params(DATA)
    scores = np.load(DATA / "longbench_scores.npz")["scores"]
    times = []
    for _ in range(args.repeat):
        for row in scores:
            t0 = time.perf_counter()
            estimate(params, row[params.anchors])
            times.append(1000 * (time.perf_counter() - t0))
    times.sort()
    print(f"{len(times)} estimates (30 models x {args.repeat}): median {statistics.median(times):.1f} ms, "
          f"p95 {times[int(0.95 * len(times))]:.1f} ms, max {times[-1]:.1f} ms")


if __name__ == "__main__":
    main()
