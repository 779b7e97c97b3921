"""Algorithm 1 of MiniLongBench: item representations by 2PL IRT, anchors by K-Means.

From a score table of many models (m × 4,750, scores in [0, 1]):

1. binarise at the threshold c whose binarised per-model mean is closest to the
   continuous mean (the release: one c over the grid linspace(0.01, 0.99, 100));
2. learn θ_i, a_j, b_j of P_ij = sigmoid(a_j·θ_i − d·b_j), a_j initialised from PCA'd
   text embeddings, b_j = 0, θ_i ~ N(0, I). The release ran py-irt's variational
   fit (2,000 epochs); here the same model is fitted as a MAP estimate with standard
   normal priors by L-BFGS on analytic gradients — seconds on a CPU, no torch needed;
3. K-Means (scikit-learn, balance-weighted as in the release) over (a_j, b_j) within each
   category, K = (1 − p)·|S| split across categories by size; anchors are the samples
   nearest to the centres.

`Recipe` holds the options measured by leave-models-out cross-validation in
bench/minilongbench.md. `Recipe.improved()` trains on the continuous scores as soft
labels (no threshold: ROUGE-scored summarisation no longer collapses to ~0, because a
global c ≈ 0.37 turns almost every ROUGE-L score into a 0) and runs the fit to
convergence. Also available, but not better on the release's 30 models: per-dataset
thresholds, a prior on θ, anchors stratified per dataset by weight in the Overall, and a
per-dataset linear calibration fitted on the training models.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from .irt import (
    AVG_LENGTH,
    CATEGORIES,
    CATEGORY_OF,
    DATASET_NAMES,
    DATASETS,
    N_ITEMS,
    IrtParams,
    dataset_index,
    dataset_slices,
    estimate_irt,
)

THRESHOLD_GRID = np.linspace(0.01, 0.99, 100)


@dataclass
class Recipe:
    """How to build. Defaults are the release's method; `Recipe.improved()` is ours."""

    dims: int = 10
    ratio: float = 0.95  # p: the fraction of samples removed
    # a global or per-dataset threshold, or "soft" (no binarisation)
    labels: Literal["global", "per-dataset", "soft"] = "global"
    # "category" (as the release), "dataset" (weight-stratified) or "cost"
    selection: Literal["category", "dataset", "cost"] = "category"
    budget: float = 0.03  # selection "cost": the anchors' share of the full benchmark's length
    theta_prior: float = 0.0
    calibrate: bool = False
    max_iter: int = 300
    seed: int = 0

    @classmethod
    def improved(cls, **overrides: Any) -> Recipe:
        base: dict[str, Any] = {"labels": "soft", "max_iter": 1000, **overrides}
        return cls(**base)


@dataclass
class BuildResult:
    params: IrtParams
    thresholds: dict[str, float] = field(default_factory=dict)
    train_loss: float = 0.0


# ---------------------------------------------------------------- 1. labels


def best_threshold(scores: np.ndarray) -> float:
    """c minimising the mean over models of |mean(scores > c) − mean(scores)|."""
    cont = scores.mean(axis=1)
    gaps = [np.mean(np.abs((scores > c).mean(axis=1) - cont)) for c in THRESHOLD_GRID]
    return float(THRESHOLD_GRID[int(np.argmin(gaps))])


def make_labels(scores: np.ndarray, mode: str) -> tuple[np.ndarray, dict[str, float]]:
    """Training targets and the thresholds used (none for soft labels)."""
    if mode == "soft":
        return scores.astype(float), {}
    if mode == "global":
        c = best_threshold(scores)
        return (scores > c).astype(float), {"*": c}
    if mode == "per-dataset":
        labels = np.empty_like(scores, dtype=float)
        cs = {}
        for name, sl in dataset_slices().items():
            cs[name] = best_threshold(scores[:, sl])
            labels[:, sl] = scores[:, sl] > cs[name]
        return labels, cs
    raise ValueError(f"unknown label mode {mode!r}")


