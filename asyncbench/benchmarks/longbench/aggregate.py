"""LongBench / LongBench-E / MiniLongBench aggregation, as the papers report it.

- Per dataset: 100 x mean per-sample score (eval.py's `round(100 * mean, 2)`).
- Per category: mean of its datasets' scores (the "Avg" columns of LongBench Tables 2-3).
- Overall: macro-average over the six categories (LongBench Table 3, MiniLongBench Tables
  5 and 8): "EN" averages, per category, only its English datasets, "ZH" only its Chinese
  ones, and "All" all of them; the code datasets (lcc, repobench-p) count as both English
  and Chinese. E.g. GPT-3.5-Turbo-16k: 44.0 / 44.5 / 44.7 (EN / ZH / All).
- LongBench-E: the same per length bin (eval.py's `scorer_e`: length < 4000 -> "0-4k",
  < 8000 -> "4-8k", else "8k+"); its datasets are named `<dataset>_e`. The bin "Avg" of
  LongBench Table 9 is the category macro-average of the 13 English datasets.
- MiniLongBench scored directly (its Tables 7-8) uses the same aggregation.

Averages are taken over unrounded dataset means; only the returned numbers are rounded to
2 decimals, so an average may differ by up to 0.005 from one of rounded numbers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from .score import base_dataset
from .table import CATEGORIES, CATEGORY_OF, CODE_DATASETS, ZH_DATASETS

if TYPE_CHECKING:  # numpy stays out of `asyncbench --help`
    from ...estimators.intervals import Plan, Tree

LENGTH_BINS = ("0-4k", "4-8k", "8k+")

# A scored sample: (dataset name, score in [0, 1]), or with its context length (None: none)
Row = tuple[str, float] | tuple[str, float, float | None]


class Summary(TypedDict):
    """LongBench's numbers (x100, 2 decimals): Overall by language, categories, datasets."""

    overall: dict[str, float | None]  # "en", "zh", "all"; None: no dataset of that language but code
    by_category: dict[str, float]
    by_task: dict[str, float]


class Aggregate(Summary):
    """`aggregate_longbench`'s result: the summary, and one per length bin when rows carry lengths."""

    by_length: NotRequired[dict[str, Summary]]


def length_bin(length: float) -> str:
    """eval.py's LongBench-E bin of a context length (words for English and code)."""
    if length < 4000:
        return "0-4k"
    if length < 8000:
        return "4-8k"
    return "8k+"


def _languages(dataset: str) -> tuple[str, ...]:
    if dataset in CODE_DATASETS:
        return ("en", "zh")
    return ("zh",) if dataset in ZH_DATASETS else ("en",)


def _mean(values: Sequence[Any]) -> Any:
    """The mean of numbers, or leaf by leaf of equal-length arrays (bootstrap resamples)."""
    return sum(values) / len(values)


def macro_average(task_mean: Mapping[str, object]) -> dict[str, Any]:
    """overall {en, zh, all} / by_category / by_task from per-dataset means x100, unrounded.
    The means may be numbers or arrays of bootstrap resamples (estimators.intervals): the
    intervals are then made by this very code, so they average exactly as the scores do."""
    # category -> language ("en", "zh", "all") -> dataset means
    buckets: dict[str, dict[str, list[object]]] = defaultdict(lambda: defaultdict(list))
    for name, value in task_mean.items():
        base = base_dataset(name)
        cat = buckets[CATEGORY_OF[base]]
        cat["all"].append(value)
        for lang in _languages(base):
            cat[lang].append(value)

    ordered = [c for c in CATEGORIES if c in buckets]
    bases = {base_dataset(name) for name in task_mean}
    overall = {}
    for lang in ("en", "zh", "all"):
        cats = [_mean(buckets[c][lang]) for c in ordered if buckets[c][lang]]
        # Code alone does not make a language score (LongBench-E has no ZH number).
        present = lang == "all" or any(_languages(b) == (lang,) for b in bases)
        overall[lang] = _mean(cats) if cats and present else None
    return {
        "overall": overall,
        "by_category": {c: _mean(buckets[c]["all"]) for c in ordered},
        "by_task": {name: task_mean[name] for name in _task_order(task_mean)},
    }


def _summarise(rows: list[tuple[str, float]]) -> Summary:
    """overall / by_category / by_task of (dataset name, score in [0, 1]) rows."""
    per_task: dict[str, list[float]] = defaultdict(list)
    for name, score in rows:
        per_task[name].append(score)
    avg = macro_average({name: 100 * _mean(s) for name, s in per_task.items()})
    return {
        "overall": {lang: None if v is None else round(v, 2) for lang, v in avg["overall"].items()},
        "by_category": {c: round(v, 2) for c, v in avg["by_category"].items()},
        "by_task": {name: round(v, 2) for name, v in avg["by_task"].items()},
    }


def _task_order(names: Iterable[str]) -> list[str]:
    """Datasets in LongBench's table order (category, then position), `_e` after plain."""
    rank = {d: i for i, d in enumerate(CATEGORY_OF)}
    return sorted(names, key=lambda n: (rank[base_dataset(n)], n))


def aggregate_longbench(rows: Iterable[Row]) -> Aggregate:
    """Aggregate per-sample rows `(dataset, score)` or `(dataset, score, length)`.

    Scores are in [0, 1]; returned numbers are x100, rounded to 2 decimals. Returns
    `{"overall": {"en", "zh", "all"}, "by_category": {...}, "by_task": {...}}` plus
    `"by_length": {bin: <same three keys>}` when any row carries a length (rows without
    one are left out of the bins). An overall entry is None when no dataset of that
    language other than code is present (e.g. "zh" for LongBench-E).
    """
    scored: list[tuple[str, float]] = []
    binned: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for row in rows:
        name, score = row[0], float(row[1])
        base_dataset(name)  # unknown names fail here, with the list of known ones
        scored.append((name, score))
        length = row[2] if len(row) > 2 else None
        if length is not None:
            binned[length_bin(length)].append((name, score))
    if not scored:
        raise ValueError("no rows to aggregate")
    summary = _summarise(scored)
    result: Aggregate = {"overall": summary["overall"], "by_category": summary["by_category"], "by_task": summary["by_task"]}
    if binned:
        result["by_length"] = {b: _summarise(binned[b]) for b in LENGTH_BINS if b in binned}
    return result


def resampling_plan(rows: Iterable[tuple[str, float]]) -> Plan:
    """The bootstrap plan of `aggregate_longbench` over `(dataset, score)` rows: each
    dataset a stratum of independent samples (LongBench samples have their own contexts),
    combined by `macro_average` into the keys a run's scores use."""
    from ...estimators.intervals import Plan, mean_stratum

    per_task: dict[str, list[float]] = defaultdict(list)
    for name, score in rows:
        per_task[name].append(score)
    return Plan({name: mean_stratum(s) for name, s in per_task.items()}, _scores_tree)


def _scores_tree(task_mean: Mapping[str, object]) -> Tree:
    avg = macro_average(task_mean)
    return {"overall": avg["overall"]["all"], "overall_en": avg["overall"]["en"], "overall_zh": avg["overall"]["zh"],
            "by_category": avg["by_category"], "by_task": avg["by_task"]}
