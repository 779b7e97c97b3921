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


def _as_scores(entry: dict[str, Any]) -> dict[str, Any]:
    scores: dict[str, Any] = {k: entry[k] for k in ("overall", "overall_en", "overall_zh", "by_category", "by_task", "by_length")
              if k in entry}
    ls = {k: entry[k] for k in ("base_ability", "avg_score", "avg_lc") if k in entry}
    if ls:
        scores["longscore"] = ls
    return scores


def references_for(benchmark: str) -> list[Reference]:
    """Reference rows for a benchmark (empty for benchmarks without published numbers)."""
    data = published()
    entry = data.get(benchmark_family(benchmark))
    if entry is None:
        return []
    if entry.get("reference"):
        entry = data[entry["reference"]]
    refs = [Reference(m["name"], entry["source"], _as_scores(m), list(m.get("by_task_length", {})))
            for m in entry["models"]]
    for m in entry.get("by_length_models", []):
        refs.append(Reference(f"{m['name']} ({m['source_table']})", entry["source"], _as_scores(m)))
    return refs
