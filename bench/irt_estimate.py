"""Time one MiniLongBench estimate per model: with the release's parameters (the IRT θ fit +
4,750 predictions + aggregation, and the direct and blend estimates) and with the shipped
ones (every method: also the six per-category θ fits, the ridge and the stack).

    python bench/irt_estimate.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from asyncbench.estimators.irt import SHIPPED
from asyncbench.estimators.minilongbench import estimate, load_estimator

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    scores = np.load(DATA / "longbench_scores.npz")["scores"]
    for name, where in (("release", DATA), ("shipped", SHIPPED)):
        est = load_estimator(where)
        times = []
        for _ in range(args.repeat):
            for row in scores:
                t0 = time.perf_counter()
                estimate(est, row[est.params.anchors])
                times.append(1000 * (time.perf_counter() - t0))
        times.sort()
        print(f"{name} ({', '.join(est.methods())}): {len(times)} estimates (30 models x {args.repeat}): "
              f"median {statistics.median(times):.1f} ms, p95 {times[int(0.95 * len(times))]:.1f} ms, "
              f"max {times[-1]:.1f} ms")


if __name__ == "__main__":
    main()
