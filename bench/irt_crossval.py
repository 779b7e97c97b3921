"""Leave-models-out cross-validation of MiniLongBench estimation on the release's 30 models.

Each split holds out 10 of the 30 models: thresholds, IRT parameters and anchors are built
from the other 20 (as the release did with its 20 training models); the held-out models
are estimated from their 237 anchor scores only. `--anchors release` keeps the release's
237 anchors (as the shipped parameters do) and refits only the item parameters;
`--inner-folds 3` also calibrates the 90% interval on each split's 20 training models,
as `asyncbench minilongbench build` does, and measures its coverage on the held-out 10.
Prints a markdown table per recipe.

    python bench/irt_crossval.py [--splits 10] [--recipes release,improved] [--anchors release] [--inner-folds 3]
"""

from __future__ import annotations

import argparse
import json
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
    ap.add_argument("--anchors", choices=("select", "release"), default="select")
    ap.add_argument("--inner-folds", type=int, default=0)
    args = ap.parse_args()
    scores = np.load(DATA / "longbench_scores.npz")["scores"]
    emb = np.load(DATA / "embeddings_pca.npy")
    anchors = None
    if args.anchors == "release":
        anchors = np.array(json.loads((DATA / "anchors.json").read_text())["sorted_anchors"])
    pairs = splits(len(scores), args.test, args.splits, seed=0)
    for name in args.recipes.split(","):
        t0 = time.perf_counter()
        s = summarise([evaluate(scores, emb, RECIPES[name], tr, te, anchors, args.inner_folds) for tr, te in pairs])
        print(f"\n### recipe `{name}`, anchors {args.anchors} ({args.splits} splits, {args.test} held out, "
              f"{time.perf_counter() - t0:.0f} s)\n")
        print("| estimate | key | Spearman | MAE | 90% coverage | width |\n|---|---|---|---|---|---|")
        for method in ("irt", "direct", "blend"):
            for key in s[method]["spearman"]:
                cov, width = s[method]["coverage"].get(key), s[method]["width"].get(key)
                extra = f" {cov:.2f} | {width:.4f} |" if cov is not None and width is not None else " | |"
                print(f"| {method} | {key} | {s[method]['spearman'][key]:.3f} | {s[method]['mae'][key]:.4f} |{extra}")


if __name__ == "__main__":
    main()
