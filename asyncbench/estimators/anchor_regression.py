"""A regression from a model's 237 anchor scores to its full-LongBench dataset scores.

The anchor average of a dataset (`estimate_direct`) ranks models well but is biased: the
anchors are K-Means centres of the item parameters, chosen to be informative, not
representative. What it misses is learnt from the training models as a linear map from
all 237 anchor scores to the 21 per-dataset corrections,

    dataset score_d = direct_d + c_d + Σ_j B_jd (y_j − ȳ_j),

with an unpenalised intercept c_d (the mean correction, i.e. the bias of the anchor
average) and B fitted by ridge or by partial least squares (PLS2). Every anchor informs
every dataset: a model's answers on Code anchors say something about its Few-shot score.
With 20-30 training models and 237 anchors the fit is heavily regularised; the penalty λ
(ridge) or the number of components (PLS) is chosen by leave-one-model-out error of the
Overall on the training models only, in closed form for ridge (an unpenalised intercept
plus a ridge is a linear smoother: the held-out residual is e_i / (1 − h_ii)).

Only numpy, only a matrix product at run time: the fitted map ships as numbers in
estimator.json.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

LAMBDAS = tuple(float(x) for x in np.logspace(-2, 3, 21))  # 0.01 .. 1000, 4 per decade
MAX_COMPONENTS = 10


@dataclass
class AnchorRegression:
    """Fitted map from anchor scores (p,) to per-dataset corrections (k,) of the direct estimate."""

    kind: Literal["ridge", "pls"]
    x_mean: np.ndarray  # (p,)
    intercept: np.ndarray  # (k,): the mean correction over the training models
    coef: np.ndarray  # (p, k)
    complexity: float  # ridge: λ; pls: the number of components

    def correction(self, y: np.ndarray) -> np.ndarray:
        """(k,) correction of the direct per-dataset estimate for anchor scores y (p,)."""
        out: np.ndarray = self.intercept + (np.asarray(y, dtype=float) - self.x_mean) @ self.coef
        return out

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "complexity": self.complexity, "x_mean": _floats(self.x_mean),
                "intercept": _floats(self.intercept), "coef": [_floats(row) for row in self.coef]}

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> AnchorRegression:
        kind = raw["kind"]
        if kind != "ridge" and kind != "pls":
            raise ValueError(f"not an anchor regression kind: {kind!r}")
        complexity = raw["complexity"]
        if not isinstance(complexity, (int, float, str)):
            raise TypeError(f"complexity must be a number, not {complexity!r}")
        x_mean, intercept = np.asarray(raw["x_mean"], dtype=np.float64), np.asarray(raw["intercept"], dtype=np.float64)
        return cls(kind, x_mean, intercept,
                   np.asarray(raw["coef"], dtype=np.float64).reshape(len(x_mean), len(intercept)), float(complexity))


def _floats(values: np.ndarray) -> list[float]:
    """Floats to 10 significant digits: estimates move by < 1e-8, the file stays small."""
    return [float(f"{v:.10g}") for v in np.asarray(values, dtype=float).ravel()]


def _ridge_path(xc: np.ndarray, rc: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Ridge coefficients (p, k) and the smoother's diagonal h_ii (n,), intercept included.

    Dual form: with n models ≪ p anchors, (X Xᵀ + λI) is n × n."""
    n = len(xc)
    gram = xc @ xc.T
    inv = np.linalg.solve(gram + lam * np.eye(n), np.eye(n))
    coef = xc.T @ inv @ rc
    hat = np.diag(gram @ inv) + 1.0 / n
    return coef, hat


def fit_ridge(x: np.ndarray, target: np.ndarray, weights: np.ndarray,
              lambdas: Sequence[float] = LAMBDAS) -> AnchorRegression:
    """Ridge from anchor scores x (n, p) to corrections target (n, k); λ minimises the
    leave-one-out mean absolute error of `target @ weights` (the Overall's correction)."""
    x_mean, t_mean = x.mean(axis=0), target.mean(axis=0)
    xc, rc = x - x_mean, target - t_mean
    best: tuple[float, float] | None = None
    for lam in lambdas:
        coef, hat = _ridge_path(xc, rc, lam)
        loo = (rc - xc @ coef) / (1.0 - hat)[:, None]
        err = float(np.mean(np.abs(loo @ weights)))
        if best is None or err < best[0] - 1e-15:
            best = (err, lam)
    assert best is not None
    coef, _ = _ridge_path(xc, rc, best[1])
    return AnchorRegression("ridge", x_mean, t_mean, coef, best[1])


def _pls(xc: np.ndarray, rc: np.ndarray, components: int) -> list[np.ndarray]:
    """PLS2 (NIPALS, deflating X) of centred data: the coefficients (p, k) with 1, 2, ...,
    `components` components."""
    x = xc.copy()
    p, k = xc.shape[1], rc.shape[1]
    w_all, p_all, q_all = np.zeros((p, components)), np.zeros((p, components)), np.zeros((k, components))
    for c in range(components):
        u = rc[:, int(np.argmax((rc ** 2).sum(axis=0)))].copy()
        w = np.zeros(p)
        for _ in range(500):
            w_new = x.T @ u
            norm = float(np.linalg.norm(w_new))
            if norm == 0.0:
                break
            w_new /= norm
            t = x @ w_new
            q = rc.T @ t / max(float(t @ t), 1e-300)
            u = rc @ q / max(float(q @ q), 1e-300)
            done = float(np.linalg.norm(w_new - w)) < 1e-12
            w = w_new
            if done:
                break
        t = x @ w
        tt = max(float(t @ t), 1e-300)
        load = x.T @ t / tt
        w_all[:, c], p_all[:, c], q_all[:, c] = w, load, rc.T @ t / tt
        x = x - np.outer(t, load)
    return [w_all[:, :c] @ np.linalg.pinv(p_all[:, :c].T @ w_all[:, :c]) @ q_all[:, :c].T
            for c in range(1, components + 1)]


def fit_pls(x: np.ndarray, target: np.ndarray, weights: np.ndarray,
            max_components: int = MAX_COMPONENTS) -> AnchorRegression:
    """PLS2 from x (n, p) to target (n, k); the number of components minimises the
    leave-one-out mean absolute error of `target @ weights` (refits: PLS has no closed form)."""
    n = len(x)
    top = min(max_components, n - 2)
    errors = np.zeros((top, n))
    for i in range(n):
        keep = np.arange(n) != i
        xm, tm = x[keep].mean(axis=0), target[keep].mean(axis=0)
        for c, coef in enumerate(_pls(x[keep] - xm, target[keep] - tm, top)):
            errors[c, i] = (target[i] - tm - (x[i] - xm) @ coef) @ weights
    components = int(np.argmin(np.abs(errors).mean(axis=1))) + 1
    x_mean, t_mean = x.mean(axis=0), target.mean(axis=0)
    return AnchorRegression("pls", x_mean, t_mean, _pls(x - x_mean, target - t_mean, components)[-1],
                           float(components))
