"""MiniLongBench: estimate a model's full-LongBench scores from its 237 anchor scores.

The release (MilkThink-Lab/MiniLongBench, `eval_new_llm_by_pred.ipynb`) fits a model's
ability θ under a multidimensional 2PL IRT model whose item curve, inherited from
tinyBenchmarks, clips every per-dimension term before summing:

    P_j(θ) = sigmoid( Σ_k clip(a_jk θ_k − b_j, −30, 30) )

so the scalar difficulty counts once per dimension (the "10 · b_j" of a d = 10 model).
θ minimises the soft-label logistic loss on the continuous anchor scores (eps = 1e-10
inside the logs) with BFGS from θ = 0. Every LongBench sample is then predicted, the
observed anchor scores replace their predictions, and the result is aggregated as
LongBench does: per-dataset means, per-category means of those, Overall = mean of the six
categories, all on the 0-1 scale.

Parameters built by `asyncbench minilongbench build` may add an `estimator.json` with a
prior on θ, a per-dataset linear calibration (see build.py), the headline method, the
held-out residuals that calibrate the 90% interval (see conformal.py) and what the other
methods learnt (minilongbench.py, which computes every estimate); without it (the
release's parameters) the IRT estimate is exactly the release's, with no interval.

Which parameters: "shipped" (the default: the improved recipe fitted on all 30 models of
the release's score table, on the release's 237 anchors, in asyncbench/data/minilongbench),
"release" (the release's own files: `<data_dir>/minilongbench`, else downloaded), or a
directory written by `asyncbench minilongbench build`.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

import numpy as np

from ..errors import UserError
from ..json_values import as_list, as_object
from .methods import METHODS

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "minilongbench"
# The release's score table, read as data (layout.json, with the parameters it describes):
# its 4,750 columns are LongBench samples, datasets in the release's order; LongBench's six
# categories (Overall = their mean); the MiniLongBench paper's Table 1 average lengths
# (words for English/code, characters for Chinese) of LongBench and of the 237 anchors,
# used for the cost estimate because the full LongBench texts are not shipped.


class _Layout(TypedDict):
    """layout.json: [dataset, columns] in table order, category -> datasets, dataset ->
    [LongBench, MiniLongBench] average length."""

    columns: list[tuple[str, int]]
    categories: dict[str, list[str]]
    avg_length: dict[str, tuple[int, int]]


_LAYOUT: _Layout = json.loads((SHIPPED / "layout.json").read_text(encoding="utf-8"))
DATASETS: tuple[tuple[str, int], ...] = tuple((str(name), int(n)) for name, n in _LAYOUT["columns"])
DATASET_NAMES: tuple[str, ...] = tuple(name for name, _ in DATASETS)
N_ITEMS = sum(n for _, n in DATASETS)
CATEGORIES: dict[str, tuple[str, ...]] = {c: tuple(ds) for c, ds in _LAYOUT["categories"].items()}
CATEGORY_OF: dict[str, str] = {d: c for c, ds in CATEGORIES.items() for d in ds}
AVG_LENGTH: dict[str, tuple[int, int]] = {d: (int(a), int(b)) for d, (a, b) in _LAYOUT["avg_length"].items()}



class TokenCost(TypedDict):
    """The anchors' size against the full benchmark (token_cost); the prompt-token
    figures only when the anchors' real token counts were given."""

    approximation: str
    anchor_samples: int
    full_samples: int
    anchor_length_units: float
    full_length_units: float
    fraction: float
    saved_fraction: float
    anchor_prompt_tokens: NotRequired[int]
    full_prompt_tokens_estimate: NotRequired[int]
    saved_prompt_tokens_estimate: NotRequired[int]


class Aggregate(TypedDict):
    """An estimate of LongBench's scores on the 0-1 scale: Overall, category and dataset means."""

    overall: float
    by_category: dict[str, float]
    by_dataset: dict[str, float]
    ci90: NotRequired[list[float]]  # 90% conformal intervals, where the parameters carry residuals
    by_category_ci90: NotRequired[dict[str, list[float]]]


RELEASE_REPO = "https://raw.githubusercontent.com/MilkThink-Lab/MiniLongBench/main/"


