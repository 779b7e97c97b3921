"""Benchmark: LongBench scoring, our parallel scorer vs the official metrics one by one.

Generates N predictions (default 5,000) deterministically from the MiniLongBench release
(../shared/data/minilongbench/samples): every sample's real prediction, its gold answer,
noisy variants, and for the six ROUGE datasets long summaries of ~300-500 words (Chinese:
500-800 characters) built from gold and predicted sentences. Then scores them

  1. with the official metrics re-stated in tests/test_longbench_metrics.py (rouge 1.0.1,
     jieba, fuzzywuzzy + python-Levenshtein), one by one in this process, as eval.py does;
  2. with `asyncbench.benchmarks.longbench.metrics.score_many(jobs=1)` (algorithmic speed-up only);
  3. with `score_many(jobs=N)` (process pool; includes pool start-up).

and checks all three give identical scores. jieba's dictionary is loaded before timing
(both scorers need it; forked workers inherit it).

    .venv/bin/python bench/scoring.py [--n 5000] [--jobs 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_longbench_metrics as official  # noqa: E402  (the re-stated official scorer)

from asyncbench.benchmarks.longbench.score import score_many  # noqa: E402
from asyncbench.benchmarks.longbench.table import DATASET_METRIC  # noqa: E402

ROUGE_DATASETS = {d for d, m in DATASET_METRIC.items() if m.startswith("rouge")}
ZH_ROUGE = {d for d, m in DATASET_METRIC.items() if m == "rouge_zh"}

Item = tuple[str, str, list[str], "list[str] | None"]


def _noisy(text: str, rng: random.Random) -> str:
    """Case flips, extra punctuation and articles: what answer normalisation must absorb."""
    chars = [c.upper() if rng.random() < 0.2 else c for c in text]
    return "The answer is: " + "".join(chars) + rng.choice(["!", " ...", ".", ", the end."])


def _sentences(text: str, zh: bool) -> list[str]:
    import re

    parts = re.split(r"(?<=[。！？])" if zh else r"(?<=[.!?])\s+", text)
    return [p.strip() for p in parts if p.strip()]


def _long_summary(pred: str, gold: str, zh: bool, rng: random.Random) -> str:
    """A ~300-500 word summary (Chinese: 500-800 characters) mixing gold and predicted
    sentences, shuffled, with some words dropped, as a chatty model would write."""
    pool = _sentences(gold, zh) + _sentences(pred, zh)
    target = rng.randint(500, 800) if zh else rng.randint(300, 500)
    out: list[str] = []
    size = 0
    while size < target:
        sentence = rng.choice(pool)
        if not zh:
            words = [w for w in sentence.split() if rng.random() > 0.1]
            sentence = " ".join(words)
        out.append(sentence)
        size += len(sentence) if zh else len(sentence.split())
    return ("" if zh else " ").join(out)


def make_predictions(n: int, seed: int) -> list[Item]:
    """N (dataset, prediction, answers, all_classes), cycling through all 237 samples so the
    dataset mix follows MiniLongBench, with a seeded perturbation per item."""
    samples = official.load_samples()
    flat = [(ds, *row) for ds in official.RELEASE_ORDER for row in samples[ds]]
    rng = random.Random(seed)
    items: list[Item] = []
    for k in range(n):
        ds, pred, answers, classes = flat[k % len(flat)]
        gold = answers[0]
        if ds in ROUGE_DATASETS and rng.random() < 0.6:
            text = _long_summary(pred, gold, ds in ZH_ROUGE, rng)
        else:
            kind = rng.randrange(7)
            words = pred.split()
            rng.shuffle(words)
            text = [
                pred,
                gold,
                _noisy(gold, rng),
                pred[: rng.randint(0, len(pred))],
                " ".join(words),
                "\n\n" + gold + "\nQuestion: and then?",
                rng.choice(["", "   ", "\n"]),
            ][kind]
        items.append((ds, text, answers, classes))
    return items


def _cpu() -> float:
    """CPU seconds of this process and its (reaped) children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def reference_scores(items: list[Item]) -> list[float]:
    """eval.py's loop with the official metrics; this frame plays eval.py's module level
    (see official_score in the tests for the recursion-limit calibration)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(old + 998 - official._frames_left())
    try:
        scores = []
        for ds, pred, answers, classes in items:  # no comprehension: it would add a frame
            scores.append(official._official_sample(ds, pred, answers, classes, True))
        return scores
    finally:
        sys.setrecursionlimit(old)


def timed(fn, *args, **kwargs):
    wall, cpu = time.perf_counter(), _cpu()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - wall, _cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    items = make_predictions(args.n, args.seed)
    official.jieba.initialize()
    columns = list(zip(*items))
    words = [len(p.split()) for ds, p, _, _ in items if ds in ROUGE_DATASETS - ZH_ROUGE]
    print(f"{len(items)} predictions, {len({i[0] for i in items})} datasets, "
          f"{sum(i[0] in ROUGE_DATASETS for i in items)} ROUGE-scored "
          f"(English ones: median {sorted(words)[len(words) // 2]} words, max {max(words)}); "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")

    ref, ref_wall, ref_cpu = timed(reference_scores, items)
    one, one_wall, one_cpu = timed(score_many, *columns, jobs=1)
    par, par_wall, par_cpu = timed(score_many, *columns, jobs=args.jobs)

    assert one == par, "parallel and serial scores differ"
    worst = max(abs(a - b) for a, b in zip(ref, par))
    identical = sum(a == b for a, b in zip(ref, par))
    print(f"identical scores: {identical}/{len(ref)} (max |diff| {worst:.3g})")
    assert worst < 1e-9, "scores differ from the official scorer"

    print("| scorer | wall s | CPU s | speed-up (wall) |")
    print("|---|---:|---:|---:|")
    print(f"| official metrics, one by one, 1 process | {ref_wall:.2f} | {ref_cpu:.2f} | 1.0x |")
    print(f"| asyncbench score_many, jobs=1 | {one_wall:.2f} | {one_cpu:.2f} | {ref_wall / one_wall:.1f}x |")
    print(f"| asyncbench score_many, jobs={args.jobs} | {par_wall:.2f} | {par_cpu:.2f} | "
          f"{ref_wall / par_wall:.1f}x |")


if __name__ == "__main__":
    main()
