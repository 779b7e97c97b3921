"""End to end: `asyncbench compare` on real runs against the simulator, in a subprocess
(exit codes, output), and intervals in a MiniLongBench run's run.json and summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asyncbench.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(var, None)
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def _write(path: Path, right: bool) -> None:
    """60 look-up questions the simulator answers with the sentence holding the code: the
    gold answer is that code (scores 1), or for run A two in three times a string the
    answer never holds (scores 0). Same ids, tasks and prompts in both files."""
    lines = []
    for i in range(60):
        code = 1000 + 7 * i
        prompt = (f"Context: The weather was mild that day. The secret code of box {i} is {code}. Birds sang.\n"
                  f"Question: What is the secret code of box {i}?\nAnswer:")
        gold = str(code) if right or i % 3 == 0 else "no such answer"
        lines.append(json.dumps({"id": f"q{i}", "task": "lookup" if i % 2 else "recall", "prompt": prompt,
                                 "answers": [gold], "metric": "contains"}))
    path.write_text("\n".join(lines) + "\n")


def _run(tmp_path: Path, benchmark: str, *extra: str) -> str:
    proc = _cli("run", benchmark, "--model", "sim", "--cache", str(tmp_path / "c.duckdb"), "--no-progress", "--json",
                "--out", str(tmp_path / f"out{len(list(tmp_path.glob('out*')))}"), *extra)
    assert proc.returncode == 0, proc.stderr
    run_id: str = json.loads(proc.stdout)["run_id"]
    return run_id


@pytest.mark.slow
def test_compare_cli_sign_equality_and_mismatched_benchmarks(tmp_path: Path, shared_data: Path) -> None:
    _write(tmp_path / "a.jsonl", right=False)
    _write(tmp_path / "b.jsonl", right=True)
    run_a = _run(tmp_path, f"jsonl:{tmp_path / 'a.jsonl'}")
    run_b = _run(tmp_path, f"jsonl:{tmp_path / 'b.jsonl'}")
    again = _run(tmp_path, f"jsonl:{tmp_path / 'a.jsonl'}", "--repeat", "1")  # the same answers, a new run id
    assert len({run_a, run_b, again}) == 3
    cache = str(tmp_path / "c.duckdb")

    proc = _cli("compare", run_a[:6], run_b[:6], "--cache", cache, "--json")  # unique prefixes
    assert proc.returncode == 0, proc.stderr
    lines = {line["key"]: line for line in json.loads(proc.stdout)["lines"]}
    assert set(lines) == {"overall", "by_task/lookup", "by_task/recall"}
    for line in lines.values():  # A scores 1/3, B 1: B - A = +66.67, clearly
        assert abs(line["diff"] - 66.67) < 0.01 and line["ci"][0] > 40 and line["p"] < 0.01
        assert line["distinguishable"]
    text = _cli("compare", run_b, run_a, "--cache", cache)
    assert text.returncode == 0 and "-66.67" in text.stdout and "not distinguishable" not in text.stdout

    same = _cli("compare", run_a, again, "--cache", cache)
    assert same.returncode == 0, same.stderr
    body = [line for line in same.stdout.splitlines() if line.startswith(("overall", "by_task"))]
    assert len(body) == 3
    for line in body:
        assert "B-A   +0.00" in line and "[+0.00, +0.00]" in line and line.endswith("not distinguishable")

    other = _run(tmp_path, "minilongbench:trec", "--data-dir", str(shared_data), "--limit", "3")
    mismatch = _cli("compare", run_a, other, "--cache", cache)
    assert mismatch.returncode == 2
    assert mismatch.stdout == "" and len(mismatch.stderr.strip().splitlines()) == 1
    assert "same benchmark" in mismatch.stderr and "Traceback" not in mismatch.stderr

    # the HTML report of two runs of one benchmark carries their comparison
    html = _cli("report", run_a, run_b, "--cache", cache, "--format", "html")
    assert html.returncode == 0, html.stderr
    assert 'id="compare-jsonl"' in html.stdout and "B - A" in html.stdout


def test_minilongbench_run_shows_intervals(tmp_path: Path, start_sim, shared_data: Path,  # type: ignore[no-untyped-def]
                                           capsys) -> None:
    sim = start_sim()
    out = tmp_path / "o"
    assert cli_main(["run", "minilongbench", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
                     "--data-dir", str(shared_data), "--cache", str(tmp_path / "c.duckdb"), "--out", str(out),
                     "--max-input-tokens", "4000", "--no-progress"]) == 0
    scores = json.loads((out / "run.json").read_text())["scores"]
    ci = scores["ci95"]
    assert set(ci["by_task"]) == set(scores["by_task"]) and set(ci["by_category"]) == set(scores["by_category"])
    for key in ("anchor_average", "anchor_average_en", "anchor_average_zh"):  # MiniLongBench's overall is the estimate
        lo, hi = ci[key]
        assert lo <= scores[key] <= hi and 0 < hi - lo < 30  # same 0-100 scale as the score
    for task, value in scores["by_task"].items():
        assert ci["by_task"][task][0] <= value <= ci["by_task"][task][1]
    printed = capsys.readouterr().out
    half = (ci["anchor_average"][1] - ci["anchor_average"][0]) / 2
    assert f"{scores['anchor_average']:.2f} ±{half:.2f}" in printed
    assert "±95% CI" in printed