def dataset_slices() -> dict[str, slice]:
    """Column range of each dataset in the 4,750-sample table."""
    out, start = {}, 0
    for name, n in DATASETS:
        out[name] = slice(start, start + n)
        start += n
    return out


def dataset_index() -> np.ndarray:
    """(4750,) index into DATASET_NAMES of each column."""
    return np.repeat(np.arange(len(DATASETS)), [n for _, n in DATASETS])


@dataclass
class IrtParams:
    """Item parameters and anchors, in the release's format plus optional extras.

    `disc` (N, d) and `diff` (N,) are a_j and b_j; `anchors` are sorted global column
    indices. `theta_prior` is the precision λ of a N(0, I/λ) prior on θ (0: the release's
    unregularised fit). `calibration` maps a dataset to (intercept, slope) applied to its
    IRT estimate, fitted on the build's training models.
    """

    disc: np.ndarray
    diff: np.ndarray
    anchors: np.ndarray
    ability: np.ndarray | None = None
    theta_prior: float = 0.0
    calibration: dict[str, tuple[float, float]] = field(default_factory=dict)
    source: str = ""
    method: str = "irt"  # the headline estimate
    conformal: dict[str, list[float]] = field(default_factory=dict)  # method -> CV residuals (conformal.py)

    def save(self, out_dir: Path, extra: Mapping[str, object] | None = None) -> None:
        """Write irt_parameters.json + anchors.json (release format) and estimator.json."""
        out_dir.mkdir(parents=True, exist_ok=True)
        params = {"disc": _round(self.disc), "diff": _round(self.diff.reshape(-1, 1))}
        if self.ability is not None:
            params["ability"] = _round(self.ability)
        (out_dir / "irt_parameters.json").write_text(json.dumps(params))
        anchors = [int(i) for i in self.anchors]
        (out_dir / "anchors.json").write_text(json.dumps({"anchors": anchors, "sorted_anchors": sorted(anchors)}))
        est: dict[str, object] = {"theta_prior": self.theta_prior, "method": self.method,
                               "calibration": {k: list(v) for k, v in self.calibration.items()}}
        if self.conformal:
            est["conformal"] = self.conformal
        est.update(extra or {})
        (out_dir / "estimator.json").write_text(json.dumps(est, indent=1))


def _round(values: np.ndarray) -> object:
    """Nested lists of floats to 7 significant digits: a third of the size, and estimates
    move by < 1e-6."""
    return json.loads(json.dumps(np.vectorize(lambda v: float(f"{v:.7g}"))(values).tolist()))


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path} not found; pass --params DIR holding irt_parameters.json and anchors.json") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None


def _float(value: object) -> float:
    """A number estimator.json holds (`float` of anything else is a TypeError, as before)."""
    if isinstance(value, (int, float, str)):
        return float(value)
    raise TypeError(f"expected a number, got {type(value).__name__}")


def load_params(params_dir: Path) -> IrtParams:
    """Load parameters from a directory laid out like `<data_dir>/minilongbench/`."""
    raw = as_object(_read_json(params_dir / "irt_parameters.json"))
    anchors = as_object(_read_json(params_dir / "anchors.json"))
    try:
        disc = np.asarray(raw["disc"], dtype=np.float64)
        diff = np.asarray(raw["diff"], dtype=np.float64).reshape(-1)
        # sorted below (np.sort), and every check on them is order-free
        sorted_anchors = np.asarray(anchors.get("sorted_anchors") or anchors["anchors"], dtype=np.int_)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{params_dir}: malformed IRT parameters ({exc}); expected disc, diff and anchors") from None
    if disc.ndim != 2 or disc.shape[0] != N_ITEMS or diff.shape != (N_ITEMS,):
        raise UserError(f"{params_dir}/irt_parameters.json: expected disc ({N_ITEMS}, d) and diff ({N_ITEMS}, 1), got {disc.shape} and {diff.shape}")
    if len(np.unique(sorted_anchors)) != len(sorted_anchors) or sorted_anchors.min() < 0 or sorted_anchors.max() >= N_ITEMS:
        raise UserError(f"{params_dir}/anchors.json: anchors must be distinct column indices in [0, {N_ITEMS})")
    ability = np.asarray(raw["ability"], dtype=np.float64) if "ability" in raw else None
    source = "shipped" if params_dir.resolve() == SHIPPED else str(params_dir)  # no machine's path in run.json
    params = IrtParams(disc, diff, np.sort(sorted_anchors), ability, source=source)
    extra_path = params_dir / "estimator.json"
    if extra_path.exists():
        extra = as_object(_read_json(extra_path))
        params.theta_prior = _float(extra.get("theta_prior", 0.0))
        params.calibration = {k: (_float(as_list(v)[0]), _float(as_list(v)[1]))
                              for k, v in as_object(extra.get("calibration", {})).items()}
        params.method = str(extra.get("method", "irt"))
        params.conformal = {str(k): [_float(x) for x in as_list(v)] for k, v in as_object(extra.get("conformal", {})).items()}
        if params.method not in METHODS:
            raise UserError(f"{extra_path}: unknown method {params.method!r}; expected one of {', '.join(METHODS)}")
    return params


