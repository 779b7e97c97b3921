"""What a MiniLongBench build learns, and how well it does on models it never saw.

`learn` is the whole build beyond the anchors: the IRT item parameters (build.py), the
per-category IRT, the anchor regression, and a K-fold cross-validation over its own
training models whose out-of-fold estimates choose the stacking weights and calibrate
every method's 90% interval (Overall and categories). `asyncbench minilongbench build`
runs it on all 30 models; `held_out` runs it inside each fold of a leave-one-model-out
or leave-one-family-out cross-validation, so that nothing the held-out models did
reaches their estimate, except one thing no run can avoid: the anchors are the release's
237 (a run has only their prompts), chosen by the release with 20 of these 30 models.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from .anchor_regression import AnchorRegression, fit_pls, fit_ridge
from .build import Recipe, build
from .category_irt import CategoryIrt, estimate_category_irt, fit_category_irt
from .conformal import interval
from .irt import CATEGORIES, DATASET_NAMES, Aggregate, IrtParams, aggregate, dataset_slices, estimate_irt
from .methods import DEFAULT_METHOD, FOLDS, METHODS
from .minilongbench import STACK_BASES, Estimator, direct_vector
from .stacking import choose_weights

# The release's 30 models by the maker of their pretrained base (a fine-tune goes with its
# base: it shares the base's weights, data and tokenizer, which is what makes models of one
# family alike). Names as in longbench_scores.json; the base is the one the name says
# (llama, qwen, mistral, gemma, OLMo, AMD's llama-135m) or the known base of the
# fine-tune (airoboros, ALMA, giraffe, GOAT, tulu, WizardLM: LLaMA / Llama 2). Not traced
# offline, grouped with Meta's 7B fine-tunes: Koss-7B-chat and perry-7b; and
# Kunoichi-7BLlama-2-7b-chat-hf-10-sparsity, whose name joins the Mistral-based
# Kunoichi-7B and a pruned Llama-2-7b-chat, by the latter. Their scores do not settle it
# (each correlates with any other model at 0.34 at most).
FAMILIES: dict[str, tuple[str, ...]] = {
    "Meta (LLaMA, Llama 2 and fine-tunes)": (
        "airoboros-7b", "ALMA-7B-Ja-V2", "giraffe-7b", "GOAT-7B-Community", "Koss-7B-chat",
        "Kunoichi-7BLlama-2-7b-chat-hf-10-sparsity", "Llama-2-7b-ft-instruct-es", "llama-2-7b-hf", "llama-7b-hf",
        "llama-7b-SFT_ds_wiki65k_1024_r_64_alpha_16_merged", "llama-30b", "llama-shishya-7b-ep3-v1", "perry-7b",
        "recycled-wizardlm-7b-v2.0", "tulu-7B-fp16"),
    "Alibaba (Qwen)": ("qwen-7b-hf", "qwen1.5-0.5b-hf", "qwen1.5-1.8b-hf", "qwen2-0.5b-hf", "qwen2.5-0.5b-base",
                       "qwen2.5-1.5b-base", "qwen2.5-3b-instruct-hf"),
    "Mistral AI": ("Mistral-7B-Instruct-v0.2-sparsity-20", "mistral-7b-v0.1-hf", "mistral-7b-v0.3-hf"),
    "Google (Gemma 2)": ("gemma2-2b-hf", "gemma2-9b-hf"),
    "AMD": ("amd-llama-135m", "amd-llama-135m-code"),
    "AI2 (OLMo)": ("OLMo-1B",),
}


def overall_weights() -> np.ndarray:
    """(21,) each dataset's weight in LongBench's Overall (mean of the category means)."""
    w = np.zeros(len(DATASET_NAMES))
    for members in CATEGORIES.values():
        for d in members:
            w[DATASET_NAMES.index(d)] = 1.0 / (len(CATEGORIES) * len(members))
    return w


def category_matrix() -> np.ndarray:
    """(6, 21): row c averages the datasets of category c."""
    m = np.zeros((len(CATEGORIES), len(DATASET_NAMES)))
    for c, members in enumerate(CATEGORIES.values()):
        for d in members:
            m[c, DATASET_NAMES.index(d)] = 1.0 / len(members)
    return m


def dataset_means(scores: np.ndarray) -> np.ndarray:
    """(models, 21) full-LongBench dataset scores of a (models, 4750) table."""
    return np.stack([scores[:, sl].mean(axis=1) for sl in dataset_slices().values()], axis=1)


def _vector(result: Aggregate) -> np.ndarray:
    return np.array([result["by_dataset"][d] for d in DATASET_NAMES])


@dataclass
class Fits:
    """Everything learnt from one set of training models (`params`, the d = 10 IRT, may be
    left out: it is the slowest fit)."""

    anchors: np.ndarray
    params: IrtParams | None
    category_irt: CategoryIrt
    ridge: AnchorRegression
    pls: AnchorRegression | None = None

    def predict(self, y: np.ndarray) -> dict[str, np.ndarray]:
        """(21,) per-dataset estimates of every fitted method but `stack`, for anchor scores y."""
        direct = direct_vector(self.anchors, y)
        out = {"direct": direct}
        if self.params is not None:
            out["irt"] = _vector(estimate_irt(self.params, y))
            out["blend"] = 0.5 * out["irt"] + 0.5 * direct
        out["category_irt"] = _vector(estimate_category_irt(self.category_irt, self.anchors, y))
        out["ridge"] = np.clip(direct + self.ridge.correction(y), 0.0, 1.0)
        if self.pls is not None:
            out["pls"] = np.clip(direct + self.pls.correction(y), 0.0, 1.0)
        return out


def fit(scores: np.ndarray, embeddings: np.ndarray, anchors: np.ndarray, recipe: Recipe, irt: bool = True,
        pls: bool = False) -> Fits:
    """The IRT item parameters, the per-category IRT and the regression(s) on `scores`."""
    y = scores[:, anchors]
    correction = dataset_means(scores) - np.stack([direct_vector(anchors, row) for row in y])
    return Fits(anchors, build(scores, embeddings, recipe, anchors).params if irt else None,
                fit_category_irt(scores, embeddings), fit_ridge(y, correction, overall_weights()),
                fit_pls(y, correction, overall_weights()) if pls else None)


def fold_order(n: int, folds: int, seed: int) -> list[np.ndarray]:
    """`folds` disjoint index sets covering range(n), from a seeded shuffle."""
    return [np.sort(f) for f in np.array_split(np.random.default_rng(seed).permutation(n), folds)]


@dataclass
class Learnt:
    """A build: the fits on all its models, the stacking weights, and per method the
    out-of-fold estimates (models, 21) and their residuals (Overall; by category)."""

    fits: Fits
    stack: dict[str, float]
    oof: dict[str, np.ndarray]
    overall: dict[str, list[float]]
    by_category: dict[str, dict[str, list[float]]]

    def estimator(self, method: str = DEFAULT_METHOD) -> Estimator:
        """What a run needs, with `method` as the headline (the build must have fitted the IRT)."""
        if self.fits.params is None:
            raise ValueError("the estimator needs the IRT parameters: learn(..., irt=True)")
        params = self.fits.params
        params.method = method
        params.conformal = {m: self.overall[m] for m in METHODS}
        return Estimator(params, self.fits.category_irt, self.fits.ridge, self.stack,
                         {m: self.by_category[m] for m in METHODS})


def learn(scores: np.ndarray, embeddings: np.ndarray, anchors: np.ndarray, recipe: Recipe, folds: int = FOLDS,
          seed: int = 0, irt: bool = True, pls: bool = False) -> Learnt:
    """The build on `scores` (models × 4,750): everything fitted on all of them, the
    stacking weights and the held-out residuals from a `folds`-fold CV over them.

    The stack's own out-of-fold estimate is cross-fitted: the estimate of a model in fold
    k uses weights chosen on the other folds' out-of-fold estimates, so its residual is
    not one its weights were chosen to make small. Without `irt` the stack is of the
    other bases (a quicker build for tests and experiments; not what ships)."""
    anchors = np.sort(anchors)
    fits = fit(scores, embeddings, anchors, recipe, irt, pls)
    oof: dict[str, np.ndarray] = {}
    parts = fold_order(len(scores), folds, seed)
    for test in parts:
        inner = fit(scores[np.setdiff1d(np.arange(len(scores)), test)], embeddings, anchors, recipe, irt, pls)
        for i in test:
            for m, v in inner.predict(scores[i, anchors]).items():
                oof.setdefault(m, np.zeros((len(scores), len(DATASET_NAMES))))[i] = v
    truth = dataset_means(scores)
    w = overall_weights()
    bases = [m for m in STACK_BASES if m in oof]
    stack = choose_weights({m: oof[m] for m in bases}, truth, w)
    oof["stack"] = np.zeros_like(truth)
    for test in parts:
        rest = np.setdiff1d(np.arange(len(scores)), test)
        weights = choose_weights({m: oof[m][rest] for m in bases}, truth[rest], w)
        oof["stack"][test] = np.sum([weights[m] * oof[m][test] for m in bases], axis=0)
    overall, by_cat = residuals(oof, truth)
    return Learnt(fits, stack, oof, overall, by_cat)


def residuals(oof: Mapping[str, np.ndarray], truth: np.ndarray
              ) -> tuple[dict[str, list[float]], dict[str, dict[str, list[float]]]]:
    """Per method, true − estimated Overall and category scores of each held-out model."""
    w, cm = overall_weights(), category_matrix()
    overall, by_cat = {}, {}
    for m, est in oof.items():
        est = np.clip(est, 0.0, 1.0)
        overall[m] = [float(x) for x in truth @ w - est @ w]
        diff = truth @ cm.T - est @ cm.T
        by_cat[m] = {c: [float(x) for x in diff[:, k]] for k, c in enumerate(CATEGORIES)}
    return overall, by_cat


# ---------------------------------------------------------------- held-out evaluation


@dataclass
class HeldOut:
    """Per method: each model's estimate (models, 21) when held out, and its 90% intervals
    (models, 7: the Overall then the six categories) from its fold's build."""

    estimates: dict[str, np.ndarray]
    intervals: dict[str, np.ndarray]


