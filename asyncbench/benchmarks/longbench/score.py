"""LongBench per-sample scoring as eval.py does it: a dataset's metric (from the dataset
table) over every reference, the best one counted, with the first-line cut for the
few-shot datasets; and the same over many predictions on a process pool or Ray tasks."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ...errors import UserError
from ...metrics.registry import score
from .metrics import _jieba, _paragraph_id
from .table import DATASET_METRIC, FIRST_LINE_DATASETS, LONGBENCH_E_DATASETS, first_line


def base_dataset(name: str) -> str:
    """The LongBench dataset whose metric scores `name` (`qasper_e` -> `qasper`).

    Raises UserError for names that are neither a LongBench dataset nor a LongBench-E one.
    """
    if name in DATASET_METRIC:
        return name
    if name.endswith("_e") and name[:-2] in LONGBENCH_E_DATASETS:
        return name[:-2]
    known = ", ".join(sorted(DATASET_METRIC))
    raise UserError(
        f"unknown LongBench dataset {name!r}; use one of {known} "
        "(or <dataset>_e for the 13 English LongBench-E datasets)"
    )


def check_sample(dataset: str, answers: Sequence[str], all_classes: Sequence[str] | None) -> str:
    """Validate one sample's fields for its metric; returns the base dataset name.

    Raises UserError (unknown dataset) or ValueError (fields the metric cannot use: the
    official scorer would crash or silently score 0 on them).
    """
    base = base_dataset(dataset)
    if not isinstance(answers, (list, tuple)) or not all(isinstance(a, str) for a in answers):
        raise ValueError("'answers' must be a list of strings")
    if not answers:
        raise ValueError("'answers' is empty; give at least one reference answer")
    metric = DATASET_METRIC[base]
    if metric == "classification" and (
        not isinstance(all_classes, (list, tuple)) or not all(isinstance(c, str) for c in all_classes)
    ):
        raise ValueError(f"{base} needs 'all_classes', the list of class names")
    if metric in ("retrieval", "retrieval_zh"):
        pattern = r"Paragraph (\d+)" if metric == "retrieval" else r"段落(\d+)"
        for answer in answers:
            _paragraph_id(answer, pattern)
    return base


def score_one(
    dataset: str,
    pred: str,
    answers: Sequence[str],
    all_classes: Sequence[str] | None = None,
    *,
    first_line_post: bool = True,
) -> float:
    """The official per-sample score in [0, 1]: max over references of the dataset's metric.

    `first_line_post=False` skips eval.py's first-line cut for trec/triviaqa/samsum/lsht,
    which is how the MiniLongBench release scored its predictions.
    """
    base = base_dataset(dataset)
    if first_line_post and base in FIRST_LINE_DATASETS:
        pred = first_line(pred)
    return float(score(DATASET_METRIC[base], pred, answers, {"all_classes": all_classes}))


_Item = tuple[str, str, Sequence[str], "Sequence[str] | None"]


def _score_chunk(items: list[_Item], first_line_post: bool) -> list[float]:
    return [score_one(d, p, a, c, first_line_post=first_line_post) for d, p, a, c in items]


# Below this many predictions the pool's start-up costs more than it saves (scoring
# averages well under a millisecond per prediction; see bench/scoring.md).
MIN_PARALLEL_ITEMS = 256
# Predictions per Ray task: the cluster's size is not known here, and a few hundred
# predictions (tens of milliseconds) amortise a task's overhead.
RAY_CHUNK_ITEMS = 500


def _pool_context() -> multiprocessing.context.BaseContext:
    """Fork when this process is single-threaded (cheapest: workers inherit jieba's loaded
    dictionary); otherwise forkserver, since forking a process whose other threads may
    hold locks (the run engine's event loop, DuckDB) can deadlock the child."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _init_worker() -> None:
    """Load jieba's dictionary once per worker, not once per chunk."""
    _jieba().initialize()


def score_many(
    datasets: Sequence[str],
    preds: Sequence[str],
    answers: Sequence[Sequence[str]],
    all_classes: Sequence[Sequence[str] | None] | None = None,
    jobs: int | None = None,
    *,
    first_line_post: bool = True,
    map_chunks: Callable[[Callable[..., Any], list[tuple[Any, ...]]], list[Any]] | None = None,
) -> list[float]:
    """`score_one` for every prediction, in input order, over `jobs` processes
    (default: all cores; 1 scores in this process), or over other machines' cores when
    `map_chunks` is given (the Ray backend: one task per chunk).

    Items are dealt round-robin into a few chunks per worker so that expensive summaries
    (ROUGE) spread evenly instead of landing in one chunk.
    """
    n = len(preds)
    if not (len(datasets) == len(answers) == n) or (all_classes is not None and len(all_classes) != n):
        raise ValueError("datasets, preds, answers and all_classes must have the same length")
    for name in set(datasets):
        base_dataset(name)
    classes = list(all_classes) if all_classes is not None else [None] * n
    items: list[_Item] = list(zip(datasets, preds, answers, classes))
    jobs = (os.cpu_count() or 1) if jobs is None else max(1, jobs)
    if n < MIN_PARALLEL_ITEMS or (jobs == 1 and map_chunks is None):
        return _score_chunk(items, first_line_post)
    n_chunks = min(n, max(jobs * 4, n // RAY_CHUNK_ITEMS) if map_chunks else jobs * 4)
    chunks = [items[k::n_chunks] for k in range(n_chunks)]
    if map_chunks is not None:
        results = map_chunks(_score_chunk, [(chunk, first_line_post) for chunk in chunks])
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=_pool_context(), initializer=_init_worker) as pool:
            results = list(pool.map(_score_chunk, chunks, [first_line_post] * n_chunks))
    scores = [0.0] * n
    for k, chunk_scores in enumerate(results):
        scores[k::n_chunks] = chunk_scores
    return scores