# ---------------------------------------------------------------- 2. representation learning


def single_thread() -> AbstractContextManager[object]:
    """A context in which BLAS (numpy, scipy, scikit-learn) uses one thread."""
    from threadpoolctl import threadpool_limits

    limits: AbstractContextManager[object] = threadpool_limits(1)  # threadpoolctl is untyped
    return limits


def pca(x: np.ndarray, d: int) -> np.ndarray:
    """Top-d principal-component scores of the rows of x (centred SVD)."""
    centred = x - x.mean(axis=0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    scores: np.ndarray = u[:, :d] * s[:d]
    return scores


def fit_irt(labels: np.ndarray, init_disc: np.ndarray, max_iter: int = 300, seed: int = 0
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """MAP fit of (θ, a, b) under P = sigmoid(a·θ − d·b) with N(0, 1) priors on all of them.

    Labels may be 0/1 or soft in [0, 1] (same cross-entropy). Returns disc, diff, ability
    and the final mean loss per response.
    """
    from scipy.optimize import minimize

    m, n = labels.shape
    d = init_disc.shape[1]
    rng = np.random.default_rng(seed)
    scale = init_disc.std() or 1.0
    x0 = np.concatenate([rng.standard_normal(m * d), (init_disc / scale).ravel(), np.zeros(n)])

    def unpack(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return x[: m * d].reshape(m, d), x[m * d: m * d + n * d].reshape(n, d), x[m * d + n * d:]

    def loss_and_grad(x: np.ndarray) -> tuple[float, np.ndarray]:
        theta, disc, diff = unpack(x)
        z = theta @ disc.T - d * diff[None, :]
        # stable BCE: log(1 + e^z) − y z
        loss = np.sum(np.logaddexp(0.0, z) - labels * z) + 0.5 * float(x @ x)
        r = 1.0 / (1.0 + np.exp(-z)) - labels
        g_theta = r @ disc + theta
        g_disc = r.T @ theta + disc
        g_diff = -d * r.sum(axis=0) + diff
        return float(loss), np.concatenate([g_theta.ravel(), g_disc.ravel(), g_diff])

    # One BLAS thread: these products are small, and threaded OpenBLAS spins 20x slower on a
    # busy machine; one thread also makes the result independent of the core count.
    with single_thread():
        res = minimize(loss_and_grad, x0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter})
    theta, disc, diff = unpack(res.x)
    return disc, diff, theta, float(res.fun) / labels.size


# ---------------------------------------------------------------- 3. anchor selection


def balance_weights() -> np.ndarray:
    """Each sample's weight in the Overall: 1 / (6 · |category| · |dataset|), normalised."""
    w = np.empty(N_ITEMS)
    for name, sl in dataset_slices().items():
        w[sl] = 1.0 / (len(CATEGORIES) * len(CATEGORIES[CATEGORY_OF[name]]) * (sl.stop - sl.start))
    weights: np.ndarray = w / w.sum()
    return weights


def _allocate(total: int, weights: np.ndarray, minimum: int) -> np.ndarray:
    """Integer counts ∝ weights (largest remainder), each at least `minimum`."""
    counts = np.full(len(weights), minimum)
    left = total - counts.sum()
    share = weights / weights.sum() * left
    counts += np.floor(share).astype(int)
    order = np.argsort(-(share - np.floor(share)))
    counts[order[: total - counts.sum()]] += 1
    return counts


def _kmeans_anchors(features: np.ndarray, members: np.ndarray, k: int, weights: np.ndarray, seed: int) -> list[int]:
    """K-Means over `members`; per centre the nearest member not already chosen."""
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=k, n_init="auto", random_state=seed).fit(features[members], sample_weight=weights[members])
    dist = ((km.cluster_centers_[:, None, :] - features[members][None, :, :]) ** 2).sum(axis=2)
    chosen: list[int] = []
    for row in dist:
        for j in np.argsort(row):
            if members[j] not in chosen:
                chosen.append(int(members[j]))
                break
    return chosen


def sample_lengths() -> np.ndarray:
    """Each sample's expected prompt length: its dataset's LongBench average from the paper's
    Table 1 (words, characters for Chinese), since the full texts are not available offline."""
    units = np.empty(N_ITEMS)
    for name, sl in dataset_slices().items():
        units[sl] = AVG_LENGTH[name][0]
    return units


def cost_aware_counts(scores: np.ndarray, budget: float, minimum: int = 2) -> np.ndarray:
    """Anchors per dataset that minimise the sampling variance of the Overall for a length budget.

    The Overall's variance from n_d anchors of dataset d is Σ W_d² σ_d² / n_d (W_d its weight
    in the Overall, σ_d the spread of its item scores over the training models); under a
    cost Σ n_d c_d (c_d its average length) the optimum is Neyman's allocation with costs,
    n_d ∝ W_d σ_d / √c_d. Rounded counts (at least `minimum`, at most the dataset) are
    scaled to the largest that stays within `budget` × the full benchmark's length.
    """
    slices = list(dataset_slices().values())
    lengths = sample_lengths()
    cost = np.array([lengths[sl.start] for sl in slices])
    size = np.array([sl.stop - sl.start for sl in slices])
    weight = np.array([balance_weights()[sl].sum() for sl in slices])
    spread = np.array([np.sqrt(scores[:, sl].var(axis=1).mean()) for sl in slices])
    rate = weight * spread / np.sqrt(cost)
    allowed = budget * lengths.sum()

    def counts(scale: float) -> np.ndarray:
        out: np.ndarray = np.clip(np.round(scale * rate), minimum, size).astype(int)
        return out

    low, high = 0.0, float(size.max() / rate.min())
    for _ in range(100):  # bisection on the scale: the largest allocation within the budget
        mid = (low + high) / 2
        low, high = (mid, high) if counts(mid) @ cost <= allowed else (low, mid)
    return counts(low)


def select_anchors(disc: np.ndarray, diff: np.ndarray, n_anchors: int, selection: str, seed: int = 0,
                   scores: np.ndarray | None = None, budget: float = 0.03) -> np.ndarray:
    """Sorted anchor indices: K-Means centres over (a_j, b_j) within each group.

    "cost" groups by dataset with `cost_aware_counts(scores, budget)` anchors each
    (n_anchors is then ignored: the budget sets the number).
    """
    features = np.hstack([disc, diff[:, None]])
    weights = balance_weights()
    ds_index = dataset_index()
    if selection == "cost":
        if scores is None:
            raise ValueError("cost-aware selection needs the training scores")
        groups = [np.flatnonzero(ds_index == k) for k in range(len(DATASETS))]
        counts = list(cost_aware_counts(scores, budget))
    elif selection == "category":
        groups = [np.flatnonzero(np.isin(ds_index, [DATASET_NAMES.index(d) for d in members]))
                  for members in CATEGORIES.values()]
        counts = [int(len(g) / N_ITEMS * n_anchors) for g in groups]
        counts[-1] = n_anchors - sum(counts[:-1])  # the release gives the remainder to the last
    elif selection == "dataset":
        groups = [np.flatnonzero(ds_index == k) for k in range(len(DATASETS))]
        counts = list(_allocate(n_anchors, np.array([weights[g].sum() for g in groups]), 2))
    else:
        raise ValueError(f"unknown selection {selection!r}")
    anchors: list[int] = []
    for group, k in zip(groups, counts):
        anchors += _kmeans_anchors(features, group, int(k), weights, seed)
    return np.array(sorted(anchors))


# ---------------------------------------------------------------- calibration and the whole build


def fit_calibration(params: IrtParams, scores: np.ndarray, shrink: float = 1.0) -> dict[str, tuple[float, float]]:
    """Per-dataset (intercept, slope) mapping the IRT estimate to the true dataset mean.

    Fitted on the training models estimated from their anchor scores only, i.e. as a new
    model would be; a ridge penalty `shrink` pulls towards the identity (0, 1) so twenty
    models cannot overfit it.
    """
    raw = IrtParams(params.disc, params.diff, params.anchors, theta_prior=params.theta_prior)
    est = np.array([[estimate_irt(raw, row[params.anchors])["by_dataset"][d] for d in DATASET_NAMES] for row in scores])
    out = {}
    for k, (name, sl) in enumerate(zip(DATASET_NAMES, dataset_slices().values())):
        truth = scores[:, sl].mean(axis=1)
        x = np.column_stack([np.ones(len(truth)), est[:, k]])
        target = truth - est[:, k]  # solve for the deviation from identity
        coef = np.linalg.solve(x.T @ x + shrink * np.diag([0.0, 1.0]), x.T @ target)
        out[name] = (float(coef[0]), float(1.0 + coef[1]))
    return out


def build(scores: np.ndarray, init_embeddings: np.ndarray, recipe: Recipe = Recipe(),
          anchors: np.ndarray | None = None) -> BuildResult:
    """Algorithm 1 on a (models × 4,750) score table.

    Given `anchors`, they are kept and only the item parameters are fitted: a run can only
    use anchors whose prompts it has (the release's 237, in the data's samples/).
    """
    if scores.ndim != 2 or scores.shape[1] != N_ITEMS:
        raise ValueError(f"scores must be (models, {N_ITEMS}), got {scores.shape}")
    init = init_embeddings if init_embeddings.shape[1] == recipe.dims else pca(init_embeddings, recipe.dims)
    labels, thresholds = make_labels(scores, recipe.labels)
    disc, diff, ability, loss = fit_irt(labels, init, recipe.max_iter, recipe.seed)
    if anchors is None:
        n_anchors = int((1 - recipe.ratio) * N_ITEMS)
        anchors = select_anchors(disc, diff, n_anchors, recipe.selection, recipe.seed, scores, recipe.budget)
    params = IrtParams(disc, diff, np.sort(anchors), ability, theta_prior=recipe.theta_prior, source="built")
    if recipe.calibrate:
        params.calibration = fit_calibration(params, scores)
    return BuildResult(params, thresholds, loss)


# ---------------------------------------------------------------- embedders for new data


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class OpenAIEmbedder:
    """OpenAI embeddings (the paper's κ_text), batched; the key comes from OPENAI_API_KEY."""

    model: str = "text-embedding-3-small"
    batch: int = 64
    max_tokens: int = 8000

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from openai import OpenAI

        from ..tokenizers import get_tokenizer

        tok = get_tokenizer("cl100k_base")
        clipped = [tok.decode(tok.encode(t)[: self.max_tokens]) for t in texts]  # the API's input limit
        client = OpenAI()
        rows: list[list[float]] = []
        for start in range(0, len(clipped), self.batch):
            resp = client.embeddings.create(model=self.model, input=clipped[start: start + self.batch])
            rows += [item.embedding for item in resp.data]
        return np.asarray(rows)


@dataclass
class SentenceTransformerEmbedder:
    """A local sentence-transformers model (needs `pip install sentence-transformers`)."""

    model: str = "all-MiniLM-L6-v2"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from sentence_transformers import SentenceTransformer

        return np.asarray(SentenceTransformer(self.model).encode(list(texts), batch_size=16))


def get_embedder(spec: str) -> Embedder:
    """'openai[:model]' or 'st:model'."""
    kind, _, model = spec.partition(":")
    if kind == "openai":
        return OpenAIEmbedder(model or OpenAIEmbedder.model)
    if kind in ("st", "sentence-transformers"):
        return SentenceTransformerEmbedder(model or SentenceTransformerEmbedder.model)
    raise ValueError(f"unknown embedder {spec!r}")