def lomo(n: int) -> list[np.ndarray]:
    """Leave one model out."""
    return [np.array([i]) for i in range(n)]


def lofo(models: list[str]) -> list[np.ndarray]:
    """Leave one family out (FAMILIES), in its order."""
    return [np.array([models.index(m) for m in members]) for members in FAMILIES.values()]


Extra = Mapping[str, Callable[[np.ndarray], Callable[[np.ndarray], np.ndarray]]]


def held_out(scores: np.ndarray, embeddings: np.ndarray, anchors: np.ndarray, folds: list[np.ndarray],
             recipe: Recipe, extra: Extra | None = None, jobs: int = 1, irt: bool = True, pls: bool = False,
             progress: Callable[[str], None] | None = None) -> HeldOut:
    """Every method's estimate of each model held out in `folds`, built on the others.

    `extra` adds methods without intervals: name -> (training rows -> (anchor scores ->
    (21,) estimate)), e.g. the release's recipe refitted in the fold (module-level
    functions when `jobs` > 1: the folds then run in that many processes). Without `irt`
    the d = 10 IRT (irt, blend, and the stack's irt base) is left out; with `pls` the PLS
    regression is a method too (not a stacking base)."""
    n = len(scores)
    est: dict[str, np.ndarray] = {}
    ints: dict[str, np.ndarray] = {}
    args = [(scores, embeddings, np.sort(anchors), test, recipe, extra or {}, irt, pls) for test in folds]
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(_fold, *zip(*args)))
    else:
        done = []
        for k, a in enumerate(args):
            done.append(_fold(*a))
            if progress:
                progress(f"fold {k + 1}/{len(folds)}")
    for test, (fold_est, fold_ints) in zip(folds, done):
        for m, rows in fold_est.items():
            est.setdefault(m, np.zeros((n, len(DATASET_NAMES))))[test] = rows
        for m, rows in fold_ints.items():
            ints.setdefault(m, np.zeros((n, 1 + len(CATEGORIES), 2)))[test] = rows
    return HeldOut(est, ints)


