"""Cost-aware MiniLongBench anchors: accuracy against the share of the full benchmark's length.

Leave-models-out cross-validation (10 splits of the 30 models, 10 held out, seed 0): per
split the improved recipe is fitted on the 20 training models, then anchors are chosen
from those fits alone: cost-aware (`Recipe(selection="cost")`, Neyman allocation with
costs, `build.cost_aware_counts`) at several length budgets, and the release's category
K-Means with 237 anchors; the release's own 237 anchors are shown beside them (chosen by
the release on 20 of these models, so not held out from them). Lengths are the paper's
Table 1 averages (words; characters for Chinese). Prints a markdown table.

    python bench/irt_cost.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from asyncbench.estimators import build as B
from asyncbench.estimators import crossval as C
from asyncbench.estimators import irt
from asyncbench.estimators.methods import BASE_METHODS

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"
BUDGETS = (0.01, 0.015, 0.02, 0.025, 0.03, 0.0434)


def main() -> None:
    scores = np.load(DATA / "longbench_scores.npz")["scores"].astype(float)
    emb = np.load(DATA / "embeddings_pca.npy")
    release = np.array(json.loads((DATA / "anchors.json").read_text())["sorted_anchors"])
    rows: dict[tuple[str, str], list[tuple[float, float, float, int]]] = {}
    for train, test in C.splits(len(scores), 10, 10):
        disc, diff, _, _ = B.fit_irt(scores[train], emb, 1000, 0)
        sets = {"release's anchors": release, "category K-Means": B.select_anchors(disc, diff, 237, "category")}
        for budget in BUDGETS:
            sets[f"cost-aware {100 * budget:g}%"] = B.select_anchors(disc, diff, 0, "cost", 0, scores[train], budget)
        truth = [irt.aggregate(scores[i]) for i in test]
        for name, anchors in sets.items():
            params = irt.IrtParams(disc, diff, np.sort(anchors))
            per_model = [C.estimates(params, scores[i, params.anchors]) for i in test]
            for method in BASE_METHODS:
                s = C._score([e[method] for e in per_model], truth)
                rows.setdefault((name, method), []).append(
                    (s.spearman["overall"], s.mae["overall"], irt.token_cost(params.anchors)["fraction"], len(anchors)))
    print("| anchors | estimate | samples | share of length | Spearman | MAE |\n|---|---|---|---|---|---|")
    for (name, method), values in rows.items():
        v = np.array(values)
        print(f"| {name} | {method} | {v[:, 3].mean():.0f} | {100 * v[:, 2].mean():.2f}% | {v[:, 0].mean():.3f} "
              f"| {v[:, 1].mean():.4f} |")


if __name__ == "__main__":
    main()
