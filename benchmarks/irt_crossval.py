"""Leave-models-out cross-validation of MiniLongBench estimation on the release's 30 models.

Each split holds out 10 of the 30 models: thresholds, IRT parameters and anchors are built
from the other 20 (as the release did with its 20 training models); the held-out models
are estimated from their 237 anchor scores only. Prints a markdown table per recipe.

    python benchmarks/irt_crossval.py [--splits 10] [--recipes release,improved]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from asyncbench.estimators.build import Recipe
from asyncbench.estimators.crossval import evaluate, splits, summarise

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"
RECIPES = {"release": Recipe(), "improved": Recipe.improved()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--test", type=int, default=10)
    ap.add_argument("--recipes", default="release,improved")
    args = ap.parse_args()
    scores = np.load(DATA / "longbench_scores.npz")["scores"]
    emb = np.load(DATA / "embeddings_pca.npy")
    pairs = splits(len(scores), args.test, args.splits, seed=0)
    for name in args.recipes.split(","):
        t0 = time.perf_counter()
        s = summarise([evaluate(scores, emb, RECIPES[name], tr, te) for tr, te in pairs])
        print(f"\n### recipe `{name}` ({args.splits} splits, {args.test} held out, {time.perf_counter() - t0:.0f} s)\n")
        print("| estimate | key | Spearman | MAE |\n|---|---|---|---|")
        for method in ("irt", "direct", "blend"):
            for key in s[method]["spearman"]:
                print(f"| {method} | {key} | {s[method]['spearman'][key]:.3f} | {s[method]['mae'][key]:.4f} |")


if __name__ == "__main__":
    main()
