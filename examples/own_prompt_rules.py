"""A benchmark of your own, with prompt rules of its own, in one file: it declares them as
one value (`RULES`: a stop sequence for its task, its own post-processing of answers),
registers itself, and runs like the built-in ones.

    .venv/bin/python examples/own_prompt_rules.py

Uses the built-in simulator (no key, no network); the cache goes to
out/own-prompt-rules-example/. tests/test_toy_prompt_rules.py checks the same on the wire.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import asyncbench
from asyncbench.benchmarks import register
from asyncbench.benchmarks.base import Benchmark, LoadOptions, RunContext
from asyncbench.benchmarks.scores import ScoreSet
from asyncbench.estimators.intervals import Plan, Tree, mean_stratum
from asyncbench.prompt_rules import PromptRules
from asyncbench.types import Sample, SampleResult, SampleScore

NOTES = {"paris": "the capital is paris", "rome": "the city is rome"}


def capitals(text: str) -> str:
    """This benchmark compares its answers in capitals."""
    return text.strip().upper()


class Notes(Benchmark):
    """Repeat a note: the answer ends at "###" (a stop sent with every request) and is
    scored in capitals (its own post-processing, done before `score` sees it)."""

    name = "notes"
    RULES: ClassVar[PromptRules] = PromptRules(stops={"notes": ("###",)}, answer=capitals)

    def load(self, opts: LoadOptions) -> list[Sample]:
        return [Sample(id=f"notes/{key}", task="notes", answers=[capitals(note)], max_tokens=64,
                       prompt=f"Repeat the note below.\n\n{note} ### and some noise after it")
                for key, note in NOTES.items()]

    async def score(self, samples: list[Sample], predictions: list[str], ctx: RunContext) -> list[SampleScore]:
        return [SampleScore(float(p in s.answers)) for s, p in zip(samples, predictions)]

    def aggregate(self, results: list[SampleResult], report: dict[str, Any] | None = None) -> ScoreSet:
        scores = [r.score for r in results if r.score is not None]
        return ScoreSet({"overall": 100 * sum(scores) / len(scores) if scores else None})

    def resampling_plan(self, results: list[SampleResult]) -> Plan:
        return Plan({"notes": mean_stratum([r.score for r in results if r.score is not None])}, _overall)


def _overall(by_task: Any) -> Tree:
    return {"overall": by_task["notes"]}


register("notes", Notes)
out = Path("out/own-prompt-rules-example")
result = asyncbench.evaluate("notes", "sim", cache=out / "cache.duckdb", out=out / "run")
for s in result.samples:
    print(f"{s.sample_id}: prediction {s.prediction!r} score {s.score}")
print(f"overall {result.scores['overall']:.0f}")
