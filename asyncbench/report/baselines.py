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
from typing import Any

from ..benchmarks import score_type


@dataclass
class Reference:
    name: str
    source: str
    scores: dict[str, Any]  # same keys as a run's summary["scores"]
    task_order: list[str] = field(default_factory=list)  # the table's task order, incl. per-length-only tasks


@lru_cache(maxsize=1)
def published() -> dict[str, Any]:
    text = resources.files("asyncbench").joinpath("data/published_baselines.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
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
