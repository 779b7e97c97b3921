"""Benchmark: bootstrap intervals of a full LongBench run (4,750 samples, 21 datasets).

Per-sample scores are a real model's, from the MiniLongBench release
(../shared/data/minilongbench/longbench_scores.npz, one row per model). Times
`estimators.intervals.intervals` on the run's plan (each dataset resampled on its own,
then LongBench's category and EN/ZH/All macro-averages), and `compare` of two models on
the same 4,750 samples (paired bootstrap and paired permutation test). Best of --repeat.

    .venv/bin/python bench/intervals.py [--resamples 1000] [--repeat 5] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from asyncbench.benchmarks.longbench.aggregate import resampling_plan
from asyncbench.estimators.intervals import compare, intervals

ROOT = Path(__file__).resolve().parents[1]


def _rows(scores: np.ndarray, datasets: list[tuple[str, int]]) -> list[tuple[str, float]]:
    names = [name for name, n in datasets for _ in range(n)]
    return list(zip(names, scores.tolist()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    args = ap.parse_args()
    folder = Path(args.data) / "minilongbench"
    table = np.load(folder / "longbench_scores.npz")["scores"]
    meta = json.loads((folder / "longbench_scores.json").read_text())
    datasets = [(d["name"], int(d["n"])) for d in meta["datasets"]]
    assert sum(n for _, n in datasets) == table.shape[1] == 4750
    plan_a, plan_b = resampling_plan(_rows(table[0], datasets)), resampling_plan(_rows(table[1], datasets))

    def best(fn) -> float:  # type: ignore[no-untyped-def]
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    t_plan = best(lambda: resampling_plan(_rows(table[0], datasets)))
    t_ci = best(lambda: intervals(plan_a, n_resamples=args.resamples))
    t_cmp = best(lambda: compare(plan_a, plan_b, n_resamples=args.resamples))
    ci = intervals(plan_a, n_resamples=args.resamples)
    diff = compare(plan_a, plan_b, n_resamples=args.resamples)["overall"]
    print(f"{table.shape[1]} samples, {len(datasets)} datasets, {args.resamples} resamples (best of {args.repeat})")
    print(f"plan (group the samples):          {1000 * t_plan:7.1f} ms")
    print(f"intervals (task, category, EN/ZH/All): {1000 * t_ci:7.1f} ms   overall 95% CI {ci['overall']}")
    print(f"compare (paired bootstrap + permutation): {1000 * t_cmp:7.1f} ms   "
          f"{meta['models'][1]} - {meta['models'][0]}: {diff['diff']:+.2f} {diff['ci']} p {diff['p']}")


if __name__ == "__main__":
    main()