def resolve_params_dir(spec: str | Path | None, data_dir: Path | None) -> Path:
    """"shipped" (or None: the default), "release", or a directory of parameters."""
    if spec is None or str(spec) == "shipped":
        return SHIPPED
    if str(spec) == "release":
        return default_params_dir(data_dir)
    return Path(spec)


def default_params_dir(data_dir: Path | None) -> Path:
    """`<data_dir>/minilongbench`, else the release's files downloaded into the user cache.

    Without a data directory the release's `data/irt_model/best_parameters.json` and
    `data/anchor.pkl` are fetched once from the MiniLongBench GitHub repository and
    converted to this package's layout under `~/.cache/asyncbench/minilongbench/`.
    """
    if data_dir is not None:
        return data_dir / "minilongbench"
    from ..datadir import cache_root

    target = cache_root() / "minilongbench"
    if not (target / "irt_parameters.json").exists() or not (target / "anchors.json").exists():
        fetch_release(target)
    return target


class _IndexUnpickler(pickle.Unpickler):
    """Only numpy arrays and builtins: the release's anchor.pkl is a dict of index arrays."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
               ("numpy._core.multiarray", "scalar")}

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing {module}.{name} in anchor.pkl")
        return super().find_class(module, name)


def fetch_release(target: Path) -> None:
    """Download the release's IRT parameters and anchors into `target` (network)."""
    import io

    import httpx

    try:
        params = httpx.get(RELEASE_REPO + "data/irt_model/best_parameters.json", timeout=60, follow_redirects=True)
        anchor = httpx.get(RELEASE_REPO + "data/anchor.pkl", timeout=60, follow_redirects=True)
        params.raise_for_status()
        anchor.raise_for_status()
    except httpx.HTTPError as exc:
        raise UserError(f"could not download MiniLongBench parameters ({exc}); pass --data-dir DIR with minilongbench/") from None
    points = _IndexUnpickler(io.BytesIO(anchor.content)).load()
    anchors = sorted({int(i) for arr in points.values() for i in np.asarray(arr).ravel()})
    target.mkdir(parents=True, exist_ok=True)
    (target / "irt_parameters.json").write_bytes(params.content)
    (target / "anchors.json").write_text(json.dumps({"anchors": anchors, "sorted_anchors": anchors}))


# ---------------------------------------------------------------- the IRT model


def item_curve(theta: np.ndarray, disc: np.ndarray, diff: np.ndarray) -> np.ndarray:
    """P_j(θ) with the release's per-dimension clip; disc (n, d), diff (n,) -> (n,)."""
    z = np.clip(disc * theta[None, :] - diff[:, None], -30.0, 30.0).sum(axis=1)
    p: np.ndarray = 1.0 / (1.0 + np.exp(-z))
    return p


