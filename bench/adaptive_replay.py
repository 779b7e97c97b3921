"""Offline replay of adaptive testing on the 30 models' known LongBench scores.

Leave-models-out on the release's split: item parameters and the θ prior from the
release (fitted on its 20 training models), the per-dataset residual model from those 20
models' scores; evaluated on the 10 others, whose per-sample scores answer the test's
questions. For each target SE: tokens spent and samples asked against the MAE of the
Overall (0-1) vs the model's true full-LongBench Overall, the mean reported SE, and the
calibration of the interval (share of models inside est ± 1.96 SE; rms of the error / SE,
1 when calibrated). Beside: the fixed 237 MiniLongBench anchors (release estimator, and
this module's estimator fed the same anchors), and random stratified samples of the same
sizes (what the selection adds over chance).

Tokens per sample: the 237 anchors' real prompts (chars / 4, Chinese 1.5 chars a token)
plus the dataset's answer budget; every other sample gets its dataset's mean anchor
prompt tokens × (LongBench average length / MiniLongBench average length), Table 1 of the
MiniLongBench paper (the full texts are not available offline), as `irt.token_cost` does.

    python bench/adaptive_replay.py [--data ../shared/data] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from asyncbench.estimators.adaptive import AdaptiveTest, Prior, Residuals, run_replay
from asyncbench.estimators.irt import AVG_LENGTH, DATASET_NAMES, aggregate, dataset_index, estimate_irt, load_params

TARGETS = (0.03, 0.02, 0.015, 0.01, 0.0075, 0.005)


def sample_tokens(data: Path, anchors: np.ndarray) -> np.ndarray:
    """(4750,) tokens per request (prompt + answer budget), as the module docstring says."""
    maxlen = json.loads((data / "longbench" / "dataset2maxlen.json").read_text())
    which = dataset_index()
    anchor_tokens = {}
    position = 0
    for name in DATASET_NAMES:
        entries = json.loads((data / "minilongbench" / "samples" / f"MiniLongBench_{name}.json").read_text())
        per_token = 1.5 if name in ("dureader", "multifieldqa_zh", "vcsum", "lsht", "passage_retrieval_zh") else 4.0
        for key in sorted(entries, key=int):
            anchor_tokens[int(anchors[position])] = len(entries[key]["origin_prompt"]) / per_token
            position += 1
    cost = np.zeros(len(which))
    for k, name in enumerate(DATASET_NAMES):
        in_k = [j for j in anchor_tokens if which[j] == k]
        full_len, mini_len = AVG_LENGTH[name]
        cost[which == k] = np.mean([anchor_tokens[j] for j in in_k]) * full_len / mini_len
    for j, t in anchor_tokens.items():
        cost[j] = t
    return cost + np.array([maxlen[DATASET_NAMES[k]] for k in which])


def summarise(label: str, runs: list[dict[str, float]]) -> dict[str, Any]:
    err = np.array([r["est"] - r["truth"] for r in runs])
    se = np.array([r["se"] for r in runs])
    return {"method": label, "tokens": float(np.mean([r["tokens"] for r in runs])),
            "samples": float(np.mean([r["samples"] for r in runs])), "mae": float(np.mean(np.abs(err))),
            "max_err": float(np.max(np.abs(err))), "mean_se": float(np.mean(se)),
            "coverage95": float(np.mean(np.abs(err) <= 1.96 * se)), "rms_z": float(np.sqrt(np.mean((err / se) ** 2)))}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "data")
    ap.add_argument("--quick", action="store_true", help="2 held-out models, 2 targets (tests)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--start", type=int, default=1)
    ap.add_argument("--json", type=Path, help="write the rows here")
    args = ap.parse_args(argv)
    t0 = time.time()
    mini = args.data / "minilongbench"
    params = load_params(mini)
    table = np.load(mini / "longbench_scores.npz", allow_pickle=False)
    scores, models = table["scores"], [str(m) for m in table["models"]]
    train = set(json.loads((mini / "longbench_scores.json").read_text())["irt_train_models"])
    test_rows = [i for i, m in enumerate(models) if m not in train]
    train_rows = [i for i, m in enumerate(models) if m in train]
    targets: tuple[float, ...] = TARGETS
    if args.quick:
        test_rows, targets = test_rows[:2], (0.03, 0.015)
    cost = sample_tokens(args.data, params.anchors)
    prior = Prior.from_abilities(params.ability) if params.ability is not None else Prior.isotropic(10)
    residuals = Residuals.from_training(params, scores[train_rows], prior)
    truth = {i: aggregate(scores[i])["overall"] for i in test_rows}
    anchors = params.anchors
    rows: list[dict[str, Any]] = []

    def fixed(items: np.ndarray, row: int, resid: Residuals | None) -> dict[str, float]:
        test = AdaptiveTest(params, items, cost, 1e-9, prior, resid)
        est = test.observe(list(items), list(scores[row][items]))
        return {"est": est.overall, "truth": truth[row], "se": est.se, "tokens": float(cost[items].sum()),
                "samples": float(len(items))}

    release = [{"est": estimate_irt(params, scores[i][anchors])["overall"], "truth": truth[i], "se": np.nan,
                "tokens": float(cost[anchors].sum()), "samples": float(len(anchors))} for i in test_rows]
    rows.append(summarise("237 anchors, release estimator", release))
    rows.append(summarise("237 anchors, MAP + residuals", [fixed(anchors, i, residuals) for i in test_rows]))
    for resid, name in ((residuals, "adaptive"), (None, "adaptive, no misfit term")):
        for target in targets if resid is not None else targets[:2]:
            runs = []
            for i in test_rows:
                test = run_replay(AdaptiveTest(params, np.arange(len(cost)), cost, target, prior, resid,
                                               batch_size=args.batch, start_per_dataset=args.start), scores[i])
                est = test.estimate()
                runs.append({"est": est.overall, "truth": truth[i], "se": est.se,
                             "tokens": float(cost[test.asked].sum()), "samples": float(len(test.asked))})
            rows.append({**summarise(f"{name}, target SE {target}", runs), "target_se": target})
    rng = np.random.default_rng(0)
    which = dataset_index()
    for per in (1, 2, 4, 8) if not args.quick else (2,):
        runs = []
        for i in test_rows:
            items = np.concatenate([rng.choice(np.where(which == k)[0], per, replace=False)
                                    for k in range(len(DATASET_NAMES))])
            runs.append(fixed(items, i, residuals))
        rows.append(summarise(f"random stratified {per}/dataset, MAP + residuals", runs))
    full = float(cost.sum())
    print(f"{len(test_rows)} held-out models; full LongBench ≈ {full / 1e6:.1f}M tokens per model; "
          f"{time.time() - t0:.0f}s")
    print("| method | samples | tokens (M) | % of full | MAE | max err | mean SE | 95% coverage | rms z |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['samples']:.0f} | {r['tokens'] / 1e6:.2f} | {100 * r['tokens'] / full:.1f} | "
              f"{r['mae']:.4f} | {r['max_err']:.4f} | {r['mean_se']:.4f} | {r['coverage95']:.2f} | {r['rms_z']:.2f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
