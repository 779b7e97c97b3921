"""Issue 37's acceptance: a benchmark with a prompt rule of its own is this one file. The
toy benchmark below declares its rules as one value (a stop sequence and a post-processing
of its own), is registered, and is run end to end against the simulator through a
recording proxy: its requests go out with its stop, the simulator ends its answers there,
and the answers are post-processed before they are scored. Nothing in asyncbench/ names it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from capture import CaptureProxy

from asyncbench.benchmarks import register
from asyncbench.benchmarks.base import Benchmark, LoadOptions, RunContext
from asyncbench.benchmarks.scores import ScoreSet
from asyncbench.config import RunConfig
from asyncbench.estimators.intervals import Plan, Tree, mean_stratum
from asyncbench.prompt_rules import PromptRules
from asyncbench.run.flow import run
from asyncbench.run_summary import RunSummary
from asyncbench.sim.testing import sim_subprocess
from asyncbench.store import Store
from asyncbench.types import Sample, SampleResult, SampleScore

STOP = "###"
# The simulator answers a prompt like these with the text after its instruction (its lead
# baseline, sim/answerer.py): "the capital is paris ### and then some noise".
NOTES = {"paris": "the capital is paris", "rome": "the city is rome"}


def shout(text: str) -> str:
    """The toy's own post-processing: its answers are compared in capitals."""
    return text.strip().upper()


class Toy(Benchmark):
    """Two samples; the answer is the text before the stop, in capitals."""

    name = "toy"
    RULES: ClassVar[PromptRules] = PromptRules(stops={"notes": (STOP,)}, answer=shout)

    def load(self, opts: LoadOptions) -> list[Sample]:
        return [Sample(id=f"notes/{key}", task="notes", answers=[shout(note)], max_tokens=64,
                       prompt=f"Repeat the note below.\n\n{note} {STOP} and then some noise that is no answer")
                for key, note in NOTES.items()]

    async def score(self, samples: list[Sample], predictions: list[str], ctx: RunContext) -> list[SampleScore]:
        return [SampleScore(float(p in s.answers)) for s, p in zip(samples, predictions)]

    def aggregate(self, results: list[SampleResult], report: dict[str, Any] | None = None) -> ScoreSet:
        scores = [r.score for r in results if r.score is not None]
        return ScoreSet({"overall": 100 * sum(scores) / len(scores) if scores else None})

    def resampling_plan(self, results: list[SampleResult]) -> Plan:
        return Plan({"notes": mean_stratum([r.score for r in results if r.score is not None])}, _tree)


def _tree(by_task: Any) -> Tree:
    return {"overall": by_task["notes"]}


@pytest.fixture
def toy() -> Iterator[None]:
    unregister = register("toy", Toy)
    yield
    unregister()


def test_a_benchmark_s_own_prompt_rules_are_applied_end_to_end(toy: None, tmp_path: Path) -> None:
    with sim_subprocess([]) as url, CaptureProxy(url) as proxy:
        cfg = RunConfig.build("toy", "openai-compat:toy-model",
                              {"base_urls": [proxy.url + "/v1"], "cache": str(tmp_path / "cache.duckdb"),
                               "out": str(tmp_path / "out"), "progress": False, "max_attempts": 1,
                               "max_input_tokens": 1000})
        summary = anyio.run(run, cfg)
        sent = [json.loads(body) for _, path, body in proxy.requests if path.endswith("/chat/completions")]
    assert isinstance(summary, RunSummary) and summary.complete
    # the requests went out with the toy's stop, and with nothing else of LongBench's
    assert len(sent) == len(NOTES) and all(body["stop"] == [STOP] for body in sent)
    # the simulator ended the answers at the stop; the stored answer is the server's text
    store = Store(tmp_path / "cache.duckdb")
    with store.session():
        rows = store.runs.results(summary.run_id)
        stored = store.cache.lookup([r.key for r in rows if r.key])
    assert len(rows) == len(NOTES) and len(stored) == len(NOTES)
    assert sorted(r.text for r in stored.values()) == sorted(f"{note} " for note in NOTES.values())
    # the predictions are the post-processed answers and the scores are theirs; the
    # post-processing did not travel in the sample's meta
    assert sorted(r.prediction or "" for r in rows) == sorted(shout(n) for n in NOTES.values())
    assert all(r.score == 1.0 for r in rows) and all(json.loads(r.meta_json or "{}") == {} for r in rows)
    assert summary.to_json()["scores"]["overall"] == 100.0


def test_the_toy_is_known_only_while_registered() -> None:
    from asyncbench.benchmarks import benchmark_classes

    unregister = register("toy", Toy)
    try:
        assert benchmark_classes()["toy"] is Toy
        with pytest.raises(Exception, match="cannot register"):
            register("toy", Toy)
    finally:
        unregister()
    assert "toy" not in benchmark_classes()