def soft_label_loss(theta: np.ndarray, y: np.ndarray, disc: np.ndarray, diff: np.ndarray,
                    eps: float = 1e-10) -> tuple[float, np.ndarray]:
    """The release's soft-label loss at θ and its analytic gradient (eps included, clipped
    terms contributing nothing): what every θ fit here minimises, plus its own prior."""
    raw = disc * theta[None, :] - diff[:, None]
    active = (raw > -30.0) & (raw < 30.0)
    p = 1.0 / (1.0 + np.exp(-np.clip(raw, -30.0, 30.0).sum(axis=1)))
    loss = -np.sum(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))
    dz = -p * (1 - p) * (y / (p + eps) - (1 - y) / (1 - p + eps))
    grad: np.ndarray = (dz[:, None] * disc * active).sum(axis=0)
    return float(loss), grad


def fit_theta(scores: np.ndarray, disc: np.ndarray, diff: np.ndarray, prior: float = 0.0,
              eps: float = 1e-10) -> np.ndarray:
    """θ minimising the release's soft-label loss (+ prior/2 · |θ|²), BFGS from 0.

    The analytic gradient of exactly the release's objective replaces its finite
    differences: same optimum, ~10x fewer function evaluations.
    """
    from scipy.optimize import minimize

    y = np.asarray(scores, dtype=float)

    def loss_and_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        loss, grad = soft_label_loss(theta, y, disc, diff, eps)
        if prior:
            loss += 0.5 * prior * float(theta @ theta)
            grad = grad + prior * theta
        return loss, grad

    theta: np.ndarray = minimize(loss_and_grad, np.zeros(disc.shape[1]), jac=True, method="BFGS",
                                 options={"gtol": 1e-8}).x
    return theta


def aggregate(per_item: np.ndarray) -> Aggregate:
    """LongBench aggregation on the 0-1 scale: dataset means -> category means -> Overall."""
    slices = dataset_slices()
    by_dataset = {name: float(np.mean(per_item[slices[name]])) for name in DATASET_NAMES}
    return aggregate_datasets(by_dataset)


def aggregate_datasets(by_dataset: Mapping[str, float]) -> Aggregate:
    """Category = mean of its datasets present in `by_dataset`; Overall = mean of categories."""
    by_category = {}
    for cat, members in CATEGORIES.items():
        present = [by_dataset[d] for d in members if d in by_dataset]
        if not present:
            raise UserError(f"no score for any {cat} dataset; every category needs at least one anchor")
        by_category[cat] = float(np.mean(present))
    return {"overall": float(np.mean(list(by_category.values()))), "by_category": by_category,
            "by_dataset": dict(by_dataset)}


def anchor_datasets(anchors: np.ndarray) -> np.ndarray:
    """Index into DATASET_NAMES of each anchor."""
    found: np.ndarray = dataset_index()[anchors]
    return found


def predict_items(params: IrtParams, anchor_scores: np.ndarray) -> np.ndarray:
    """All 4,750 item scores: IRT predictions, with the observed anchor scores kept."""
    theta = fit_theta(anchor_scores, params.disc[params.anchors], params.diff[params.anchors], params.theta_prior)
    full = item_curve(theta, params.disc, params.diff)
    full[params.anchors] = anchor_scores
    return full


def estimate_irt(params: IrtParams, anchor_scores: np.ndarray) -> Aggregate:
    """The IRT estimate; with a calibration, each dataset's mean is mapped through it."""
    result = aggregate(predict_items(params, anchor_scores))
    if not params.calibration:
        return result
    by_dataset = {}
    for name, value in result["by_dataset"].items():
        intercept, slope = params.calibration.get(name, (0.0, 1.0))
        by_dataset[name] = float(np.clip(intercept + slope * value, 0.0, 1.0))
    return aggregate_datasets(by_dataset)


def estimate_direct(anchors: np.ndarray, anchor_scores: np.ndarray) -> Aggregate:
    """Appendix G of the paper: aggregate the anchor scores themselves.

    A dataset without anchors (possible when anchors are clustered per category) is left
    out of its category's mean.
    """
    which = anchor_datasets(anchors)
    by_dataset = {name: float(np.mean(anchor_scores[which == k]))
                  for k, name in enumerate(DATASET_NAMES) if (which == k).any()}
    return aggregate_datasets(by_dataset)


