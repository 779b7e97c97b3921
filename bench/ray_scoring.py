"""Benchmark: CPU-heavy scoring on the Ray backend (2 workers) vs the local backend.

20,000 ROUGE-scored predictions (English ROUGE-L and Chinese ROUGE-L over jieba words),
built deterministically from the MiniLongBench release by bench/scoring.py, scored

  1. locally as `asyncbench run` does without Ray: `score_many` over a process pool on
     all cores of this machine;
  2. on a Ray cluster started here on 127.0.0.1 with 2 CPUs, through the same
     `RayRunner.map_chunks` that `--backend ray` uses (one task per chunk of 500);
     first call (cold: worker processes start and load jieba) and second call (warm).

and checks the scores are identical. Throughput ratio = local wall / Ray wall.

    .venv/bin/python bench/ray_scoring.py [--n 20000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from scoring import ROUGE_DATASETS, ZH_ROUGE, make_predictions  # noqa: E402

from asyncbench.benchmarks.longbench.score import score_many  # noqa: E402

ENV = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
       "RAY_AUTH_MODE": "disabled"}


def rouge_items(n: int) -> list:
    items, seed = [], 0
    while len(items) < n:
        items += [i for i in make_predictions(5 * n, seed) if i[0] in ROUGE_DATASETS]
        seed += 1
    return items[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    args = parser.parse_args()
    items = rouge_items(args.n)
    columns = list(zip(*items))
    zh = sum(i[0] in ZH_ROUGE for i in items)
    print(f"{len(items)} ROUGE predictions ({zh} Chinese, jieba); {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")

    t = time.perf_counter()
    local = score_many(*columns, jobs=os.cpu_count())
    local_wall = time.perf_counter() - t
    print(f"local (process pool, {os.cpu_count()} processes): {local_wall:.2f} s, {len(items) / local_wall:,.0f} predictions/s")

    os.environ.update(ENV)
    from asyncbench.runners.ray import RayRunner

    # no address: a Ray of this process's own (ray.init), ended by aclose (ray.shutdown),
    # so nothing outlives the script and no other cluster on the host is touched
    backend = RayRunner(None, workers=2, concurrency=32, timeout_s=120, max_attempts=6)
    try:
        for label in ("cold", "warm"):
            t = time.perf_counter()
            remote = score_many(*columns, map_chunks=backend.map_chunks)
            wall = time.perf_counter() - t
            assert remote == local, "Ray and local scores differ"
            print(f"ray ({label}, 2 CPUs): {wall:.2f} s, {len(items) / wall:,.0f} predictions/s; "
                  f"throughput ratio ray/local {local_wall / wall:.2f}")
    finally:
        anyio.run(backend.aclose)
    print("scores identical: yes")


if __name__ == "__main__":
    main()
