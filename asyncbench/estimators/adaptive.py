"""Adaptive testing on LongBench: choose the next samples by information per token about
the full-LongBench Overall, stop when its standard error reaches a target.

The model is the MiniLongBench one (irt.py): a multidimensional 2PL curve with the
release's per-dimension clip, P_j(θ) = sigmoid(Σ_k clip(a_jk θ_k − b_j, −30, 30)), fitted
on continuous scores in [0, 1] as soft labels. What changes is how θ is fitted and which
items are asked:

* θ is the MAP estimate under a Gaussian prior N(μ, Σ) whose mean and covariance are
  those of the item parameters' training models (`ability` in irt_parameters.json, the 20
  models the release fitted on), with a ridge so Σ is invertible. Early in a test, with
  a few dozen answers and d = 10 dimensions, the unregularised fit is not determined;
  the prior is what makes a small anchor set usable.
* The quantity of interest is the Overall as LongBench aggregates it (dataset means →
  category means → mean of the six categories), estimated as MiniLongBench does: the
  observed score of every administered sample, the curve's prediction P_j(θ̂) for every
  other sample of the 4,750. It is linear in the per-item values, Overall = Σ_j w_j x_j.
* Standard error (delta method on the Laplace approximation of the posterior):
      SE² = gᵀ C g  +  Σ_{j not asked} w_j² P_j(1 − P_j)
  where C = (Σ_asked P_j(1−P_j) ã_j ã_jᵀ + Σ⁻¹)⁻¹ is the posterior covariance of θ (the
  observed information of the soft-label loss at θ̂ equals its expected information:
  the Hessian does not depend on the labels), ã_j = a_j masked to the unclipped
  dimensions, and g = Σ_{j not asked} w_j P_j(1−P_j) ã_j is the gradient of the
  Overall in θ. The second term is the sampling noise of the samples not asked around
  their predicted means (P(1−P) bounds the variance of a score in [0, 1] with mean P):
  the truth is the model's realised full-LongBench score, not its expected score. The
  With a misfit model (`Residuals`, per-dataset shifts δ_d learnt on the training
  models) a sample not asked is predicted P_j(θ̂) + δ̂_d, its noise is σ_d², and
  SE² gains Σ_d c_d² Var(δ_d | answers) (c_d: the Overall's weight of the samples of d
  not asked). The SE is model-based: bench/adaptive.md measures how the interval
  covers the truth on held-out models (it is optimistic: misfit dominates).
* Selection is targeted (c-optimal), not the trace of the information: the next item is
  the one that most reduces SE² per token of its request. Adding item j with information
  i_j = P_j(1−P_j) lowers gᵀCg by i_j (gᵀC ã_j)² / (1 + i_j ã_jᵀ C ã_j) (a rank-one
  update) and removes its own noise term w_j² i_j. A batch is chosen greedily, updating
  C and g after each pick as if the item had been answered (the information does not
  depend on the answer), so a batch does not pick five near-copies of one item.
* Start: a stratified anchor set, `start_per_dataset` samples from each dataset in the
  pool (the best by the same criterion at the prior mean), so every category is seen
  before the estimate leans on the prior.
* Stop: when SE ≤ target, when the pool is exhausted, when `max_items` are asked, or
  when the caller reports the budget spent.

`AdaptiveTest` holds the state and is driven by a caller that answers batches of item
indices: the run engine (benchmarks/longbench/adaptive.py, through the cache, ledger and budget)
or the offline replay (bench/adaptive_replay.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UserError
from .irt import CATEGORIES, DATASET_NAMES, DATASETS, IrtParams, aggregate, dataset_index, item_curve, soft_label_loss

Z95 = 1.959963984540054


def overall_weights() -> np.ndarray:
    """(4750,) w_j with LongBench's Overall = Σ_j w_j x_j (x_j the per-sample score)."""
    sizes = dict(DATASETS)
    per_dataset: dict[str, float] = {}
    for members in CATEGORIES.values():
        for d in members:
            per_dataset[d] = 1.0 / (len(CATEGORIES) * len(members) * sizes[d])
    return np.repeat([per_dataset[d] for d in DATASET_NAMES], [n for _, n in DATASETS])


