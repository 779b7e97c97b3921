"""The 90% interval of a MiniLongBench Overall, calibrated on models the build never saw.

An estimate errs for two reasons: which of a model's answers the anchors happened to
sample, and the method's own error on a new model (a biased IRT fit, a dataset the
anchors represent badly), which no resampling of one model's anchors can reveal. A
leave-models-out cross-validation of the whole build sees both at once: each held-out
model is estimated from its own 237 sampled anchor scores by parameters fitted without
it, so its residual r = true − estimated Overall carries the sampling noise and the
method's error together. The interval is split-conformal on those residuals (stored with
the parameters by `asyncbench minilongbench build`):

    estimate + [r_(k_lo), r_(k_hi)],  k_lo = ⌊(n+1)·α/2⌋, k_hi = ⌈(n+1)·(1 − α/2)⌉

(order statistics of the n residuals), so each tail holds at most α/2 for a new model
exchangeable with the training ones. Also measured: scaling each residual by the model's
own anchor-sampling SD (the within-dataset bootstrap of its anchors, in closed form),
which over-covered and was a third wider (92%, width 0.071 against 91%, 0.053 on 10 splits,
bench/minilongbench.md): on these models the method's error, not the anchors' noise,
sets the width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

LEVEL = 0.9


def interval(estimate: float, residuals: Sequence[float], level: float = LEVEL) -> list[float]:
    """[low, high] of the split-conformal interval around `estimate`, clipped to [0, 1]."""
    r = np.sort(np.asarray(residuals, dtype=float))
    n, alpha = len(r), 1.0 - level
    lo = min(max(math.floor((n + 1) * alpha / 2), 1), n) - 1
    hi = min(max(math.ceil((n + 1) * (1 - alpha / 2)), 1), n) - 1
    return [float(np.clip(estimate + r[lo], 0.0, 1.0)), float(np.clip(estimate + r[hi], 0.0, 1.0))]
