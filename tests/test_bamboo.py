"""BAMBOO loader, report and CLI on the release's data (../shared/data/bamboo)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from asyncbench.benchmarks.bamboo.benchmark import BambooBenchmark, parse_line, read_jsonl, select
from asyncbench.benchmarks.base import LoadOptions
from asyncbench.cli import main as cli
from asyncbench.errors import UserError
from asyncbench.types import UNSET, SampleResult, SampleStatus

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
BAMBOO = DATA / "bamboo"
pytestmark = pytest.mark.skipif(not BAMBOO.is_dir(), reason="reference data ../shared/data/bamboo not available")


def load(**extra) -> tuple[BambooBenchmark, list]:
    tasks = extra.pop("tasks", None)
    bench = BambooBenchmark()
    return bench, bench.load(LoadOptions(data_dir=DATA, tasks=tasks, extra=extra))


def test_release_defects_are_reported_by_file_and_line():
    rows, bad = read_jsonl(BAMBOO / "paperqa_4k.jsonl")
    assert len(rows) == 100 and bad == []  # the two control-character rows are read leniently
    assert {n for n, _ in rows} >= {53, 54}
    rows, bad = read_jsonl(BAMBOO / "paperqa_16k.jsonl")
    assert len(rows) == 99 and [(b.file, b.line) for b in bad] == [("paperqa_16k.jsonl", 26)]
    with pytest.raises(UserError, match=r"--strict-data.*paperqa_16k.jsonl line 26"):
        load(tasks=["paperqa@16k"], strict_data=True)
    bench, samples = load(tasks=["paperqa@16k"])
    assert len(samples) == 99 and "paperqa_16k/26" not in {s.id for s in samples}
    _, report = anyio.run(bench.prepare, samples, None)
    assert report["skipped_rows"] == [{"file": "paperqa_16k.jsonl", "line": 26, "error": report["skipped_rows"][0]["error"]}]


def test_parse_line_fallbacks():
    assert parse_line('{"a": "x\ty"}') == {"a": "x\ty"}  # raw tab: non-strict JSON
    assert parse_line("{a: 1, 'b': [1, 2,],}") == {"a": 1, "b": [1, 2]}  # json5
    with pytest.raises(ValueError):
        parse_line('{"a": "say "hi" now"}')


def test_selection_and_counts():
    _, samples = load()
    counts: dict[str, int] = {}
    for s in samples:
        counts[s.task] = counts.get(s.task, 0) + 1
    assert counts == {
        "altqa_4k": 200, "paperqa_4k": 100, "meetingqa_4k": 100, "senhallu_4k": 200, "abshallu_4k": 200,
        "showssort_4k": 200, "reportsumsort_4k": 150, "showspred_4k": 100, "meetingpred_4k": 100,
        "private_eval_4k": 152, "paperqa_16k": 99, "showssort_16k": 100, "showspred_16k": 100, "private_eval_16k": 152,
    }
    assert sorted(samples.notes["missing"]) == sorted(f"{d}_16k" for d in ("altqa", "meetingqa", "senhallu", "abshallu", "reportsumsort", "meetingpred"))
    assert len({s.id for s in samples}) == len(samples)
    assert all(s.max_tokens == 32 for s in samples)
    assert select(["paperqa@16k", "altqa"], "4k") == [("paperqa", "16k", True), ("altqa", "4k", False)]
    with pytest.raises(UserError, match="unknown BAMBOO dataset 'nope'"):
        load(tasks=["nope"])
    with pytest.raises(UserError, match="altqa_16k.jsonl is missing"):
        load(tasks=["altqa@16k"])
    with pytest.raises(UserError, match="--length"):
        load(length="8k")


def test_prompts_follow_the_release_generation_script():
    prompts = json.loads((BAMBOO / "prompt.json").read_text())
    _, samples = load(tasks=["showssort@4k", "reportsumsort", "paperqa@4k", "senhallu", "private_eval@4k"], length="4k")
    first = {s.task: s for s in reversed(samples)}
    row = json.loads((BAMBOO / "showssort_4k.jsonl").open().readline())
    assert first["showssort_4k"].prompt == prompts["showssort"]["final_answer"].format(
        content="\n".join(f"[{i}] ```{p}```" for i, p in enumerate(row["content"])))
    assert "Events: [1] ```" in first["reportsumsort_4k"].prompt and "[0] ```" not in first["reportsumsort_4k"].prompt
    assert "Options: A. Making V&L model pre-trained.\tB. Supplementing" in first["paperqa_4k"].prompt
    assert first["paperqa_4k"].answers == ["B"]
    assert first["senhallu_4k"].prompt.startswith("You are given an NLP paper and a hypothesis.")
    pe = first["private_eval_4k"]
    assert "import beatnum as bn" in pe.prompt and pe.meta["problem"]["task_id"] == pe.meta["task_id"]
    assert "import numpy as np" in pe.meta["problem"]["prompt"]  # the release executes the original problem


def test_score_and_aggregate_with_gold_and_malformed_answers():
    bench, samples = load(tasks=["paperqa@4k", "senhallu", "showssort"], length="both")
    preds = []
    for i, s in enumerate(samples):
        gold = s.meta["answer"]
        if s.task.startswith("paperqa"):
            preds.append(f"{gold}." if i % 2 else "I think")
        elif s.task.startswith("senhallu"):
            preds.append("Yes." if gold else "No.")
        else:
            preds.append(" > ".join(f"[{x}]" for x in gold) if i % 4 else "[0] > [1]")
    scores = anyio.run(bench.score, samples, preds, None)
    assert all(sc.parsed is not UNSET and sc.error is None for sc in scores)  # what each metric read
    assert not any("parsed" in s.meta for s in samples)  # the samples are read, never written
    results = [SampleResult(sample_id=s.id, task=s.task, status=SampleStatus.ANSWERED, prediction=p, score=sc.value,
                            meta=s.meta) for s, p, sc in zip(samples, preds, scores)]
    rep = bench.aggregate(results).to_json()
    n_odd = sum(1 for i, s in enumerate(samples) if s.task == "paperqa_4k" and i % 2)
    assert rep["by_task"]["paperqa_4k"] == round(100 * n_odd / 100, 2)
    assert rep["format_errors"]["paperqa_4k"] == 100 - n_odd
    assert rep["detail"]["senhallu_4k"] == {"score": 100.0, "precision": 100.0, "recall": 100.0, "f1": 100.0, "n": 200, "format_errors": 0}
    bad_sort = {t: sum(1 for i, s in enumerate(samples) if s.task == t and i % 4 == 0) for t in ("showssort_4k", "showssort_16k")}
    for t, n_bad in bad_sort.items():
        total = 200 if t.endswith("4k") else 100
        assert rep["format_errors"][t] == n_bad
        assert rep["by_task"][t] == pytest.approx(100 * (total - n_bad) / total, abs=0.01)
    assert rep["by_length"]["16k"] == pytest.approx(rep["by_task"]["showssort_16k"], abs=0.01)
    assert rep["diff_16k_minus_4k"]["datasets"] == {"showssort": round(rep["by_task"]["showssort_16k"] - rep["by_task"]["showssort_4k"], 2)}
    assert set(rep["by_task"]) == {"paperqa_4k", "senhallu_4k", "showssort_4k", "showssort_16k"}


def _write(tmp_path: Path, lines: list) -> Path:
    path = tmp_path / "preds.jsonl"
    path.write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n")
    return path


def test_score_cli(tmp_path, capsys):
    path = _write(tmp_path, [
        {"dataset": "showssort_4k", "pred": [4, 1, 3, 2, 0], "answer": [4, 1, 3, 2, 0]},
        {"dataset": "showssort_16k", "pred": "[1] > [4] > [3] > [2] > [0]", "answer": [4, 1, 3, 2, 0]},
        {"dataset": "abshallu_4k", "pred": "Yes.", "answer": "True"},
        {"dataset": "abshallu_4k", "pred": "Perhaps", "answer": False},
        {"dataset": "altqa_4k", "pred": "1964.", "answer": "1964"},
    ])
    assert cli(["score", "bamboo", "--predictions", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["by_task"] == {"altqa_4k": 100.0, "abshallu_4k": 100.0, "showssort_4k": 100.0, "showssort_16k": 90.0}
    assert rep["format_errors"]["abshallu_4k"] == 1
    assert rep["diff_16k_minus_4k"]["average"] == -10.0
    assert cli(["score", "bamboo", "--predictions", str(path)]) == 0
    table = capsys.readouterr().out
    assert "showssort" in table and "16k - 4k: -10.00" in table


@pytest.mark.parametrize("line,message", [
    ("{not json", "preds.jsonl:1: not valid JSON"),
    ({"dataset": "paperqa_8k", "pred": "A", "answer": "A"}, "unknown dataset 'paperqa_8k'"),
    ({"dataset": "paperqa_4k", "pred": "A"}, "missing field 'answer'"),
    ({"dataset": "private_eval_4k", "pred": "x"}, "task_id"),
    ({"dataset": "showssort_4k", "pred": "[0]", "answer": "first"}, "list of indices"),
    ({"dataset": "senhallu_4k", "pred": "Yes", "answer": "maybe"}, "true/false"),
])
def test_score_cli_user_errors(tmp_path, capsys, line, message):
    path = _write(tmp_path, [line])
    assert cli(["score", "bamboo", "--predictions", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_run_against_simulator_reports_both_levels(tmp_path):
    summary_path = tmp_path / "out"
    rc = cli(["run", "bamboo", "--model", "sim", "--data-dir", str(DATA), "--length", "both",
              "--cache", str(tmp_path / "cache.duckdb"), "--out", str(summary_path), "--no-progress", "--json"])
    run = json.loads(next(summary_path.rglob("run.json")).read_text())
    # the release's one malformed row is excluded with its reason: 1953 scored, complete, exit 0
    assert rc == 0 and run["complete"] and run["partial"] is None and run["failures"] == []
    assert run["samples"]["excluded"] == 1 and run["samples"]["settled"] - run["samples"]["excluded"] == 1953
    assert run["excluded"]["samples"][0]["sample_id"] == "paperqa_16k/26"
    scores = run["scores"]
    assert set(scores["by_task"]) == {f"{d}_4k" for d in ("altqa", "paperqa", "meetingqa", "senhallu", "abshallu", "showssort",
                                                          "reportsumsort", "showspred", "meetingpred", "private_eval")} | {
        "paperqa_16k", "showssort_16k", "showspred_16k", "private_eval_16k"}
    assert set(scores["by_length"]) == {"4k", "16k"}
    assert set(scores["diff_16k_minus_4k"]["datasets"]) == {"paperqa", "showssort", "showspred", "private_eval"}
    assert run["prepare"]["skipped_rows"][0]["line"] == 26
    # PrivateEval ran in the release-era environment at the release's limit, and says so
    sandbox = run["prepare"]["sandbox"]
    assert sandbox["interpreter"].startswith("release environment (numpy==1.23.5") and sandbox["cpu_s"] == 3.0
    assert all(0.0 <= v <= 100.0 for v in scores["by_task"].values())