@dataclass
class Prior:
    """N(mean, inverse(precision)) on θ."""

    mean: np.ndarray
    precision: np.ndarray

    @classmethod
    def from_abilities(cls, ability: np.ndarray, ridge: float = 0.05) -> Prior:
        """Mean and covariance of the training models' θ, plus `ridge` × mean variance on
        the diagonal (20 models in 10 dimensions: the sample covariance alone is noisy)."""
        mean = ability.mean(axis=0)
        cov = np.cov(ability, rowvar=False)
        cov = cov + ridge * float(np.mean(np.diag(cov))) * np.eye(ability.shape[1])
        return cls(mean, np.linalg.inv(cov))

    @classmethod
    def isotropic(cls, d: int, precision: float = 1.0) -> Prior:
        return cls(np.zeros(d), precision * np.eye(d))

    @classmethod
    def for_params(cls, params: IrtParams) -> Prior:
        """From the training models' abilities when the parameters carry them, else the
        build's isotropic θ prior (precision 1 when it has none)."""
        if params.ability is not None and params.ability.shape[0] > params.disc.shape[1]:
            return cls.from_abilities(params.ability)
        return cls.isotropic(params.disc.shape[1], params.theta_prior or 1.0)


def active_disc(theta: np.ndarray, disc: np.ndarray, diff: np.ndarray) -> np.ndarray:
    """∂z_j/∂θ: a_j with the clipped dimensions zeroed."""
    raw = disc * theta[None, :] - diff[:, None]
    masked: np.ndarray = disc * ((raw > -30.0) & (raw < 30.0))
    return masked


def fit_map(scores: np.ndarray, disc: np.ndarray, diff: np.ndarray, prior: Prior,
            start: np.ndarray | None = None, eps: float = 1e-10) -> np.ndarray:
    """θ minimising the release's soft-label loss + ½ (θ−μ)ᵀ Σ⁻¹ (θ−μ) (BFGS)."""
    from scipy.optimize import minimize

    y = np.asarray(scores, dtype=float)

    def loss_and_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        loss, grad = soft_label_loss(theta, y, disc, diff, eps)
        delta = theta - prior.mean
        return loss + 0.5 * float(delta @ prior.precision @ delta), grad + prior.precision @ delta

    x0 = prior.mean.copy() if start is None else start
    theta: np.ndarray = minimize(loss_and_grad, x0, jac=True, method="BFGS", options={"gtol": 1e-6}).x
    return theta


@dataclass
class Residuals:
    """Per-dataset misfit of the IRT curve, learnt on the training models.

    The curve is wrong in ways that are shared by models: the release's binarised fit
    predicts nearly every summarisation sample at ~0 while real ROUGE-L scores average
    ~0.2. Each dataset d gets a shift δ_d (a model's mean score on d minus the curve's
    mean prediction at its θ) with a prior N(offset_d, tau2_d) taken over the training
    models, updated by the residuals y_j − P_j(θ̂) of the samples asked in d, each with
    variance sigma2_d (the within-dataset residual variance of the training models).
    The estimate of a sample not asked is P_j(θ̂) + δ̂_d, and its noise is sigma2_d.
    """

    offset: np.ndarray  # (21,)
    tau2: np.ndarray  # (21,)
    sigma2: np.ndarray  # (21,)

    @classmethod
    def from_training(cls, params: IrtParams, scores: np.ndarray, prior: Prior) -> Residuals:
        """From the training models' full score rows (m, 4750): θ̂ by MAP on all samples,
        then the per-dataset means and variances of their residuals."""
        which = dataset_index()
        shifts, within = [], []
        for row in scores:
            theta = fit_map(row, params.disc, params.diff, prior)
            resid = row - item_curve(theta, params.disc, params.diff)
            means = np.array([resid[which == k].mean() for k in range(len(DATASET_NAMES))])
            shifts.append(means)
            within.append([resid[which == k].var() for k in range(len(DATASET_NAMES))])
        shift = np.asarray(shifts)
        return cls(shift.mean(axis=0), np.maximum(shift.var(axis=0, ddof=1), 1e-6),
                   np.maximum(np.asarray(within).mean(axis=0), 1e-4))


@dataclass
class Estimate:
    """The Overall estimate at θ̂ with its standard error (0-1 scale)."""

    overall: float
    se: float
    se_theta: float  # the part from the uncertainty of θ (gᵀCg)^½
    se_unasked: float  # the part from the samples not asked (their own noise)
    theta: np.ndarray
    by_category: dict[str, float]
    by_dataset: dict[str, float]

    @property
    def interval(self) -> tuple[float, float]:
        return (max(0.0, self.overall - Z95 * self.se), min(1.0, self.overall + Z95 * self.se))


@dataclass
class _State:
    """The quantities at θ̂ that the estimate and the selection share."""

    p: np.ndarray  # (n,) P_j(θ̂)
    a: np.ndarray  # (n, d) ã_j
    cov: np.ndarray  # (d, d) C
    asked: np.ndarray  # (n,) bool
    g: np.ndarray  # (d,) ∂Overall/∂θ
    noise: np.ndarray  # (n,) variance of a sample around its prediction
    c: np.ndarray  # (21,) weight of the samples not asked, per dataset
    delta: np.ndarray  # (21,) δ̂_d
    delta_var: np.ndarray  # (21,) posterior variance of δ_d (0 without a residual model)
    sigma2: np.ndarray  # (21,) per-sample residual variance (inf without a residual model)


