"""Leave-models-out cross-validation of a MiniLongBench recipe.

Each split holds out some models entirely: the IRT model, the threshold, the anchors and
any calibration are built from the other models' scores only; each held-out model is then
estimated from its anchor scores alone and compared with its true LongBench scores
(Spearman over held-out models, and mean absolute error), overall and per category.
With `inner_folds`, the 90% interval of each held-out Overall is calibrated by a nested
cross-validation on the training models only (`conformal_scores`, as a build does), and
its coverage and width are measured on the held-out models.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .build import Recipe, build
from .conformal import interval
from .irt import CATEGORIES, Aggregate, IrtParams, aggregate, estimate_blend, estimate_direct, estimate_irt
from .methods import BASE_METHODS


@dataclass
class SplitScore:
    spearman: dict[str, float] = field(default_factory=dict)  # "overall" and each category
    mae: dict[str, float] = field(default_factory=dict)
    coverage: dict[str, float] = field(default_factory=dict)  # "overall": share inside its 90% interval
    width: dict[str, float] = field(default_factory=dict)  # "overall": mean width of that interval


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b)[0])


def _score(est: list[Aggregate], truth: list[Aggregate]) -> SplitScore:
    out = SplitScore()
    for key in ["overall", *CATEGORIES]:
        def get(r: Aggregate, k: str = key) -> float:
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


def estimates(params: IrtParams, anchor_scores: np.ndarray) -> dict[str, Aggregate]:
    """The three estimates of one model from its anchor scores."""
    irt = estimate_irt(params, anchor_scores)
    direct = estimate_direct(params.anchors, anchor_scores)
    return {"irt": irt, "direct": direct, "blend": estimate_blend(irt, direct)}


def conformal_scores(scores: np.ndarray, embeddings: np.ndarray, recipe: Recipe, anchors: np.ndarray | None = None,
                     folds: int = 3, seed: int = 0) -> dict[str, list[float]]:
    """Per method, every model's true − estimated Overall when held out.

    K-fold leave-models-out over the rows of `scores`, each fold's parameters built from
    the other folds exactly as `build` would (fixed `anchors` stay fixed).
    """
    order = np.random.default_rng(seed).permutation(len(scores))
    t = {m: np.zeros(len(scores)) for m in BASE_METHODS}
    for test in np.array_split(order, folds):
        params = build(scores[np.setdiff1d(order, test)], embeddings, recipe, anchors).params
        for i in test:
            y = scores[i, params.anchors]
            truth = aggregate(scores[i])["overall"]
            for method, est in estimates(params, y).items():
                t[method][i] = truth - est["overall"]
    return {m: [float(x) for x in v] for m, v in t.items()}


def evaluate(scores: np.ndarray, embeddings: np.ndarray, recipe: Recipe, train: np.ndarray, test: np.ndarray,
             anchors: np.ndarray | None = None, inner_folds: int = 0) -> dict[str, SplitScore]:
    """One split: scores of the three estimates of the held-out models (and of their
    intervals, given `inner_folds`)."""
    params = build(scores[train], embeddings, recipe, anchors).params
    t = conformal_scores(scores[train], embeddings, recipe, anchors, inner_folds) if inner_folds else None
    truth = [aggregate(scores[i]) for i in test]
    per_model = [estimates(params, scores[i, params.anchors]) for i in test]
    out = {}
    for method in BASE_METHODS:
        est = [e[method] for e in per_model]
        out[method] = _score(est, truth)
        if t is not None:
            bounds = [interval(e["overall"], t[method]) for e in est]
            out[method].coverage["overall"] = float(np.mean([lo <= r["overall"] <= hi
                                                             for (lo, hi), r in zip(bounds, truth)]))
            out[method].width["overall"] = float(np.mean([hi - lo for lo, hi in bounds]))
    return out


def summarise(results: list[dict[str, SplitScore]]) -> dict[str, dict[str, dict[str, float]]]:
    """Mean over splits: {method: {"spearman"|"mae": {key: value}}}."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for method in results[0]:
        out[method] = {}
        for metric in ("spearman", "mae", "coverage", "width"):
            keys = getattr(results[0][method], metric).keys()
            out[method][metric] = {k: float(np.mean([getattr(r[method], metric)[k] for r in results])) for k in keys}
    return out
