"""Leave-models-out cross-validation of a MiniLongBench recipe.

Each split holds out some models entirely: the IRT model, the threshold, the anchors and
any calibration are built from the other models' scores only; each held-out model is then
estimated from its anchor scores alone and compared with its true LongBench scores
(Spearman over held-out models, and mean absolute error), overall and per category.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..longbench_table import CATEGORIES
from .build import Recipe, build
from .irt import aggregate, estimate_blend, estimate_direct, estimate_irt


@dataclass
class SplitScore:
    spearman: dict[str, float] = field(default_factory=dict)  # "overall" and each category
    mae: dict[str, float] = field(default_factory=dict)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b)[0])


def _score(est: list[dict[str, Any]], truth: list[dict[str, Any]]) -> SplitScore:
    out = SplitScore()
    for key in ["overall", *CATEGORIES]:
        def get(r: dict[str, Any], k: str = key) -> float:
            return float(r["overall"] if k == "overall" else r["by_category"][k])

        e = np.array([get(r) for r in est])
        t = np.array([get(r) for r in truth])
        out.spearman[key] = _spearman(e, t)
        out.mae[key] = float(np.mean(np.abs(e - t)))
    return out


def splits(n_models: int, n_test: int, n_splits: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random (train, test) index pairs."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_splits):
        perm = rng.permutation(n_models)
        out.append((np.sort(perm[n_test:]), np.sort(perm[:n_test])))
    return out


def evaluate(scores: np.ndarray, embeddings: np.ndarray, recipe: Recipe, train: np.ndarray, test: np.ndarray
             ) -> dict[str, SplitScore]:
    """One split: scores of the IRT and direct estimates of the held-out models."""
    params = build(scores[train], embeddings, recipe).params
    truth = [aggregate(scores[i]) for i in test]
    irt = [estimate_irt(params, scores[i, params.anchors]) for i in test]
    direct = [estimate_direct(params.anchors, scores[i, params.anchors]) for i in test]
    blend = [estimate_blend(a, b) for a, b in zip(irt, direct)]
    return {"irt": _score(irt, truth), "direct": _score(direct, truth), "blend": _score(blend, truth)}


def summarise(results: list[dict[str, SplitScore]]) -> dict[str, dict[str, dict[str, float]]]:
    """Mean over splits: {method: {"spearman"|"mae": {key: value}}}."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for method in results[0]:
        out[method] = {}
        for metric in ("spearman", "mae"):
            keys = getattr(results[0][method], metric).keys()
            out[method][metric] = {k: float(np.mean([getattr(r[method], metric)[k] for r in results])) for k in keys}
    return out
