"""Ledger invariants that hold through interrupts, resumes and shares (issue 23), each on
a real CLI run in a subprocess against the simulator, on a BAMBOO subset that has what
they need: showssort_4k and altqa_4k ask 118 prompts another sample already asked
(`shared`), and paperqa_16k holds the release's malformed row (line 26).

One run goes uninterrupted (the reference); the same run in another cache is stopped
with SIGINT (Ctrl-C) part-way and resumed: every figure of the run must come out as the
reference's.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
BENCH = "bamboo:paperqa@16k,showssort@4k,altqa@4k"
pytestmark = pytest.mark.skipif(not (DATA / "bamboo").is_dir(), reason="../shared/data is not beside the checkout")
slow = pytest.mark.slow  # the tests on the reference and resumed runs (~50 s together)
ENV = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"PYTHONPATH": str(REPO),
                                                                              "COLUMNS": "200"}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], env=ENV, capture_output=True, text=True,
                          timeout=600, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def run_args(tmp: Path, *extra: str) -> list[str]:
    return ["run", BENCH, "--data-dir", str(DATA), "--cache", str(tmp / "c.duckdb"), "--out", str(tmp / "out"), *extra]


def samples_export(tmp: Path, run_id: str) -> list[dict[str, Any]]:
    done = cli("samples", run_id, "--cache", str(tmp / "c.duckdb"), "--format", "jsonl", cwd=tmp)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run uninterrupted, with its progress bar."""
    tmp = tmp_path_factory.mktemp("reference")
    done = cli(*run_args(tmp, "--model", "sim", "--progress"), cwd=tmp)
    return {"tmp": tmp, "done": done, "run": json.loads((tmp / "out" / "run.json").read_text())}


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory, reference: dict[str, Any]) -> dict[str, Any]:
    """The same run in another cache, Ctrl-C'd part-way, then resumed. A stale run.json of
    the reference (same run id, another cache) waits in its output folder."""
    from asyncbench.sim.testing import sim_subprocess

    tmp = tmp_path_factory.mktemp("resumed")
    (tmp / "out").mkdir()
    (tmp / "out" / "run.json").write_text(json.dumps(reference["run"]))
    with sim_subprocess(["--latency-ms", "40"]) as url:
        args = run_args(tmp, "--model", "openai-compat:sim", "--base-url", url + "/v1", "--endpoint-id",
                        "asyncbench-sim", "--concurrency", "4", "--no-progress")
        proc = subprocess.Popen([sys.executable, "-m", "asyncbench.cli", *args], env=ENV, cwd=tmp,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        journal = tmp / "c.duckdb.journal"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(p.stat().st_size for p in journal.glob("*.jsonl")):
            time.sleep(0.2)  # the first answers are paid
        running = cli("cache", "runs", "--cache", str(tmp / "c.duckdb"), cwd=tmp).stdout  # while it runs
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        interrupted = json.loads((tmp / "out" / "run.json").read_text())
        listed = cli("cache", "runs", "--cache", str(tmp / "c.duckdb"), cwd=tmp).stdout
        done = cli("run", "--resume", interrupted["run_id"], "--cache", str(tmp / "c.duckdb"), "--out",
                   str(tmp / "out"), "--no-progress", cwd=tmp)
    return {"tmp": tmp, "rc": proc.returncode, "stderr": err, "interrupted": interrupted, "listed": listed,
            "running": running,
            "done": done, "run": json.loads((tmp / "out" / "run.json").read_text())}


@slow
def test_a_malformed_row_is_excluded_with_its_reason_and_the_run_is_complete(reference: dict[str, Any]) -> None:
    done, run = reference["done"], reference["run"]
    assert done.returncode == 0 and run["complete"] and run["partial"] is None and run["next_step"] is None
    assert run["samples"]["excluded"] == 1 and run["samples"]["settled"] == run["samples"]["total"] == 500
    (row,) = run["excluded"]["samples"]
    assert row["sample_id"] == "paperqa_16k/26" and "paperqa_16k.jsonl line 26" in row["reason"]
    text = " ".join(done.stdout.split())
    assert "excluded 1 (paperqa_16k/26): malformed data row: paperqa_16k.jsonl line 26" in text
    assert "again" not in done.stdout + done.stderr  # no advice to re-run what a re-run cannot fix
    (export,) = [s for s in samples_export(reference["tmp"], run["run_id"]) if s["status"] == "excluded"]
    assert export["sample_id"] == "paperqa_16k/26" and "line 26" in export["error"]


@slow
def test_bamboo_prints_its_serving_latency_at_4k_and_16k(reference: dict[str, Any], resumed: dict[str, Any]) -> None:
    """`run bamboo --model sim`: TTFT and TPOT percentiles per BAMBOO level (issue 38), the
    16k prompts' prefill the longer (the simulator's, --model sim); a resumed run's serving
    figures cover every answer of its two invocations."""
    run, out = reference["run"], reference["done"].stdout
    serving = run["serving"]
    assert serving["bins"] == "benchmark" and list(serving["by_length"]) == ["4k", "16k"]
    assert serving["measured"] == run["samples"]["answered"] and serving["not_measured"] == {}
    four, sixteen = serving["by_length"]["4k"], serving["by_length"]["16k"]
    assert four["prompt_tokens"]["p50"] < sixteen["prompt_tokens"]["p50"]
    for b in (four, sixteen):  # TPOT is undefined for one-token answers (BAMBOO's option letters): None, not 0
        assert b["ttft_ms"]["p50"] > 0
        assert b["tpot_ms"]["p50"] > 0 if b["output_tokens"]["p99"] > 1 else b["tpot_ms"]["p50"] is None
    assert "TTFT ms p50/90/95/99" in out and re.search(r"^\s+16k\s+\d+\s", out, re.M)
    # answered in either invocation of the resumed run: all timed, each once
    resumed_run = resumed["run"]
    assert resumed_run["serving"]["measured"] == resumed_run["samples"]["answered"]


def test_strict_data_makes_a_malformed_row_an_error(tmp_path: Path) -> None:
    done = cli(*run_args(tmp_path, "--model", "sim", "--strict-data"), cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "paperqa_16k.jsonl line 26" in lines[0], done.stderr
    assert not (tmp_path / "out" / "run.json").exists()


@slow
def test_the_progress_bar_counts_the_samples_to_do(reference: dict[str, Any]) -> None:
    run = reference["run"]
    totals = {int(m.group(1)) for m in re.finditer(r"\d+/(\d+)\s+answered", reference["done"].stderr)}
    assert totals == {run["samples"]["total"] - run["samples"]["excluded"]}


@slow
def test_an_interrupted_invocation_books_its_requests_time_and_spend(resumed: dict[str, Any]) -> None:
    assert resumed["rc"] == 130 and "--resume" in resumed["stderr"]
    stopped = resumed["interrupted"]  # run.json written on interrupt: not the stale one of another cache
    assert stopped["interrupted"] and not stopped["complete"] and len(stopped["invocations"]) == 1
    first = stopped["invocations"][0]
    assert not first["finished"] and first["requests"] >= first["sent"] > 0 and first["wall_s"] > 0
    assert first["cost_usd"] == stopped["cost_usd"]["total"] > 0
    # `cache runs` counts the samples booked so far, while running and once interrupted
    live = re.search(r" running .* samples=(\d+) so far", resumed["running"])
    assert live is not None and int(live.group(1)) > 0, resumed["running"]
    seen = int(re.search(r"samples=(\d+) so far", resumed["listed"]).group(1))  # type: ignore[union-attr]
    assert " interrupted " in resumed["listed"] and seen >= first["sent"]
    run = resumed["run"]
    assert resumed["done"].returncode == 0 and run["run_id"] == stopped["run_id"] and run["complete"]
    assert run["invocations"][0] == first  # the interrupted one keeps what it booked
    assert sum(i["cost_usd"] for i in run["invocations"]) == pytest.approx(run["cost_usd"]["total"], abs=1e-5)


@slow
def test_statuses_are_facts_of_the_run_not_of_the_invocation(reference: dict[str, Any],
                                                             resumed: dict[str, Any]) -> None:
    ref, run = reference["run"], resumed["run"]
    assert ref["samples"]["shared"] == 118
    assert run["samples"] == ref["samples"]  # shared stays shared after a resume
    assert {t: (b["answered"], b["shared"]) for t, b in run["by_task"].items()} == {
        t: (b["answered"], b["shared"]) for t, b in ref["by_task"].items()}
    assert run["scores"] == ref["scores"]
    assert run["tokens"]["total"]["prompt_tokens"] == ref["tokens"]["total"]["prompt_tokens"]


@slow
def test_saved_by_cache_never_counts_shared_samples(reference: dict[str, Any], resumed: dict[str, Any]) -> None:
    first, second = resumed["run"]["invocations"]
    assert 0 < second["saved_by_cache_usd"] <= first["cost_usd"] + 1e-6
    tmp = reference["tmp"]  # the whole run again: everything from the cache, each answer saved once
    again = cli(*run_args(tmp, "--model", "sim", "--no-progress"), cwd=tmp)
    run = json.loads((tmp / "out" / "run.json").read_text())
    assert again.returncode == 0 and run["samples"] == reference["run"]["samples"]
    assert run["this_invocation"]["cost_usd"] == 0
    assert run["this_invocation"]["saved_by_cache_usd"] == pytest.approx(run["cost_usd"]["total"], abs=1e-5)


@slow
@pytest.mark.parametrize("which", ["reference", "resumed"])
def test_per_sample_tokens_sum_to_the_run_s(which: str, request: pytest.FixtureRequest) -> None:
    case = request.getfixturevalue(which)
    run = case["run"]
    rows = samples_export(case["tmp"], run["run_id"])
    eval_tokens = run["tokens"]["eval"]
    assert sum(r["prompt_tokens"] for r in rows) == eval_tokens["prompt_tokens"]
    assert sum(r["completion_tokens"] for r in rows) == eval_tokens["completion_tokens"]
    assert sum(r["usd"] for r in rows) == pytest.approx(run["cost_usd"]["eval"], abs=1e-5)
    by_id = {r["sample_id"]: r for r in rows}
    shared = [r for r in rows if r["status"] == "shared"]
    assert len(shared) == 118
    for r in shared:  # 0 tokens, and the sample whose answer it is
        twin = by_id[r["shared_with"]]
        assert r["prompt_tokens"] == r["completion_tokens"] == 0 and r["usd"] == 0
        assert twin["status"] == "answered" and twin["key"] == r["key"] and twin["prompt_tokens"] > 0


def test_auto_and_sim_resolving_to_the_same_model_are_one_run(tmp_path: Path) -> None:
    ids = []
    for model in ("auto", "sim"):
        done = cli(*run_args(tmp_path, "--model", model, "--dry-run", "--json", "--limit", "2"), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        ids.append(json.loads(done.stdout)["run_id"])
    assert ids[0] == ids[1]