def _fold(scores: np.ndarray, embeddings: np.ndarray, anchors: np.ndarray, test: np.ndarray, recipe: Recipe,
          extra: Extra, irt: bool, pls: bool) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """One fold: the build on the other models, the test models' estimates and intervals."""
    train = np.setdiff1d(np.arange(len(scores)), test)
    built = learn(scores[train], embeddings, anchors, recipe, irt=irt, pls=pls)
    others = {name: make(train) for name, make in extra.items()}
    est: dict[str, np.ndarray] = {}
    ints: dict[str, np.ndarray] = {}
    for row, i in enumerate(test):
        y = scores[i, anchors]
        preds = built.fits.predict(y)
        preds["stack"] = np.sum([w * preds[m] for m, w in built.stack.items()], axis=0)
        for m, v in preds.items():
            est.setdefault(m, np.zeros((len(test), len(DATASET_NAMES))))[row] = v
            agg = aggregate_vector(v)
            bounds = [interval(agg[0], built.overall[m])] + [interval(agg[1 + c], built.by_category[m][cat])
                                                             for c, cat in enumerate(CATEGORIES)]
            ints.setdefault(m, np.zeros((len(test), 1 + len(CATEGORIES), 2)))[row] = bounds
        for name, predict in others.items():
            est.setdefault(name, np.zeros((len(test), len(DATASET_NAMES))))[row] = predict(y)
    return est, ints


def aggregate_vector(by_dataset: np.ndarray) -> np.ndarray:
    """(7,) Overall then the six category scores of a (21,) dataset vector (clipped to [0, 1])."""
    v = np.clip(by_dataset, 0.0, 1.0)
    out: np.ndarray = np.concatenate([[v @ overall_weights()], category_matrix() @ v])
    return out


def truth_vectors(scores: np.ndarray) -> np.ndarray:
    """(models, 7) true Overall and category scores."""
    return np.stack([aggregate_vector(np.array([aggregate(row)["by_dataset"][d] for d in DATASET_NAMES]))
                     for row in scores])
