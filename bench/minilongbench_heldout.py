"""Held-out accuracy of MiniLongBench's estimate: k-fold over models, anchors chosen inside each fold.

The release chose its 237 anchors with 20 of the 30 models in the data, so any
cross-validation that keeps those anchors leaks: the held-out models helped pick the
samples they are then estimated from. Here each model is held out exactly once (k folds
over the 30 models, repeated with several shuffles); in each fold everything is built
from the training models only, and the held-out models' estimates are pooled over the
folds before computing Spearman's rank correlation and the mean absolute error of the
Overall (0-1 scale) against the full-LongBench Overall of all 4,750 samples; Spearman
within each fold (one build ranking its own held-out models, as in use), averaged over
the folds, is printed beside it.

Rows, all on the same folds:

- `in-fold anchors (improved)`: the improved recipe (soft labels) fitted on the fold's
  training models and 237 anchors chosen from that fit by the release's category K-Means:
  nothing about the held-out models is used. The honest figure.
- `in-fold anchors (release recipe)`: the release's own method (global threshold,
  category K-Means) rebuilt on the fold's training models. Also honest.
- `release's anchors, params refitted in fold`: the shipped configuration (the release's
  237 anchors, item parameters refitted on the training models). The anchors leak.
- `release's published parameters`: the release's files as they are (anchors and item
  parameters fitted on 20 of these 30 models). Leaks both.

    nice python bench/minilongbench_heldout.py [--folds 3] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from asyncbench.estimators.build import Recipe, build
from asyncbench.estimators.crossval import estimates
from asyncbench.estimators.irt import IrtParams, aggregate, load_params
from asyncbench.estimators.methods import BASE_METHODS as METHODS

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"
ROWS = ("in-fold anchors (improved)", "in-fold anchors (release recipe)",
        "release's anchors, params refitted in fold", "release's published parameters")


def fold_params(train: np.ndarray, release_anchors: np.ndarray, published: IrtParams) -> dict[str, IrtParams]:
    """The four parameter sets of one fold, built from the training rows only."""
    return {
        ROWS[0]: build(train, EMB, Recipe.improved()).params,
        ROWS[1]: build(train, EMB, Recipe()).params,
        ROWS[2]: build(train, EMB, Recipe.improved(), release_anchors).params,
        ROWS[3]: published,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--folds", type=int, default=3, help="3: 20 training models per fold, as the release had")
    ap.add_argument("--repeats", type=int, default=5, help="shuffles of the models into folds (seeds 0..n-1)")
    args = ap.parse_args()
    scores = np.load(DATA / "longbench_scores.npz")["scores"].astype(float)
    release_anchors = np.array(json.loads((DATA / "anchors.json").read_text())["sorted_anchors"])
    published = load_params(DATA)
    truth = np.array([aggregate(row)["overall"] for row in scores])
    t0 = time.perf_counter()
    # results[row][method] -> one (spearman, mae) per repeat, over the pooled held-out estimates
    # and the mean over folds of the Spearman within each fold (one build ranks its held-out models)
    results: dict[str, dict[str, list[tuple[float, float, float]]]] = {r: {m: [] for m in METHODS} for r in ROWS}
    for seed in range(args.repeats):
        order = np.random.default_rng(seed).permutation(len(scores))
        est = {r: {m: np.zeros(len(scores)) for m in METHODS} for r in ROWS}
        folds = np.array_split(order, args.folds)
        for test in folds:
            train = np.setdiff1d(order, test)
            for row, params in fold_params(scores[train], release_anchors, published).items():
                for i in test:
                    for method, e in estimates(params, scores[i, params.anchors]).items():
                        est[row][method][i] = e["overall"]
        for row in ROWS:
            for method in METHODS:
                e = est[row][method]
                within = float(np.mean([spearmanr(e[f], truth[f])[0] for f in folds]))
                results[row][method].append((float(spearmanr(e, truth)[0]), within, float(np.mean(np.abs(e - truth)))))
        print(f"repeat {seed + 1}/{args.repeats} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    print(f"\n{args.folds}-fold over {len(scores)} models, {args.repeats} shuffles; Overall (0-1), "
          "pooled held-out estimates; mean (min-max over shuffles)\n")
    print("| anchors and parameters | estimate | Spearman (pooled) | Spearman (within a fold) | MAE |\n"
          "|---|---|---|---|---|")
    for row in ROWS:
        for method in METHODS:
            sp, within, mae = np.array(results[row][method]).T
            print(f"| {row} | {method} | {sp.mean():.3f} ({sp.min():.3f}-{sp.max():.3f}) "
                  f"| {within.mean():.3f} ({within.min():.3f}-{within.max():.3f}) "
                  f"| {mae.mean():.4f} ({mae.min():.4f}-{mae.max():.4f}) |")
    print(f"\n{time.perf_counter() - t0:.0f} s")


EMB = np.load(DATA / "embeddings_pca.npy")

if __name__ == "__main__":
    main()
