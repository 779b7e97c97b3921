"""Serving latency from the run that scores (issue 38 items 2-3): each live answer's timing
stored with it (schema v6) and in the samples export, the run's percentiles per
context-length bin in run.json and the terminal summary. Cache hits and batch results
carry no timing, and say so (never 0); a killed run's timings survive its resume.
Real `asyncbench run` subprocesses against the simulator, real DuckDB files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from asyncbench.serving import Measured, active_seconds, quantiles, serving_figures, token_bins, tpot
from asyncbench.sim.testing import sim_subprocess
from asyncbench.store import Store

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
ENV = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | {"PYTHONPATH": str(REPO),
                                                                              "COLUMNS": "200"}


def _m(prompt: int, sent: float, e2e: float, ttft: float | None, out: int = 5, meta: str | None = None) -> Measured:
    return Measured("s", meta, prompt, 0, out, e2e, sent, ttft, [1.0] * (out - 1) if ttft is not None else None)


# -- the definitions -----------------------------------------------------------------------

def test_tpot_is_aiperfs_and_undefined_where_it_is() -> None:
    assert tpot(110.0, 10.0, 11) == 10.0  # (e2e - TTFT) / (output tokens - 1)
    assert tpot(110.0, None, 11) is None  # not streamed
    assert tpot(110.0, 10.0, 1) is None  # one token: no time per output token after the first


def test_active_time_is_the_union_of_the_requests_in_flight() -> None:
    # [0, 1] and [0.5, 2] overlap; [10, 10.5] is alone: 2.5 s, not 10.5 (a resume's pause)
    reqs = [_m(1, 0.0, 1000.0, 5.0), _m(1, 0.5, 1500.0, 5.0), _m(1, 10.0, 500.0, 5.0)]
    assert active_seconds(reqs) == pytest.approx(2.5)
    block = serving_figures(reqs, None, {})["overall"]
    assert block["request_throughput"] == pytest.approx(3 / 2.5, rel=1e-3)
    assert block["output_token_throughput"] == pytest.approx(15 / 2.5, rel=1e-2)


def test_percentiles_are_numpys_linear_ones() -> None:
    assert quantiles(range(1, 101)) == {"p50": 50.5, "p90": 90.1, "p95": 95.05, "p99": 99.01}
    assert quantiles([]) == {"p50": None, "p90": None, "p95": None, "p99": None}


def test_bins_are_the_benchmarks_else_prompt_token_deciles() -> None:
    reqs = [_m(100 * i, float(i), 10.0, 1.0, meta=json.dumps({"length": "16k" if i > 50 else "4k"}))
            for i in range(1, 101)]
    own = serving_figures(reqs, lambda meta: meta.get("length"), {"from cache": 0})
    assert own["bins"] == "benchmark" and list(own["by_length"]) == ["4k", "16k"]  # by prompt tokens
    assert own["not_measured"] == {}
    deciles = serving_figures(reqs, None, {})
    assert deciles["bins"] == "prompt-token deciles" and len(deciles["by_length"]) == 10
    assert all(b["n"] == 10 for b in deciles["by_length"].values())
    assert next(iter(deciles["by_length"])) == "100-1.0k tok"
    assert len(token_bins(reqs[:7])) == 1  # too few for ten bins
    unstreamed = serving_figures([_m(10, 0.0, 20.0, None)], None, {})["overall"]
    assert unstreamed["ttft_ms"]["p50"] is None and unstreamed["e2e_ms"]["p50"] == 20.0  # None, never 0


# -- runs ------------------------------------------------------------------------------------

def _data(tmp: Path, n: int) -> Path:
    data = tmp / "d.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "prompt": f"question {i}: " + "word " * (20 * (i + 1)),
                                        "answers": ["word"]}) + "\n" for i in range(n)))
    return data


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], env=ENV, capture_output=True, text=True,
                          timeout=600, cwd=tmp)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def _samples(tmp: Path, run_id: str) -> list[dict[str, Any]]:
    done = cli(tmp, "samples", run_id, "--cache", str(tmp / "c.duckdb"), "--format", "jsonl")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_run_reports_its_serving_latency_and_a_cached_rerun_says_it_measured_nothing(tmp_path: Path) -> None:
    data = _data(tmp_path, 12)
    base = ["run", f"jsonl:{data}", "--model", "sim", "--cache", str(tmp_path / "c.duckdb"), "--no-progress"]
    first = cli(tmp_path, *base, "--out", str(tmp_path / "a"), "--limit", "12")
    assert first.returncode == 0, first.stderr[-2000:]
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    serving = run["serving"]
    assert serving["measured"] == 12 and serving["not_measured"] == {}
    assert serving["bins"] == "prompt-token deciles" and sum(b["n"] for b in serving["by_length"].values()) == 12
    overall = serving["overall"]
    assert overall["streamed"] == 12 and 0 < overall["ttft_ms"]["p50"] <= overall["e2e_ms"]["p50"]
    assert overall["tpot_ms"]["p50"] > 0 and overall["output_token_throughput"] > 0
    assert "serving latency of 12 answers sent live (12 streamed)" in first.stdout
    assert "TTFT ms p50/90/95/99" in first.stdout
    rows = _samples(tmp_path, run["run_id"])
    assert {r["timing"] for r in rows} == {"streamed"}
    for r in rows:
        assert r["ttft_ms"] > 0 and r["e2e_ms"] >= r["ttft_ms"] and len(r["itl_ms"]) == r["completion_tokens"] - 1
        assert r["tpot_ms"] == pytest.approx((r["e2e_ms"] - r["ttft_ms"]) / (r["completion_tokens"] - 1), abs=1e-3)
    # the cache row keeps the answer's timing as measured when it was paid
    with Store(tmp_path / "c.duckdb") as store:
        stored = store.cache.rows()
    assert sum((r["ttft_ms"] or 0) > 0 and (r["sent_at"] or 0) > 0 and r["itl_ms"] is not None
               and len(r["itl_ms"]) == r["completion_tokens"] - 1 for r in stored) == 12
    # another run (another id: no --limit) answered from the cache: nothing measured, said so
    second = cli(tmp_path, *base, "--out", str(tmp_path / "b"))
    assert second.returncode == 0, second.stderr[-2000:]
    again = json.loads((tmp_path / "b" / "run.json").read_text())
    assert again["run_id"] != run["run_id"]
    assert again["serving"] == {"measured": 0, "not_measured": {"from cache": 12}, "bins": None}
    assert "serving latency: nothing measured (12 from cache" in second.stdout
    for r in _samples(tmp_path, again["run_id"]):
        assert r["timing"] == "cache hit" and r["ttft_ms"] is None and r["tpot_ms"] is None and r["itl_ms"] is None


def test_a_killed_runs_timings_survive_its_resume(tmp_path: Path) -> None:
    data = _data(tmp_path, 40)
    with sim_subprocess(["--latency-ms", "100", "--per-token-ms", "1"]) as url:
        args = ["run", f"jsonl:{data}", "--model", "openai-compat:m", "--base-url", url + "/v1", "--cache",
                str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"), "--concurrency", "2", "--no-progress"]
        proc = subprocess.Popen([sys.executable, "-m", "asyncbench.cli", *args], env=ENV, cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        journal = tmp_path / "c.duckdb.journal"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and sum(p.read_bytes().count(b"\n") for p in journal.glob("*.jsonl")) < 4:
            time.sleep(0.1)  # a few answers paid (and journaled)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done = cli(tmp_path, *args)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert len(run["invocations"]) == 2 and run["complete"]
    paid_first = run["invocations"][0]["sent"]
    assert 0 < paid_first < 40
    # every answer was sent live by this run, in one invocation or the other: all timed
    assert run["serving"]["measured"] == 40 and run["serving"]["overall"]["streamed"] == 40
    assert run["serving"]["not_measured"] == {}
    with Store(tmp_path / "c.duckdb") as store:
        timed = sum(r.invocation == 1 and r.source == "sent" and (r.ttft_ms or 0) > 0
                    for r in store.runs.request_rows(run["run_id"]))
    assert timed == paid_first


@pytest.mark.skipif(not (DATA / "minilongbench").is_dir(), reason="../shared/data is not beside the checkout")
def test_batch_results_carry_no_timing(tmp_path: Path) -> None:
    with sim_subprocess(["--batch-turnaround-s", "0.3"]) as url:
        done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", "minilongbench", "--model",
                               "openai:gpt-4o-mini", "--base-url", url + "/v1", "--data-dir", str(DATA), "--cache",
                               str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"), "--batch", "--limit", "8",
                               "--no-progress"], env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    n = run["samples"]["answered"]
    assert n > 0 and run["serving"]["measured"] == 0
    assert run["serving"]["not_measured"] == {"batch": n}
    rows = _samples(tmp_path, run["run_id"])
    assert {r["timing"] for r in rows if r["status"] == "answered"} == {"batch"}
    assert all(r["ttft_ms"] is None and r["e2e_ms"] is None for r in rows)


def test_a_v5_cache_is_migrated_with_no_timings(tmp_path: Path) -> None:
    from asyncbench.store.schema import SCHEMA_VERSION

    path = tmp_path / "v5.duckdb"
    with Store(path):
        pass
    with duckdb.connect(str(path)) as con:  # as v5 left it
        for table, columns in (("responses", ("sent_at", "ttft_ms", "itl_ms")), ("ledger_requests", ("sent_at", "ttft_ms"))):
            for column in columns:
                con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
        con.execute("INSERT INTO responses (key, text, prompt_tokens, completion_tokens, cached_prompt_tokens, "
                    "latency_ms) VALUES ('k', 'old answer', 3, 2, 0, 12.5)")
    with Store(path):
        pass
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert con.execute("SELECT text, latency_ms, sent_at, ttft_ms, itl_ms FROM responses").fetchall() == [
            ("old answer", 12.5, None, None, None)]
        assert {c for (c,) in con.execute("SELECT column_name FROM information_schema.columns "
                                          "WHERE table_name = 'ledger_requests'").fetchall()} >= {"sent_at", "ttft_ms"}
