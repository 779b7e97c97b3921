"""MiniLongBench's estimate on models nobody has seen: which method, and how far to trust it.

Leave-one-model-out (30 folds) and leave-one-family-out (6 folds: the makers of the
models' pretrained bases, `asyncbench.estimators.unseen.FAMILIES`) cross-validation over
the 30 models of the release's score table. In each fold the whole build beyond the
anchors is learnt from the training models only (`unseen.learn`, what `asyncbench
minilongbench build` runs on all 30): the IRT item parameters, the per-category IRT, the
ridge and PLS regressions (their penalty / components by leave-one-out inside the fold),
the stacking weights and the residuals that calibrate the 90% intervals (a 5-fold CV over
the fold's training models). The held-out model is then estimated from its 237 anchor
scores alone. Also on the same folds: the release's recipe (global threshold) refitted in
the fold, and the release's published parameters (fitted with 20 of these 30 models:
they leak, a reference only).

The anchors are the release's 237 in every fold (a run has only their prompts); the release
chose them with 20 of these 30 models, so the script also reports the 10 models the
release never saw ("unseen by the anchors").

Figures: Spearman and MAE of the held-out Overall (0-1) against the full-LongBench
Overall of all 4,750 samples, the share of held-out models inside their 90% interval and
its mean width; the same per category; the anchors' prompt tokens (o200k_base, the
prompts as the release built them) against the full benchmark's, extrapolated per dataset
(`irt.token_cost`). The default is the method with the lowest leave-one-model-out MAE
among those whose Spearman is not below any rival's by more than 0.005.

    nice python bench/minilongbench_unseen.py [--schemes lomo,lofo] [--jobs 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from asyncbench.estimators.build import Recipe, build
from asyncbench.estimators.irt import CATEGORIES, DATASET_NAMES, estimate_irt, load_params, token_cost
from asyncbench.estimators.unseen import FAMILIES, aggregate_vector, held_out, lofo, lomo, truth_vectors

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"
METHODS = ("release (published, leaks)", "release recipe", "irt", "direct", "blend", "category_irt", "ridge", "pls",
           "stack")
CANDIDATES = ("irt", "direct", "blend", "category_irt", "ridge", "pls", "stack")  # learnt in fold, with intervals
TOLERANCE = 0.005


def release_recipe(train: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The release's recipe (global threshold) on the fold's training models, its anchors."""
    params = build(SCORES[train], EMB, Recipe(), ANCHORS).params
    return lambda y: np.array([estimate_irt(params, y)["by_dataset"][d] for d in DATASET_NAMES])