def estimate_blend(irt: Aggregate, direct: Aggregate) -> Aggregate:
    """Equal-weight average, per dataset, of the IRT and the direct estimates.

    The two err in complementary ways on held-out models: IRT has the lower error but ranks
    less well within some categories, the direct anchor average ranks well but is biased.
    The weight is fixed at 1/2 a priori (not tuned on the evaluation splits); see
    bench/minilongbench.md for the cross-validation.
    """
    by_irt, by_direct = irt["by_dataset"], direct["by_dataset"]
    return aggregate_datasets({d: 0.5 * by_irt[d] + 0.5 * by_direct[d] if d in by_direct else by_irt[d]
                               for d in by_irt})


# ---------------------------------------------------------------- inputs and the API


def anchor_vector(scores: Sequence[float] | Mapping[str, Sequence[float]], anchors: np.ndarray) -> np.ndarray:
    """Scores in sorted-anchor order, from a flat list or a {dataset: [scores]} mapping."""
    which = anchor_datasets(anchors)
    if isinstance(scores, Mapping):
        unknown = sorted(set(scores) - set(DATASET_NAMES))
        if unknown:
            raise UserError(f"unknown dataset(s) {', '.join(unknown)} in anchor scores; expected LongBench names like {DATASET_NAMES[0]!r}")
        parts = []
        for k, name in enumerate(DATASET_NAMES):
            want = int((which == k).sum())
            got = list(scores.get(name, []))
            if len(got) != want:
                raise UserError(f"anchor scores for {name}: expected {want} values (in ascending LongBench order), got {len(got)}")
            parts.extend(got)
        values = parts
    else:
        values = list(scores)
        if len(values) != len(anchors):
            raise UserError(f"expected {len(anchors)} anchor scores in sorted-anchor order, got {len(values)}")
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise UserError("anchor scores must be numbers in [0, 1]") from None
    if not np.all(np.isfinite(arr)) or arr.min(initial=0) < 0 or arr.max(initial=0) > 1:
        raise UserError("anchor scores must be numbers in [0, 1] (LongBench's x100 scale? divide by 100)")
    return arr


def token_cost(anchors: np.ndarray, anchor_tokens: Sequence[int] | None = None) -> TokenCost:
    """Cost of the anchors against the full benchmark.

    The full LongBench texts are not shipped offline, so the full benchmark is sized from
    Table 1 of the paper: per dataset, n_full × LongBench average length against
    n_anchor × MiniLongBench average length (words, or characters for Chinese). When
    the run engine passes the anchors' real prompt token counts, each dataset's full
    token count is extrapolated as n_full × mean anchor tokens × (LongBench avg length /
    MiniLongBench avg length).
    """
    which = anchor_datasets(anchors)
    sizes = dict(DATASETS)
    anchor_units = full_units = 0.0
    tokens = None if anchor_tokens is None else np.asarray(anchor_tokens, dtype=float)
    if tokens is not None and len(tokens) != len(anchors):
        raise ValueError(f"anchor_tokens has {len(tokens)} entries for {len(anchors)} anchors")
    anchor_tok = full_tok = 0.0
    for k, name in enumerate(DATASET_NAMES):
        n_anchor = int((which == k).sum())
        full_len, mini_len = AVG_LENGTH[name]
        anchor_units += n_anchor * mini_len
        full_units += sizes[name] * full_len
        if tokens is not None and n_anchor:
            mean_tok = float(tokens[which == k].mean())
            anchor_tok += float(tokens[which == k].sum())
            full_tok += sizes[name] * mean_tok * full_len / mini_len
    out: TokenCost = {"approximation": "LongBench/MiniLongBench average lengths from the paper's Table 1",
                      "anchor_samples": int(len(anchors)), "full_samples": N_ITEMS,
                      "anchor_length_units": anchor_units, "full_length_units": full_units,
                      "fraction": anchor_units / full_units, "saved_fraction": 1 - anchor_units / full_units}
    if tokens is not None:
        out.update({"anchor_prompt_tokens": int(anchor_tok), "full_prompt_tokens_estimate": int(round(full_tok)),
                    "saved_prompt_tokens_estimate": int(round(full_tok - anchor_tok))})
    return out
