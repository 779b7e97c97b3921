"""Stacking: a convex combination, per dataset, of several estimates with weights learnt
from held-out predictions.

The weights are the point of a simplex grid (step 0.05) with the lowest mean absolute
error of the Overall over the training models' out-of-fold estimates (each model
estimated by parameters fitted without it), so they reward what a method does on models
it has not seen. The combination is per dataset, like `estimate_blend` (which is the
point (irt 1/2, direct 1/2) of the same simplex), so categories and the Overall stay
LongBench's aggregates of the combined dataset scores.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np

STEP = 0.05


def simplex(k: int, step: float = STEP) -> np.ndarray:
    """All weight vectors of length k on the grid of `step` that sum to 1, in a fixed order."""
    n = round(1 / step)
    rows = [c for c in itertools.product(range(n + 1), repeat=k - 1) if sum(c) <= n]
    return np.array([[*c, n - sum(c)] for c in rows], dtype=float) / n


def choose_weights(predictions: Mapping[str, np.ndarray], truth: np.ndarray, weights: np.ndarray,
                   step: float = STEP) -> dict[str, float]:
    """{method: weight} minimising the mean |Overall error| of Σ_m w_m predictions[m].

    `predictions[m]` and `truth` are (models, datasets); `weights` (datasets,) make the
    Overall from dataset scores. Ties go to the first grid point (fixed order)."""
    names = list(predictions)
    overall = np.stack([np.clip(predictions[m], 0.0, 1.0) @ weights for m in names], axis=1)  # (models, methods)
    grid = simplex(len(names), step)
    errors = np.abs(overall @ grid.T - (truth @ weights)[:, None]).mean(axis=0)
    best = grid[int(np.argmin(errors))]
    return {m: float(w) for m, w in zip(names, best)}
