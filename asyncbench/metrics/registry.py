"""Every metric by name, for every benchmark and for `jsonl:` data.

A metric is a pure function of (prediction, reference, sample metadata) -> a score in
[0, 1]; `score` takes the best over a sample's references, as the official scorers do.
The generic metrics are registered here; a benchmark package registers its own when it
is imported (`benchmarks/longbench/metrics.py`, `benchmarks/bamboo/metrics.py`; the
benchmark registry imports them), so this module imports no benchmark. Names are
LongBench's `dataset2metric` keys, the official functions' names (which `jsonl:` files
use), and ours for the simple and rule metrics. Adding a metric is one function and one
`register` call next to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ..errors import UserError
from ..types import Parsed
from . import simple

# (prediction, reference, sample metadata) -> score; BAMBOO's references are labels,
# booleans or orderings rather than text, so a metric narrows the reference it reads.
Metric = Callable[[str, object, Mapping[str, object]], float]


class Judged(Protocol):
    """A metric's verdict on one prediction where the report also keeps what it parsed."""

    @property
    def score(self) -> float: ...

    @property
    def parsed(self) -> Parsed: ...


Judge = Callable[[str, object, Mapping[str, object]], Judged]


def plain(fn: Callable[[str, str], float]) -> Metric:
    """A (prediction, reference) function of text as a Metric (metadata unused)."""
    return lambda prediction, reference, meta: fn(prediction, reference if isinstance(reference, str) else str(reference))


METRICS: dict[str, Metric] = {
    "exact_match": plain(simple.exact_match),
    "contains": plain(simple.contains),
    "uuid": plain(simple.uuid_match),
    "number": plain(simple.number_match),
}
JUDGES: dict[str, Judge] = {}
# Other names a metric is known by (the official scorer's function names, as `jsonl:` files name them).
ALIASES: dict[str, str] = {}


def register(name: str, metric: Metric, *aliases: str) -> None:
    """Add a metric (a benchmark package does this for its own, at import)."""
    METRICS[name] = metric
    ALIASES.update(dict.fromkeys(aliases, name))


def register_judge(name: str, judge_fn: Judge) -> None:
    """Add a metric whose verdict also carries what it parsed from the prediction."""
    JUDGES[name] = judge_fn
    register(name, lambda prediction, reference, meta: judge_fn(prediction, reference, meta).score)


def names() -> tuple[str, ...]:
    return tuple(sorted([*METRICS, *ALIASES]))


def get(name: str) -> Metric:
    """The metric called `name`; one line listing the known names otherwise."""
    metric = METRICS.get(ALIASES.get(name, name))
    if metric is None:
        raise UserError(f"unknown metric {name!r}; use one of {', '.join(names())}")
    return metric


def judge(name: str, prediction: str, reference: object, meta: Mapping[str, object] | None = None) -> Judged:
    """The verdict of the judged metric `name` on one prediction against one reference."""
    found = JUDGES.get(ALIASES.get(name, name))
    if found is None:
        raise UserError(f"{name!r} is not a judged metric; use one of {', '.join(sorted(JUDGES))}")
    return found(prediction, reference, meta or {})


def score(name: str, prediction: str, references: Sequence[object], meta: Mapping[str, object] | None = None) -> float:
    """The best score over the references (0.0 without any)."""
    metric = get(name)
    return max((metric(prediction, ref, meta or {}) for ref in references), default=0.0)