def published(_train: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    params = load_params(DATA)
    return lambda y: np.array([estimate_irt(params, y)["by_dataset"][d] for d in DATASET_NAMES])


def anchor_tokens() -> list[int]:
    """o200k_base tokens of each anchor's prompt (samples/, sorted-anchor order)."""
    from asyncbench.tokenizers import get_tokenizer

    tok = get_tokenizer("o200k_base")
    counts = []
    for name in DATASET_NAMES:
        entries = json.loads((DATA / "samples" / f"MiniLongBench_{name}.json").read_text())
        counts += [tok.count(entries[str(k)]["origin_prompt"]) for k in range(len(entries))]
    return counts


def figures(est: np.ndarray, truth: np.ndarray, rows: np.ndarray, key: int) -> tuple[float, float]:
    e = np.array([aggregate_vector(v)[key] for v in est[rows]])
    return float(spearmanr(e, truth[rows, key])[0]), float(np.mean(np.abs(e - truth[rows, key])))


def table(name: str, result: dict[str, dict[str, object]]) -> list[str]:
    lines = [f"### {name}", "", "| method | Spearman | MAE | 90% coverage | mean width | unseen by the anchors: "
             "Spearman | MAE |", "|---|---|---|---|---|---|---|"]
    for m, r in result.items():
        cov = "" if r["coverage"] is None else f"{r['coverage']:.2f} ({r['covered']}/30)"
        width = "" if r["width"] is None else f"{r['width']:.4f}"
        lines.append(f"| {m} | {r['spearman']:.3f} | {r['mae']:.4f} | {cov} | {width} | {r['sub_spearman']:.3f} "
                     f"| {r['sub_mae']:.4f} |")
    return lines


def category_table(name: str, result: dict[str, dict[str, object]]) -> list[str]:
    cats = list(CATEGORIES)
    lines = [f"### {name}, per category: Spearman / MAE / 90% coverage", "",
             "| method | " + " | ".join(cats) + " |", "|---|" + "---|" * len(cats)]
    for m, r in result.items():
        cells = []
        for c in cats:
            sp, mae, cov = r["by_category"][c]  # type: ignore[index]
            cells.append(f"{sp:.3f} / {mae:.4f}" + ("" if cov is None else f" / {cov:.2f}"))
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines


def family_table(name: str, estimates: dict[str, np.ndarray], truth: np.ndarray, models: list[str]) -> list[str]:
    """MAE of the held-out Overall per family (FAMILIES), every method."""
    lines = [f"### {name}, MAE of the Overall per family", "",
             "| method | " + " | ".join(f"{f} ({len(m)})" for f, m in FAMILIES.items()) + " |",
             "|---|" + "---|" * len(FAMILIES)]
    for m, est in estimates.items():
        overall = np.array([aggregate_vector(v)[0] for v in est])
        cells = []
        for members in FAMILIES.values():
            rows = [models.index(x) for x in members]
            cells.append(f"{np.mean(np.abs(overall[rows] - truth[rows, 0])):.4f}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemes", default="lomo,lofo")
    ap.add_argument("--jobs", type=int, default=1, help="folds run in this many processes")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    args = ap.parse_args()
    models = list(np.load(DATA / "longbench_scores.npz")["models"])
    train20 = set(json.loads((DATA / "longbench_scores.json").read_text())["irt_train_models"])
    unseen = np.array([i for i, m in enumerate(models) if m not in train20])
    truth = truth_vectors(SCORES)
    out: dict[str, object] = {}
    tokens = anchor_tokens()
    cost = token_cost(ANCHORS, tokens)
    print(f"cost of every method: the 237 anchors' prompts, {cost['anchor_prompt_tokens']:,} tokens (o200k_base), "
          f"against ~{cost['full_prompt_tokens_estimate']:,} for full LongBench "
          f"({100 * cost['anchor_prompt_tokens'] / cost['full_prompt_tokens_estimate']:.1f}%)\n")
    out["tokens"] = {"anchors": cost["anchor_prompt_tokens"], "full_estimate": cost["full_prompt_tokens_estimate"]}
    for scheme in args.schemes.split(","):
        folds = lomo(len(models)) if scheme == "lomo" else lofo(models)
        t0 = time.perf_counter()
        h = held_out(SCORES, EMB, ANCHORS, folds, Recipe.improved(),
                     {"release recipe": release_recipe, "release (published, leaks)": published}, args.jobs,
                     pls=True, progress=lambda s: print(s, flush=True))
        seconds = time.perf_counter() - t0
        everyone = np.arange(len(models))
        result: dict[str, dict[str, object]] = {}
        for m in METHODS:
            est = h.estimates[m]
            sp, mae = figures(est, truth, everyone, 0)
            sub_sp, sub_mae = figures(est, truth, unseen, 0)
            r: dict[str, object] = {"spearman": sp, "mae": mae, "sub_spearman": sub_sp, "sub_mae": sub_mae,
                                    "coverage": None, "covered": None, "width": None, "by_category": {}}
            bounds = h.intervals.get(m)
            inside = None if bounds is None else (bounds[:, :, 0] <= truth + 1e-12) & (truth <= bounds[:, :, 1] + 1e-12)
            if bounds is not None and inside is not None:
                r.update({"coverage": float(inside[:, 0].mean()), "covered": int(inside[:, 0].sum()),
                          "width": float((bounds[:, 0, 1] - bounds[:, 0, 0]).mean())})
            for c, cat in enumerate(CATEGORIES):
                csp, cmae = figures(est, truth, everyone, 1 + c)
                r["by_category"][cat] = (csp, cmae, None if inside is None else float(inside[:, 1 + c].mean()))  # type: ignore[index]
            result[m] = r
        name = {"lomo": "Leave one model out (30 folds)",
                "lofo": f"Leave one family out ({len(FAMILIES)} folds)"}[scheme]
        print("\n".join(table(name, result)) + "\n")
        print("\n".join(category_table(name, result)) + "\n")
        print("\n".join(family_table(name, {m: h.estimates[m] for m in METHODS}, truth, models)) + "\n")
        print(f"({seconds:.0f} s)\n")
        out[scheme] = {"seconds": seconds, "methods": result,
                       "estimates": {m: h.estimates[m].tolist() for m in METHODS}}
        if scheme == "lomo":
            best_sp = max(float(result[m]["spearman"]) for m in CANDIDATES)  # type: ignore[arg-type]
            eligible = [m for m in CANDIDATES if float(result[m]["spearman"]) >= best_sp - TOLERANCE]  # type: ignore[arg-type]
            default = min(eligible, key=lambda m: float(result[m]["mae"]))  # type: ignore[arg-type]
            print(f"default by the rule (lowest LOMO MAE among Spearman >= best - {TOLERANCE}): {default}\n")
            out["default"] = default
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


SCORES = np.load(DATA / "longbench_scores.npz")["scores"].astype(float)
EMB = np.load(DATA / "embeddings_pca.npy")
ANCHORS = np.array(sorted(json.loads((DATA / "anchors.json").read_text())["sorted_anchors"]))

if __name__ == "__main__":
    main()
