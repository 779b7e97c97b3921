"""Bootstrap intervals and paired comparisons of benchmark scores.

A benchmark's headline numbers are macro-averages: per-sample scores become a statistic
per *stratum* (a task, or a task x length cell), and strata are averaged into categories
and an overall. The bootstrap here follows that structure (hierarchical): each stratum is
resampled on its own, with its own sample count, its statistic recomputed, and then the
benchmark's own `combine` turns the resampled strata into the same tree of numbers the
run reports. Samples that share a context (BAMBOO's questions on one paper or meeting)
are a *cluster* and are resampled together, since their scores are not independent.

A stratum holds, per cluster, the sums of a few per-sample *components*; its statistic is
a function of the summed components, so a resample is an index matrix into the clusters
and a sum (numpy, no loop over resamples):
- a mean in percent: components (score, 1), statistic 100 * sum(score) / count, which is
  also the sample mean when clusters have unequal sizes;
- F1 in percent (BAMBOO's hallucination detection): components (tp, fp, fn), statistic
  200 tp / (2 tp + fp + fn), 0 where undefined like `metrics.bamboo.precision_recall_f1`.

Intervals are percentile intervals of `n_resamples` draws from one seeded generator, so
they are reproducible. `compare` pairs two runs on the same samples: the same index
matrices for both (a paired bootstrap of B - A), and a paired permutation test for the
p-value (each cluster's A and B results swapped with probability 1/2, the sign-flip test
when the statistic is a mean).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
# A tree as run.json holds scores: nested dicts whose leaves are numbers (here: arrays of
# resampled values, or None where the benchmark reports no number).
Tree = dict[str, object]
Combine = Callable[[Mapping[str, Array]], Tree]

LEVEL = 0.95
N_RESAMPLES = 1000
SEED = 17


def mean_pct(sums: Array) -> Array:
    """100 x mean, from summed (score, 1) components."""
    out: Array = 100.0 * sums[..., 0] / sums[..., 1]
    return out


def f1_pct(sums: Array) -> Array:
    """F1 of the positive class in percent, from summed (tp, fp, fn); 0 where undefined."""
    tp, fp, fn = sums[..., 0], sums[..., 1], sums[..., 2]
    denom = 2 * tp + fp + fn
    out: Array = np.where(tp > 0, 200.0 * tp / np.where(denom > 0, denom, 1.0), 0.0)
    return out


@dataclass(frozen=True)
class Stratum:
    """One unit resampled on its own: per-cluster sums of per-sample components, shape
    (clusters, components), and the statistic of their column sums."""

    parts: Array
    statistic: Callable[[Array], Array]

    def value(self) -> float:
        return float(self.statistic(self.parts.sum(axis=0)))


def stratum(components: Sequence[Sequence[float]] | Array, clusters: Sequence[Hashable] | None = None,
            statistic: Callable[[Array], Array] = mean_pct) -> Stratum:
    """A stratum from one row of components per sample; `clusters` (one label per sample,
    None: each sample alone) says which samples are resampled together. Clusters are
    ordered by first appearance, so two runs given the same samples in the same order
    get the same clusters (what `compare` pairs)."""
    comp = np.asarray(components, dtype=np.float64).reshape(len(components), -1)
    if clusters is None:
        return Stratum(comp, statistic)
    ids: dict[Hashable, int] = {}
    index = np.fromiter((ids.setdefault(c, len(ids)) for c in clusters), dtype=np.intp, count=len(comp))
    parts = np.zeros((len(ids), comp.shape[1]))
    np.add.at(parts, index, comp)
    return Stratum(parts, statistic)


def mean_stratum(scores: Sequence[float], clusters: Sequence[Hashable] | None = None) -> Stratum:
    """Per-sample scores in [0, 1] whose statistic is their mean x 100."""
    values = np.asarray(scores, dtype=np.float64)  # (score, 1) rows built as columns: no tuple per sample
    return stratum(np.column_stack((values, np.ones_like(values))), clusters, mean_pct)


def f1_stratum(predicted: Sequence[bool], gold: Sequence[bool], clusters: Sequence[Hashable] | None = None) -> Stratum:
    """Binary predictions and labels whose statistic is F1 x 100."""
    rows = [(float(p and g), float(p and not g), float(g and not p)) for p, g in zip(predicted, gold)]
    return stratum(rows, clusters, f1_pct)


@dataclass(frozen=True)
class Plan:
    """How a benchmark's numbers are made from samples: the strata (by name) and the
    function from their statistics (one array per stratum) to the scores tree."""

    strata: dict[str, Stratum]
    combine: Combine


# Elements of one block of draws (resamples x clusters): ~2 MB of indices and as much
# gathered, whatever the number of samples.
BLOCK_ELEMENTS = 1 << 18


def _block_rows(clusters: int) -> int:
    """Resamples per block: an even count, so that a block of draws takes whole 64-bit
    words from the generator and the blocks together draw exactly what one
    (resamples, clusters) matrix would (the intervals do not depend on the block size)."""
    return max(2, BLOCK_ELEMENTS // max(clusters, 1) // 2 * 2)


def _resampled(strata: Sequence[Mapping[str, Stratum]], n: int, rng: np.random.Generator) -> list[dict[str, Array]]:
    """The statistic of every stratum under `n` bootstrap draws, for each mapping of
    `strata` (one for `intervals`, the two runs for `compare`: the same draws for both,
    a paired bootstrap). Draws are made stratum by stratum in name order, a block of
    resamples at a time, and summed at once: memory is one block, not the
    (resamples, clusters) index matrix (800 MB at 100,000 samples), and the draws are
    those of that matrix."""
    out: list[dict[str, Array]] = [{} for _ in strata]
    for name in sorted(strata[0]):
        k = len(strata[0][name].parts)
        columns = [[np.ascontiguousarray(s[name].parts[:, j]) for j in range(s[name].parts.shape[1])] for s in strata]
        sums = [np.empty((n, len(cols))) for cols in columns]
        rows = _block_rows(k)
        for start in range(0, n, rows):
            block = rng.integers(0, k, size=(min(rows, n - start), k))
            for total, cols in zip(sums, columns):
                for j, column in enumerate(cols):
                    total[start:start + len(block), j] = column[block].sum(axis=1)
        for i, s in enumerate(strata):
            out[i][name] = s[name].statistic(sums[i])
    return out


def _leaves(tree: Any, fn: Callable[..., Any], *others: Any) -> Any:
    """`fn` applied leaf by leaf to `tree` (and the same leaves of `others`); None stays."""
    if isinstance(tree, dict):
        return {k: _leaves(v, fn, *(o[k] for o in others)) for k, v in tree.items()}
    if tree is None or any(o is None for o in others):
        return None
    return fn(tree, *others)


def _bounds(values: Array, level: float) -> list[float]:
    ordered = np.sort(values)
    lo, hi = quantile(ordered, (1 - level) / 2), quantile(ordered, (1 + level) / 2)
    return [round(lo, 2), round(hi, 2)]


def quantile(ordered: Array, q: float) -> float:
    """`np.quantile(values, q)` (its default 'linear' method) of the sorted 1-d `ordered`,
    computed the way numpy computes it (numpy/lib/_function_base_impl.py: virtual index
    (n-1)q, `_get_indexes`, `_lerp`), so every interval is bit for bit what it was. Not
    np.quantile itself: it calls np.unique, whose first call imports numpy.ma (~0.15 CPU-s,
    a sixth of a small run's whole CPU)."""
    n = len(ordered)
    if n == 0:
        raise ValueError("quantile of an empty array")
    if np.isnan(ordered[-1]):  # sorted: a NaN anywhere is last
        return float("nan")
    virtual = (n - 1) * np.float64(q)
    if virtual >= n - 1:
        return float(ordered[-1])
    if virtual < 0:
        return float(ordered[0])
    prev = int(np.floor(virtual))
    gamma = virtual - prev
    a, b = ordered[prev], ordered[prev + 1]
    diff = b - a
    return float(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma)


def intervals(plan: Plan, level: float = LEVEL, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> Tree:
    """The scores tree with `[lo, hi]` (percentile bootstrap, rounded to 2 decimals) in
    place of each number; the same scale as the numbers, e.g. x100 for LongBench."""
    if not plan.strata:
        return {}
    rng = np.random.default_rng(seed)
    boot = plan.combine(_resampled([plan.strata], n_resamples, rng)[0])
    out: Tree = _leaves(boot, lambda v: _bounds(np.asarray(v, dtype=np.float64), level))
    return out


def compare(a: Plan, b: Plan, level: float = LEVEL, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> Tree:
    """B - A on the same samples, leaf by leaf: `{"a", "b", "diff", "ci": [lo, hi], "p",
    "distinguishable"}`. `a` and `b` must have the same strata with the same clusters in
    the same order (build both from the samples both runs scored). The interval is a
    paired percentile bootstrap; `p` is a two-sided paired permutation test with
    `n_resamples` swaps ((1 + as extreme) / (1 + n)); `distinguishable` is False when the
    interval covers 0."""
    if a.strata.keys() != b.strata.keys() or any(a.strata[k].parts.shape != b.strata[k].parts.shape for k in a.strata):
        raise ValueError("compare needs the same strata and clusters in both runs (the samples both scored)")
    if not a.strata:
        return {}
    rng = np.random.default_rng(seed)
    observed_a = a.combine({k: np.asarray(s.value()) for k, s in a.strata.items()})
    observed_b = b.combine({k: np.asarray(s.value()) for k, s in b.strata.items()})
    resampled_a, resampled_b = _resampled([a.strata, b.strata], n_resamples, rng)
    boot = _leaves(b.combine(resampled_b), np.subtract, a.combine(resampled_a))
    perm_a, perm_b = _swapped(a.strata, b.strata, n_resamples, rng)
    null = _leaves(b.combine(perm_b), np.subtract, a.combine(perm_a))

    def leaf(va: Array, vb: Array, diffs: Array, null_diffs: Array) -> dict[str, object]:
        d = float(vb - va)
        ci = _bounds(diffs, level)
        extreme = int(np.sum(np.abs(null_diffs) >= abs(d) - 1e-9))
        return {"a": round(float(va), 2), "b": round(float(vb), 2), "diff": round(d, 2), "ci": ci,
                "p": round((1 + extreme) / (1 + n_resamples), 4), "distinguishable": not ci[0] <= 0 <= ci[1]}

    out: Tree = _leaves(observed_a, leaf, observed_b, boot, null)
    return out


def _swapped(a: Mapping[str, Stratum], b: Mapping[str, Stratum], n: int,
             rng: np.random.Generator) -> tuple[dict[str, Array], dict[str, Array]]:
    """Statistics of A and B after swapping each cluster's two results with probability
    1/2, n times: the distribution of B - A when the runs are exchangeable. The flips are
    drawn a block at a time (as in `_resampled`), the same flips as one (n, clusters) draw."""
    out_a, out_b = {}, {}
    for name in sorted(a):
        pa, pb = a[name].parts, b[name].parts
        delta = pb - pa
        moved = np.empty((n, delta.shape[1]))  # what the swaps move from B to A
        rows = _block_rows(len(pa))
        for start in range(0, n, rows):
            flips = rng.integers(0, 2, size=(min(rows, n - start), len(pa))).astype(np.float64)
            moved[start:start + len(flips)] = flips @ delta
        out_a[name] = a[name].statistic(pa.sum(axis=0) + moved)
        out_b[name] = b[name].statistic(pb.sum(axis=0) - moved)
    return out_a, out_b
