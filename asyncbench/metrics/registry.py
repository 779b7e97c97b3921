"""Every metric by name, for every benchmark and for `jsonl:` data.

A metric is a pure function of (prediction, reference, sample metadata) -> a score in
[0, 1]; `score` takes the best over a sample's references, as the official scorers do.
Names are LongBench's `dataset2metric` keys, the official functions' names (which
`jsonl:` files use), and ours for the simple and rule metrics. Adding a metric is one
function in a metrics module and one line here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..benchmarks.bamboo import metrics as bamboo
from ..benchmarks.longbench import metrics as lb
from ..errors import UserError
from . import simple

# (prediction, reference, sample metadata) -> score; BAMBOO's references are labels,
# booleans or orderings rather than text.
Metric = Callable[[str, Any, Mapping[str, Any]], float]


def _plain(fn: Callable[[str, str], float]) -> Metric:
    return lambda prediction, reference, meta: fn(prediction, reference)


def _classification(prediction: str, reference: str, meta: Mapping[str, Any]) -> float:
    return lb.classification_score(prediction, reference, meta.get("all_classes") or ())


METRICS: dict[str, Metric] = {
    "qa_f1": _plain(lb.qa_f1_score),
    "qa_f1_zh": _plain(lb.qa_f1_zh_score),
    "rouge": _plain(lb.rouge_score),
    "rouge_zh": _plain(lb.rouge_zh_score),
    "classification": _classification,
    "count": _plain(lb.count_score),
    "retrieval": _plain(lb.retrieval_score),
    "retrieval_zh": _plain(lb.retrieval_zh_score),
    "code_sim": _plain(lb.code_sim_score),
    "exact_match": _plain(simple.exact_match),
    "contains": _plain(simple.contains),
    "uuid": _plain(simple.uuid_match),
    "number": _plain(simple.number_match),
}

def _bamboo(dataset: str) -> Metric:
    return lambda prediction, reference, meta: bamboo.judge(dataset, prediction, reference).score


METRICS.update({f"bamboo_{d}": _bamboo(d) for d in bamboo.DATASETS if d != "private_eval"})
# The official scorer's function names, as `jsonl:` files name them.
ALIASES: dict[str, str] = {
    "qa_f1_score": "qa_f1", "qa_f1_zh_score": "qa_f1_zh", "rouge_score": "rouge", "rouge_zh_score": "rouge_zh",
    "classification_score": "classification", "count_score": "count", "retrieval_score": "retrieval",
    "retrieval_zh_score": "retrieval_zh", "code_sim_score": "code_sim",
}


def names() -> tuple[str, ...]:
    return tuple(sorted([*METRICS, *ALIASES]))


def get(name: str) -> Metric:
    """The metric called `name`; one line listing the known names otherwise."""
    metric = METRICS.get(ALIASES.get(name, name))
    if metric is None:
        raise UserError(f"unknown metric {name!r}; use one of {', '.join(names())}")
    return metric


def score(name: str, prediction: str, references: Sequence[Any], meta: Mapping[str, Any] | None = None) -> float:
    """The best score over the references (0.0 without any)."""
    metric = get(name)
    return max((metric(prediction, ref, meta or {}) for ref in references), default=0.0)