@dataclass
class AdaptiveTest:
    """State of one adaptive test over `pool` (global item indices that can be asked).

    `cost[j]` is the token cost of asking item j (prompt + answer budget; any positive
    scale), indexed like the 4,750 items. Call `next_batch()`, answer those items, pass
    the scores to `observe()`, until `next_batch()` returns [] (then `stop_reason` says
    why), or stop from outside (`stop("budget")`). `residuals`: the per-dataset misfit
    model (None: the IRT curve alone, noise P(1−P)).
    """

    params: IrtParams
    pool: np.ndarray
    cost: np.ndarray
    target_se: float
    prior: Prior
    residuals: Residuals | None = None
    batch_size: int = 16
    start_per_dataset: int = 1
    max_items: int | None = None
    asked: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    unavailable: set[int] = field(default_factory=set)  # asked but unanswered (failed)
    trajectory: list[dict[str, object]] = field(default_factory=list)
    stop_reason: str | None = None
    theta: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.pool = np.unique(np.asarray(self.pool, dtype=int))
        n = self.params.disc.shape[0]
        if self.pool.size and (self.pool.min() < 0 or self.pool.max() >= n):
            raise UserError(f"adaptive pool: item indices must lie in [0, {n})")
        if not self.target_se > 0:
            raise UserError("--target-se must be positive (0-1 scale of the Overall, e.g. 0.01)")
        if self.batch_size < 1 or self.start_per_dataset < 0:
            raise UserError("adaptive batch size must be >= 1 and the start set >= 0 per dataset")
        self.cost = np.maximum(np.asarray(self.cost, dtype=float), 1.0)
        self.weights = overall_weights()
        self.which = dataset_index()
        self.theta = self.prior.mean.copy()

    # -- the estimate ------------------------------------------------------------------
    def _state(self, theta: np.ndarray) -> _State:
        disc, diff = self.params.disc, self.params.diff
        p = item_curve(theta, disc, diff)
        a = active_disc(theta, disc, diff)
        asked = np.zeros(disc.shape[0], dtype=bool)
        asked[self.asked] = True
        info = p * (1 - p)
        a_asked = a[asked]
        cov = np.linalg.inv((a_asked * info[asked, None]).T @ a_asked + self.prior.precision)
        w_not = np.where(asked, 0.0, self.weights)
        nd = len(DATASET_NAMES)
        c = np.bincount(self.which, weights=w_not, minlength=nd)  # Overall's coefficient on δ_d
        if self.residuals is None:
            noise = info
            g = (w_not * info) @ a
            return _State(p, a, cov, asked, g, noise, c, np.zeros(nd), np.zeros(nd), np.full(nd, np.inf))
        r = self.residuals
        noise = r.sigma2[self.which]
        n_asked = np.bincount(self.which[asked], minlength=nd)
        resid_sum = np.zeros(nd)
        if self.asked:
            np.add.at(resid_sum, self.which[self.asked], np.asarray(self.scores) - p[self.asked])
        prec = 1 / r.tau2 + n_asked / r.sigma2
        delta = (r.offset / r.tau2 + resid_sum / r.sigma2) / prec
        # ∂Overall/∂θ: the curve at the samples not asked, minus what δ̂ takes back
        # through the residuals of the samples asked
        back = np.zeros((nd, a.shape[1]))
        if self.asked:
            np.add.at(back, self.which[self.asked], info[self.asked, None] * a[self.asked])
        g = (w_not * info) @ a - ((c / (r.sigma2 * prec))[:, None] * back).sum(axis=0)
        return _State(p, a, cov, asked, g, noise, c, delta, 1 / prec, np.asarray(r.sigma2))

    def estimate(self) -> Estimate:
        theta = self.theta if self.theta is not None else self.prior.mean
        st = self._state(theta)
        values = st.p + st.delta[self.which]
        values[self.asked] = self.scores
        w_not = np.where(st.asked, 0.0, self.weights)
        var_theta = float(st.g @ st.cov @ st.g)
        var_unasked = float(np.sum(w_not ** 2 * st.noise) + np.sum(st.c ** 2 * st.delta_var))
        agg = aggregate(np.clip(values, 0.0, 1.0))
        return Estimate(agg["overall"], float(np.sqrt(var_theta + var_unasked)), float(np.sqrt(var_theta)),
                        float(np.sqrt(var_unasked)), theta, agg["by_category"], agg["by_dataset"])

    # -- selection ---------------------------------------------------------------------
    def _remaining(self) -> np.ndarray:
        taken = set(self.asked) | self.unavailable
        return np.array([j for j in self.pool if j not in taken], dtype=int)

    def _greedy(self, candidates: np.ndarray, k: int, st: _State) -> list[int]:
        """Up to k candidates, each the best reduction of SE² per token given the ones
        before it (C, g and the δ posteriors updated as if it were answered)."""
        chosen: list[int] = []
        cand = candidates.copy()
        cov, g, c, dvar = st.cov, st.g.copy(), st.c.copy(), st.delta_var.copy()
        info_all = st.p * (1 - st.p)
        for _ in range(min(k, cand.size)):
            ac, info = st.a[cand], info_all[cand]
            u = ac @ cov  # (m, d): C ã_j
            proj = u @ g
            quad = np.einsum("ij,ij->i", u, ac)
            gain = info * proj ** 2 / (1 + info * quad) + self.weights[cand] ** 2 * st.noise[cand]
            if self.residuals is not None:
                d = self.which[cand]
                after = 1 / (1 / dvar[d] + 1 / st.sigma2[d])
                w = self.weights[cand]
                gain = gain + c[d] ** 2 * dvar[d] - (c[d] - w) ** 2 * after
            best = int(np.argmax(gain / self.cost[cand]))
            j = int(cand[best])
            chosen.append(j)
            uj, ij = u[best], info[best]
            cov = cov - ij * np.outer(uj, uj) / (1 + ij * quad[best])
            g = g - self.weights[j] * ij * st.a[j]
            dj = self.which[j]
            c[dj] -= self.weights[j]
            if self.residuals is not None:
                dvar[dj] = 1 / (1 / dvar[dj] + 1 / st.sigma2[dj])
            cand = np.delete(cand, best)
        return chosen

    def next_batch(self) -> list[int]:
        """The next items to ask ([] when the test is over; `stop_reason` says why)."""
        if self.stop_reason is not None:
            return []
        remaining = self._remaining()
        if remaining.size == 0:
            self.stop_reason = "pool_exhausted"
            return []
        if self.max_items is not None and len(self.asked) >= self.max_items:
            self.stop_reason = "max_samples"
            return []
        st = self._state(self.theta if self.theta is not None else self.prior.mean)
        room = len(remaining) if self.max_items is None else self.max_items - len(self.asked)
        if not self.trajectory and self.start_per_dataset:  # the stratified start
            which = self.which[remaining]
            picks: list[int] = []
            for k in range(len(DATASET_NAMES)):
                picks += self._greedy(remaining[which == k], self.start_per_dataset, st)
            return picks[:room]
        return self._greedy(remaining, min(self.batch_size, room), st)

    def observe(self, items: Sequence[int], scores: Sequence[float | None]) -> Estimate:
        """Record answers (None: the request failed; the item is not asked again) and
        refit θ; returns the new estimate."""
        for j, s in zip(items, scores):
            if s is None:
                self.unavailable.add(int(j))
            else:
                self.asked.append(int(j))
                self.scores.append(float(s))
        idx = np.asarray(self.asked, dtype=int)
        self.theta = fit_map(np.asarray(self.scores), self.params.disc[idx], self.params.diff[idx], self.prior,
                             start=self.theta)
        est = self.estimate()
        self.trajectory.append({"samples": len(self.asked), "est_tokens": round(float(self.cost[idx].sum())),
                                "overall": round(est.overall, 6), "se": round(est.se, 6)})
        if est.se <= self.target_se:
            self.stop_reason = "target_se"
        return est

    def stop(self, reason: str) -> None:
        self.stop_reason = reason

    def report(self) -> dict[str, Any]:
        """What run.json shows: the estimate (0-1 scale), its 95% interval, how the test
        went and why it stopped."""
        est = self.estimate()
        lo, hi = est.interval
        return {"available": bool(self.asked), "method": "adaptive", "overall": est.overall, "se": est.se,
                "ci95": [lo, hi], "se_theta": est.se_theta, "se_unasked": est.se_unasked,
                "target_se": self.target_se, "stop_reason": self.stop_reason or "running",
                "samples_used": len(self.asked), "samples_failed": len(self.unavailable),
                "pool_size": int(self.pool.size), "by_category": est.by_category, "by_dataset": est.by_dataset,
                "theta": [round(float(t), 6) for t in est.theta], "trajectory": self.trajectory,
                "scale": "0-1", "se_method": "delta method on the Laplace posterior of θ (MAP, Gaussian prior "
                                             "from the training models) + per-dataset misfit + noise of the "
                                             "samples not asked; model-based, optimistic on held-out models "
                                             "(bench/adaptive.md)",
                "misfit_model": self.residuals is not None}


def run_replay(test: AdaptiveTest, truth_scores: Mapping[int, float] | np.ndarray) -> AdaptiveTest:
    """Drive `test` to its end with known per-item scores (offline replay)."""
    while batch := test.next_batch():
        test.observe(batch, [float(truth_scores[j]) for j in batch])
    return test
