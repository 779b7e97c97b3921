"""Published scores from the benchmarks' papers (asyncbench/data/published_baselines.json),
turned into score dicts shaped like a run's `scores` so they sit in the same leaderboard.

Each benchmark entry names its source (paper and table). MiniLongBench points at
LongBench's rows: it estimates the full LongBench score, and its own tables are not in
the paper text we ship numbers from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import TypedDict

from ..benchmarks import score_type


@dataclass
class Reference:
    name: str
    source: str
    scores: dict[str, object]  # same keys as a run's summary["scores"]
    task_order: list[str] = field(default_factory=list)  # the table's task order, incl. per-length-only tasks


class PaperRow(TypedDict, total=False):
    """One model's row of a paper's table: the keys read here; the scores beside them are
    read by the benchmark's score type (`ScoreSet.published`)."""

    name: str
    source_table: str  # a by-length table's name, for a row of `by_length_models`
    by_task_length: dict[str, object]


class PaperTables(TypedDict, total=False):
    """A benchmark family's entry in data/published_baselines.json: its source and rows,
    or the family whose rows it shares (`reference`)."""

    reference: str
    source: str
    models: list[PaperRow]
    by_length_models: list[PaperRow]


@lru_cache(maxsize=1)
def published() -> dict[str, PaperTables]:
    text = resources.files("asyncbench").joinpath("data/published_baselines.json").read_text(encoding="utf-8")
    data: dict[str, PaperTables] = json.loads(text)
    return data


def benchmark_family(benchmark: str) -> str:
    """`longbench:hotpotqa,qasper` -> `longbench`; `jsonl:PATH` -> `jsonl`."""
    return benchmark.split(":", 1)[0].lower()


def references_for(benchmark: str) -> list[Reference]:
    """Reference rows for a benchmark (empty for benchmarks without published numbers)."""
    data = published()
    entry = data.get(benchmark_family(benchmark))
    if entry is None:
        return []
    if entry.get("reference"):
        entry = data[entry["reference"]]
    kind = score_type(benchmark)  # the benchmark's score type reads the paper's rows
    refs = [Reference(m["name"], entry["source"], kind.published(m), list(m.get("by_task_length", {})))
            for m in entry["models"]]
    for m in entry.get("by_length_models", []):
        refs.append(Reference(f"{m['name']} ({m['source_table']})", entry["source"], kind.published(m)))
    return refs
