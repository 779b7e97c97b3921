"""Each benchmark's score type: run.json's "scores" read back unchanged, the report's
cells without naming a benchmark, and the terminal summary's benchmark lines exactly as
`print_summary` prints them (the lines `report/score_lines.py` delegates to)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text

from asyncbench.benchmarks import benchmark_classes, score_type
from asyncbench.benchmarks.scores import ScoreSet
from asyncbench.ledger import SAMPLE_STATUSES
from asyncbench.report.model import score_cells
from asyncbench.report.summary import print_summary, readable
from asyncbench.run_summary import RunSummary

MINI_ESTIMATE = {"available": True, "method": "blend", "overall": 0.4123, "overall_ci90": [0.39, 0.43],
                 "irt": {"overall": 0.41}, "direct": {"overall": 0.42},
                 "blend": {"overall": 0.4123, "by_category": {"Code": 0.5}, "by_dataset": {"lcc": 0.5}},
                 "token_cost": {"fraction": 0.05, "saved_prompt_tokens_estimate": 123456}}
ADAPTIVE_ESTIMATE = {"available": True, "method": "adaptive", "overall": 0.3, "ci95": [0.28, 0.32], "se": 0.01,
                     "target_se": 0.01, "samples_used": 40, "tokens": 1234567, "stop_reason": "target"}
CASES: dict[str, dict[str, Any]] = {
    "minilongbench": {"overall": 41.23, "anchor_average": 30.5, "by_task": {"lcc": 50.0},
                      "by_category": {"Code": 50.0}, "estimate": MINI_ESTIMATE},
    "longbench": {"overall": 30.1, "overall_en": 31.0, "by_task": {"qasper": 30.1}, "estimate": ADAPTIVE_ESTIMATE},
    "longbench-e": {"overall": 20.0, "by_length": {"0-4k": {"overall": 21.0}, "4-8k": {"overall": 19.0}},
                    "by_task": {"qasper_e": 20.0}},
    "bamboo": {"overall": 40.0, "by_length": {"4k": 45.0, "16k": 35.0},
               "diff_16k_minus_4k": {"datasets": {"altqa": -10.0}, "average": -10.0},
               "by_task": {"altqa_4k": 45.0, "altqa_16k": 35.0}, "ci95": {"by_length": {"4k": [40.0, 50.0]}}},
    "100-longbench": {"overall": 33.0, "by_length": {"base": 40.0, "2k": 30.0},
                      "longscore": {"base_ability": 40.0, "avg_score": 30.0, "avg_lc": -25.0},
                      "by_task": {"kv_retrieval": 33.0}},
}


def _summary(benchmark: str, scores: dict[str, Any], partial: str | None) -> dict[str, Any]:
    invocation = {"invocation": 1, "requests": 1, "retries": 0, "rate_limited": 0, "wall_s": 1.0, "cost_usd": 0.0,
                  "saved_by_cache_usd": 0.0}
    return {"benchmark": benchmark, "model": "openai:gpt-4o-mini", "run_id": "r1", "scores": scores, "by_task": {},
            "partial": partial, "samples": {"total": 1, **dict.fromkeys(SAMPLE_STATUSES, 0)},
            "cost_usd": {"total": 0.0}, "this_invocation": invocation, "invocations": [invocation],
            "tokens": {"total": {"prompt_tokens": 1, "completion_tokens": 1}}}


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("partial", [None, "partial 1/2"])
@pytest.mark.parametrize("benchmark", sorted(CASES))
def test_summary_lines_are_what_the_terminal_summary_prints(benchmark: str, partial: str | None) -> None:
    scores = CASES[benchmark]
    out = io.StringIO()
    print_summary(RunSummary.from_json(_summary(benchmark, scores, partial)), Console(file=out, width=400, no_color=True))
    printed = _flat(out.getvalue())
    kind = score_type(benchmark)
    lines = kind.from_json(scores).summary_lines(readable, partial)
    assert lines, "every case has benchmark lines"
    for line in lines:
        assert _flat(Text.from_markup(line).plain) in printed
    assert _flat("Scores" + kind.from_json(scores).title_note()) in printed


@pytest.mark.parametrize("benchmark", sorted(CASES))
def test_scores_round_trip_as_the_same_json(benchmark: str) -> None:
    scores = CASES[benchmark]
    assert score_type(benchmark).from_json(scores).to_json() == scores


def test_every_benchmark_declares_a_score_type_and_its_own_cells() -> None:
    for cls in benchmark_classes().values():
        assert issubclass(cls.SCORES, ScoreSet)
    assert score_cells(CASES["bamboo"], kind=score_type("bamboo"))["diff_16k_minus_4k"] == -10.0
    assert score_cells(CASES["100-longbench"], kind=score_type("100-longbench"))["ls:avg_lc"] == -25.0
    assert "diff_16k_minus_4k" not in score_cells(CASES["bamboo"])  # the generic type knows no benchmark's own
    mini = score_type("minilongbench").from_json(CASES["minilongbench"])
    assert mini.cells()["anchor_average"] == 30.5 and "overall" not in mini.cells()
    assert (mini.estimate() or {})["estimate_direct"] == pytest.approx(42.0)


def test_the_report_names_no_benchmark() -> None:
    """report/* asks a benchmark's score type; no string in its code names a benchmark or
    one benchmark's own score kinds (docstrings and comments aside)."""
    import ast
    from pathlib import Path

    import asyncbench.report

    banned = set(benchmark_classes()) | {"anchor_average", "diff_16k_minus_4k", "longscore", "ls:avg_lc", "estimate"}
    found = []
    for name in ("model", "plots", "viewer", "tables", "html", "compare", "baselines"):
        path = Path(asyncbench.report.__file__).parent / f"{name}.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        found += [f"{name}.py:{n.lineno} {n.value!r}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
                  and n.value.lower() in banned]
    assert not found, found


def test_aggregate_returns_the_benchmark_s_own_score_type_with_its_declared_keys() -> None:
    """Each benchmark's `aggregate` gives its `SCORES` object, whose keys are the ones its
    TypedDict declares (the JSON `of` took), and a run summary carries that object: run.json
    is its `to_json()`, read back through the same type."""
    from typing import get_type_hints

    from asyncbench.benchmarks.bamboo.scores import BambooScoresJson
    from asyncbench.benchmarks.longbench.scores import LongBenchScoresJson
    from asyncbench.benchmarks.longbench100.scores import LongBench100ScoresJson
    from asyncbench.benchmarks.scores import TaskScoresJson
    from asyncbench.types import SampleResult, SampleStatus

    declared = {"longbench": LongBenchScoresJson, "longbench-e": LongBenchScoresJson,
                "minilongbench": LongBenchScoresJson, "bamboo": BambooScoresJson,
                "100-longbench": LongBench100ScoresJson, "jsonl": TaskScoresJson}
    results = [SampleResult(sample_id="t/2k/0", task="qasper", status=SampleStatus.ANSWERED, score=0.5,
                            meta={"dataset": "qasper", "length": 3000}),
               SampleResult(sample_id="t/2k/1", task="qasper", status=SampleStatus.FAILED)]
    for name, cls in benchmark_classes().items():
        bench = cls("x.jsonl") if name == "jsonl" else cls.configured({}, None)
        scores = bench.aggregate(results if name != "100-longbench" else
                                 [SampleResult(sample_id=r.sample_id, task=r.task, status=r.status, score=r.score)
                                  for r in results])
        assert type(scores) is cls.SCORES, name
        assert set(scores.data) <= set(get_type_hints(declared[name])), (name, set(scores.data))
        run = RunSummary.from_json({**_summary(name, scores.to_json(), None), "complete": True})
        assert type(run.scores) is cls.SCORES and run.scores == scores, name
        assert run.to_json()["scores"] == scores.to_json()
