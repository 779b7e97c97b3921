"""MiniLongBench's estimate of a model's full-LongBench scores, every method at once.

Methods (all from the same 237 anchor scores, so all cost the same tokens):
- `irt`: the release's method (irt.py), with whichever item parameters are loaded;
- `direct`: the anchors' own per-dataset means (the paper's Appendix G);
- `blend`: the per-dataset mean of those two;
- `category_irt`: one IRT model and one ability per LongBench category (category_irt.py);
- `ridge`: the direct estimate corrected by a ridge regression from all 237 anchor scores
  (anchor_regression.py);
- `stack`: a per-dataset convex combination of irt, direct, category_irt and ridge with
  weights learnt from out-of-fold estimates (stacking.py).

The last three are learnt from models' full score tables, so only parameters built by
`asyncbench minilongbench build` have them (the shipped ones do; the release's files have
irt, direct and blend). The headline is the parameters' `method` unless one is asked for;
the shipped headline is the method with the lowest error on models the build never saw
(bench/minilongbench_unseen.md). Each method with stored held-out residuals gets a 90%
interval (`ci90`, conformal.py) on its Overall and on each category
(`by_category_ci90`); the headline's are `overall_ci90` and `by_category_ci90`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from .anchor_regression import AnchorRegression
from .category_irt import CategoryIrt, estimate_category_irt
from .conformal import interval
from .irt import (
    DATASET_NAMES,
    Aggregate,
    IrtParams,
    aggregate_datasets,
    anchor_datasets,
    anchor_vector,
    estimate_blend,
    estimate_direct,
    estimate_irt,
    load_params,
    resolve_params_dir,
    token_cost,
)

CATEGORY_FILE = "category_irt.json"
STACK_BASES = ("irt", "direct", "category_irt", "ridge")


@dataclass
class Estimator:
    """The IRT parameters and anchors (`params`, the release's format) plus what a build
    learnt beyond them: the per-category IRT, the anchor regression, the stacking weights
    and, per method and category, the held-out residuals that calibrate the intervals
    (the Overall's are `params.conformal`)."""

    params: IrtParams
    category_irt: CategoryIrt | None = None
    ridge: AnchorRegression | None = None
    stack: dict[str, float] = field(default_factory=dict)
    conformal_by_category: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def methods(self) -> tuple[str, ...]:
        """The methods these parameters can compute, in a fixed order."""
        out = ["irt", "direct", "blend"]
        if self.category_irt is not None:
            out.append("category_irt")
        if self.ridge is not None:
            out.append("ridge")
        if self.stack and all(m in out for m in self.stack):
            out.append("stack")
        return tuple(out)

    def save(self, out_dir: Path, extra: Mapping[str, object] | None = None) -> None:
        """The release's files plus estimator.json (and category_irt.json when fitted)."""
        learnt: dict[str, object] = dict(extra or {})
        if self.ridge is not None:
            learnt["ridge"] = self.ridge.to_json()
        if self.stack:
            learnt["stack"] = self.stack
        if self.conformal_by_category:
            learnt["conformal_by_category"] = self.conformal_by_category
        self.params.save(out_dir, learnt)
        if self.category_irt is not None:
            self.category_irt.save(out_dir / CATEGORY_FILE)


def load_estimator(params_dir: Path) -> Estimator:
    """`load_params` and whatever estimator.json / category_irt.json add to it."""
    params = load_params(params_dir)
    est = Estimator(params)
    extra_path = params_dir / "estimator.json"
    try:
        if (params_dir / CATEGORY_FILE).exists():
            est.category_irt = CategoryIrt.load(params_dir / CATEGORY_FILE)
        extra = json.loads(extra_path.read_text()) if extra_path.exists() else {}
        if "ridge" in extra:
            est.ridge = AnchorRegression.from_json(extra["ridge"])
        est.stack = {str(k): float(v) for k, v in extra.get("stack", {}).items()}
        est.conformal_by_category = {str(m): {str(c): [float(x) for x in r] for c, r in cats.items()}
                                     for m, cats in extra.get("conformal_by_category", {}).items()}
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        raise UserError(f"{params_dir}: malformed estimator parameters ({exc}); rebuild them with "
                        "`asyncbench minilongbench build`") from None
    if est.ridge is not None and est.ridge.x_mean.shape != (len(params.anchors),):
        raise UserError(f"{extra_path}: the ridge expects {len(est.ridge.x_mean)} anchor scores, "
                        f"the anchors are {len(params.anchors)}")
    if params.method not in est.methods():
        raise UserError(f"{extra_path}: headline method {params.method!r} needs parameters these files lack; "
                        f"they have {', '.join(est.methods())}")
    return est


def direct_vector(anchors: np.ndarray, anchor_scores: np.ndarray) -> np.ndarray:
    """(21,) per-dataset anchor means in DATASET_NAMES order, 0 for a dataset without anchors."""
    which = anchor_datasets(anchors)
    counts = np.bincount(which, minlength=len(DATASET_NAMES))
    sums = np.bincount(which, weights=anchor_scores, minlength=len(DATASET_NAMES))
    out: np.ndarray = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    return out


def estimate_ridge(model: AnchorRegression, anchors: np.ndarray, anchor_scores: np.ndarray) -> Aggregate:
    """The direct estimate plus the regression's correction, per dataset, clipped to [0, 1]."""
    values = np.clip(direct_vector(anchors, anchor_scores) + model.correction(anchor_scores), 0.0, 1.0)
    return aggregate_datasets({d: float(v) for d, v in zip(DATASET_NAMES, values)})


def estimate_stack(weights: Mapping[str, float], results: Mapping[str, Aggregate]) -> Aggregate:
    """Per dataset, Σ_m w_m · estimate_m over the stacked methods."""
    by_dataset = {d: float(sum(w * results[m]["by_dataset"].get(d, 0.0) for m, w in weights.items()))
                  for d in DATASET_NAMES}
    return aggregate_datasets(by_dataset)


def all_estimates(est: Estimator, y: np.ndarray) -> dict[str, Aggregate]:
    """Every method these parameters have, for anchor scores y in sorted-anchor order."""
    params = est.params
    out: dict[str, Aggregate] = {"irt": estimate_irt(params, y), "direct": estimate_direct(params.anchors, y)}
    out["blend"] = estimate_blend(out["irt"], out["direct"])
    if est.category_irt is not None:
        out["category_irt"] = estimate_category_irt(est.category_irt, params.anchors, y)
    if est.ridge is not None:
        out["ridge"] = estimate_ridge(est.ridge, params.anchors, y)
    if "stack" in est.methods():
        out["stack"] = estimate_stack(est.stack, out)
    return out


def estimate(est: Estimator, scores: Sequence[float] | Mapping[str, Sequence[float]],
             method: str | None = None, anchor_tokens: Sequence[int] | None = None) -> dict[str, Any]:
    """Every method's estimate, the headline's Overall (`method`, else the parameters'),
    its 90% intervals when the parameters carry held-out residuals (`overall_ci90`,
    `by_category_ci90`; each method's as `ci90` and `by_category_ci90`), and the cost of
    the anchors."""
    params = est.params
    method = method or params.method
    if method not in est.methods():
        raise UserError(f"estimation method {method!r} is not available with these parameters; "
                        f"choose one of {', '.join(est.methods())}")
    y = anchor_vector(scores, params.anchors)
    result: dict[str, Any] = dict(all_estimates(est, y))
    result.update({"method": method, "overall": result[method]["overall"]})
    for m, residuals in params.conformal.items():
        if m in result:
            result[m]["ci90"] = interval(result[m]["overall"], residuals)
    for m, cats in est.conformal_by_category.items():
        if m in result:
            result[m]["by_category_ci90"] = {c: interval(result[m]["by_category"][c], r) for c, r in cats.items()}
    if "ci90" in result[method]:
        result["overall_ci90"] = result[method]["ci90"]
    if "by_category_ci90" in result[method]:
        result["by_category_ci90"] = result[method]["by_category_ci90"]
    result.update({"calibrated": bool(params.calibration), "theta_prior": params.theta_prior,
                   "params": params.source, "token_cost": token_cost(params.anchors, anchor_tokens)})
    return result


def estimate_from_anchor_scores(scores: Sequence[float] | Mapping[str, Sequence[float]],
                                params: str | Path | None = None, method: str | None = None,
                                anchor_tokens: Sequence[int] | None = None,
                                data_dir: Path | None = None) -> dict[str, Any]:
    """Entry point for the run engine: `params` ("shipped", the default; "release": the
    release's files from `<data_dir>/minilongbench` or downloaded; or a directory) ->
    `estimate(...)`. Scores are on the 0-1 scale."""
    return estimate(load_estimator(resolve_params_dir(params, data_dir)), scores, method, anchor_tokens)
