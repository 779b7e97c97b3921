"""A streamed run a window at a time (issue 27: memory flat in the number of samples):
the same record as in one window, a warm re-run writes no sample row it already holds,
and `compare` read from the store equals `compare` of the loaded runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb

import asyncbench.run.execute as engine_module
from asyncbench.report.compare import compare_runs
from asyncbench.report.data import load_runs
from asyncbench.store import Store
from asyncbench.store.runs import RunRecord
from tests.test_engine import run_cli, write_jsonl


def _rows(cache: Path) -> list[tuple[object, ...]]:
    """Every run's sample rows (sample id, task, status, score, prediction, key,
    invocation, error), by sample id."""
    with Store(cache) as store:
        rows = [r for run in store.runs.runs() for r in store.runs.results(run.run_id)]
    return sorted(((r.sample_id, r.task, r.status, r.score, r.prediction, r.key, r.invocation, r.error) for r in rows),
                  key=lambda r: str(r[0]))


def _written(monkeypatch) -> list[int]:
    """The sample rows each put_results call writes, as the run goes."""
    counts: list[int] = []
    original = RunRecord.put_results

    def counting(self, rows, new=False):
        counts.append(len(rows))
        return original(self, rows, new)

    monkeypatch.setattr(RunRecord, "put_results", counting)
    return counts


def test_windows_record_what_one_window_does_and_a_warm_rerun_writes_nothing(tmp_path, start_sim, monkeypatch):
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 60)
    args = [f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1"]
    for name in ("whole", "windows"):  # each its own cache file
        (tmp_path / name).mkdir()
    whole = run_cli(tmp_path / "whole", *args)
    monkeypatch.setattr(engine_module, "STREAM_WINDOW", 7)  # 9 windows, the last one short
    written = _written(monkeypatch)
    windows = run_cli(tmp_path / "windows", *args)
    assert sum(written) == 60 and max(written) <= 7  # a window's rows at a time
    assert windows["scores"] == whole["scores"] and windows["samples"] == whole["samples"]
    cache = tmp_path / "windows" / "cache.duckdb"
    stored = _rows(cache)
    assert [r[:5] for r in stored] == [r[:5] for r in _rows(tmp_path / "whole" / "cache.duckdb")]

    written.clear()
    again = run_cli(tmp_path / "windows", *args)
    assert sum(written) == 0 and again["samples"] == windows["samples"] and again["scores"] == windows["scores"]
    assert _rows(cache) == stored

    con = duckdb.connect(str(cache))
    con.execute("UPDATE results SET score = 0.5 WHERE sample_id = 'q3'")  # a stored row that differs
    con.execute("DELETE FROM reusable")  # the full path (a re-run booked from the store trusts it: reuse.py)
    con.close()
    written.clear()
    run_cli(tmp_path / "windows", *args)
    assert sum(written) == 1 and _rows(cache) == stored  # that row, and only it, written again


def test_compare_from_the_store_equals_compare_of_loaded_runs(tmp_path, start_sim):
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 40)
    base = [f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1"]
    a = run_cli(tmp_path, *base)
    b = run_cli(tmp_path, *base, "--temperature", "0.7")
    assert a["run_id"] != b["run_id"]
    cache = tmp_path / "cache.duckdb"
    loaded = load_runs(cache, [a["run_id"], b["run_id"]])
    light = load_runs(cache, [a["run_id"], b["run_id"]], samples=False)
    assert all(r.samples for r in loaded) and not any(r.samples for r in light)
    assert compare_runs(*light) == compare_runs(*loaded)


def test_an_answer_paid_in_an_earlier_window_is_shared_not_cached(tmp_path, start_sim, monkeypatch):
    """What this invocation paid is asked of the ledger (not kept per answer in memory):
    a later window's sample asking the same is "shared", its ledger row too, sent once."""
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 30)
    lines = data.read_text().splitlines()
    lines.append(lines[2].replace('"id": "q2"', '"id": "twin"'))  # the last window asks what the first did
    data.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(engine_module, "STREAM_WINDOW", 7)
    run = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1")
    assert sim.stats()["requests"] == 30 and run["samples"]["shared"] == 1 and run["samples"]["answered"] == 30
    with Store(tmp_path / "cache.duckdb") as store:
        sources = sorted((r.sample_id, r.source) for r in store.runs.request_rows(run["run_id"])
                         if r.sample_id in ("q2", "twin"))
    assert sources == [("q2", "sent"), ("twin", "shared")]


def test_a_new_runs_sample_rows_insert_as_the_upsert_writes_them(tmp_path):
    """put_results(new=True) (numpy columns, plain INSERT) stores every column as the
    upsert of Python lists does, whatever Python type a value came as."""
    from asyncbench.store import Store
    from asyncbench.store.rows import ResultRow

    def rows(run: str) -> list[ResultRow]:
        return [ResultRow(run, "a", "t", "eval", "k1", "answered", True, "é\x00x", None, None, 3, 0, None, 0.001, 5,
                          None, "{}", 1, "[]"),
                ResultRow(run, "b", "t", "eval", "k2", "failed", None, None, False, "boom", None, None, None, None, None,
                          7, None, 1, None),
                ResultRow(run, "c", "u", "eval", None, "excluded", 1, "", True, "", 0, 0, 0, 0, 1.5, 0, "{}", 2, "[\"r\"]"),
                ResultRow(run, "d", "u", "eval", "k4", "answered", 0.25, "long " * 1000, False, None, 10**12, 1, 2, 1e-9,
                          0.5, 0, None, 1, None)]

    store = Store(tmp_path / "c.duckdb")
    with store.session(), store.transaction():
        store.runs.put_results(rows("new"), new=True)
        store.runs.put_results(rows("upsert"))
    new, upsert = store.runs.results("new"), store.runs.results("upsert")
    assert len(new) == 4 and [dataclasses.replace(r, run_id="x") for r in new] == \
        [dataclasses.replace(r, run_id="x") for r in upsert]
    assert new[0].score == 1.0 and isinstance(new[0].score, float) and new[2].prompt_tokens == 0
