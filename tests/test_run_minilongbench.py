"""End to end: `asyncbench run minilongbench` against the simulator, then again from cache."""

from __future__ import annotations

import io
import json
import random

import pytest
from rich.console import Console

from asyncbench.api import load_run
from asyncbench.cli import main as cli_main
from asyncbench.estimators.methods import DEFAULT_METHOD
from asyncbench.report.summary import print_summary
from asyncbench.run_summary import RunSummary

CATEGORIES = {"Single-Doc QA", "Multi-Doc QA", "Summarization", "Few-shot Learning", "Synthetic", "Code"}


@pytest.mark.slow
def test_minilongbench_end_to_end_and_rerun_from_cache(tmp_path, start_sim, shared_data, capsys):
    sim = start_sim()
    args = ["run", "minilongbench", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
            "--data-dir", str(shared_data), "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"),
            "--max-input-tokens", "6000", "--no-progress"]
    assert cli_main(args) == 0
    first = json.loads((tmp_path / "o" / "run.json").read_text())
    assert first["samples"]["total"] == 237 and first["samples"]["answered"] == 237
    assert first["this_invocation"]["requests"] == 237 and first["complete"]
    scores = first["scores"]
    assert len(scores["by_task"]) == 21 and set(scores["by_category"]) == CATEGORIES
    for key in ("anchor_average", "anchor_average_en", "anchor_average_zh"):
        assert 0 < scores[key] < 100
    assert "overall_en" not in scores and "overall_zh" not in scores
    # the anchors' plain mean: macro over the six categories (each rounded to 2 decimals, as LongBench does)
    assert abs(scores["anchor_average"] - sum(scores["by_category"].values()) / 6) < 0.01
    trunc = first["truncation"]
    assert trunc["n_truncated"] > 50 and trunc["tokens_removed"] > 0 and trunc["max_input_tokens"] == 6000
    assert scores["truncated"]["n"] == trunc["n_truncated"]
    # the run ends with the estimate of the full LongBench score and what the anchors saved
    est = scores["estimate"]
    assert est["available"] and est["method"] == DEFAULT_METHOD and 0 < est["overall"] < 1
    low, high = est["overall_ci90"]  # the shipped parameters' calibrated interval, 0-1 like overall
    assert low < est["overall"] < high
    assert abs(est["direct"]["overall"] - est["irt"]["overall"]) < 0.1
    assert 0.9 < est["token_cost"]["saved_fraction"] < 1
    # one overall: the headline estimate (x100), never the anchors' mean, in run.json, the API and `cache runs`
    assert scores["overall"] == round(100 * est["overall"], 2) != scores["anchor_average"]
    assert load_run(first["run_id"], tmp_path / "c.duckdb").scores["overall"] == scores["overall"]
    summary = io.StringIO()  # the terminal says the same, within 80 columns
    print_summary(RunSummary.from_json(first), Console(file=summary, width=80, no_color=True))
    text = " ".join(summary.getvalue().split())
    assert f"overall (estimated full LongBench, {DEFAULT_METHOD}): {scores['overall']:.2f}" in text
    assert f"anchor average │ {scores['anchor_average']:.2f} ±" in text
    assert max(len(line) for line in summary.getvalue().splitlines()) <= 80
    capsys.readouterr()
    assert cli_main(["cache", "runs", "--cache", str(tmp_path / "c.duckdb")]) == 0
    assert f"overall={scores['overall']:.2f}" in capsys.readouterr().out
    assert est["token_cost"]["anchor_prompt_tokens"] == first["tokens"]["eval"]["prompt_tokens"]

    # `estimate minilongbench` gives the same headline from the run's `samples` export, whatever its row order
    export = tmp_path / "samples.jsonl"
    assert cli_main(["samples", first["run_id"], "--cache", str(tmp_path / "c.duckdb"), "--out", str(export)]) == 0
    rows = export.read_text().splitlines()
    random.Random(0).shuffle(rows)
    export.write_text("\n".join(rows) + "\n")
    capsys.readouterr()
    assert cli_main(["estimate", "minilongbench", "--anchor-scores", str(export), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"] == pytest.approx(est["overall"], abs=1e-9)

    before = sim.stats()["requests"]
    assert cli_main(args) == 0
    second = json.loads((tmp_path / "o" / "run.json").read_text())
    assert sim.stats()["requests"] == before
    assert second["this_invocation"]["requests"] == 0 and second["samples"] == first["samples"]
    assert second["scores"]["by_task"] == scores["by_task"]
