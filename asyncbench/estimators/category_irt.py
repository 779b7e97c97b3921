"""IRT with per-category abilities: one small IRT model per LongBench category.

The release's model gives a model one ability vector θ (d = 10) shared by all 4,750
samples, so a summarisation sample is predicted from what the model did on code and
retrieval too; on held-out models that shared θ ranks Summarization and Synthetic poorly
(bench/minilongbench.md). Here each of the six categories has its own 2PL model and its
own ability θ_c (d = 3): the category's items are fitted on the training models' scores
in that category only (soft labels, MAP with N(0, 1) priors, L-BFGS, as `build.fit_irt`;
items initialised from the category's PCA'd text embeddings), and a new model's θ_c is
fitted on its anchors in that category only, with the release's soft-label loss and
per-dimension clip (`irt.fit_theta`). Every category has anchors (the release allots
them per category). As in the release, the observed anchor scores replace their
predictions and the per-item values are aggregated as LongBench does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .irt import CATEGORIES, DATASET_NAMES, N_ITEMS, Aggregate, aggregate, dataset_index, fit_theta, item_curve

DIMS = 3


def category_columns() -> dict[str, np.ndarray]:
    """The 4,750-table columns of each category."""
    index = dataset_index()
    return {cat: np.flatnonzero(np.isin(index, [DATASET_NAMES.index(d) for d in members]))
            for cat, members in CATEGORIES.items()}


@dataclass
class CategoryIrt:
    """Item parameters of the six per-category models: disc (4750, d), diff (4750,)."""

    disc: np.ndarray
    diff: np.ndarray

    def save(self, path: Path) -> None:
        rows = {"dims": int(self.disc.shape[1]), "disc": _round(self.disc), "diff": _round(self.diff)}
        path.write_text(json.dumps(rows))

    @classmethod
    def load(cls, path: Path) -> CategoryIrt:
        raw = json.loads(path.read_text())
        disc = np.asarray(raw["disc"], dtype=float)
        diff = np.asarray(raw["diff"], dtype=float).reshape(-1)
        if disc.ndim != 2 or disc.shape[0] != N_ITEMS or diff.shape != (N_ITEMS,):
            raise ValueError(f"expected disc ({N_ITEMS}, d) and diff ({N_ITEMS},), got {disc.shape} and {diff.shape}")
        return cls(disc, diff)


def _round(values: np.ndarray) -> object:
    return json.loads(json.dumps(np.vectorize(lambda v: float(f"{v:.7g}"))(values).tolist()))


def fit_category_irt(scores: np.ndarray, embeddings: np.ndarray, dims: int = DIMS, max_iter: int = 1000,
                     seed: int = 0) -> CategoryIrt:
    """Six 2PL fits on the (models × 4,750) scores as soft labels, one per category."""
    from .build import fit_irt, pca

    disc, diff = np.zeros((N_ITEMS, dims)), np.zeros(N_ITEMS)
    for cols in category_columns().values():
        d, b, _, _ = fit_irt(scores[:, cols].astype(float), pca(embeddings[cols], dims), max_iter, seed)
        disc[cols], diff[cols] = d, b
    return CategoryIrt(disc, diff)


def estimate_category_irt(model: CategoryIrt, anchors: np.ndarray, anchor_scores: np.ndarray) -> Aggregate:
    """Per category: θ_c from its anchors, its items predicted, the anchors' scores kept."""
    full = np.zeros(N_ITEMS)
    y = np.asarray(anchor_scores, dtype=float)
    for cols in category_columns().values():
        mine = np.isin(anchors, cols)
        theta = fit_theta(y[mine], model.disc[anchors[mine]], model.diff[anchors[mine]])
        full[cols] = item_curve(theta, model.disc[cols], model.diff[cols])
        full[anchors[mine]] = y[mine]
    return aggregate(full)
