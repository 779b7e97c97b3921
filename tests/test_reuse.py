"""A re-run of a complete run that nothing changed since is booked from the store
(reuse.py, issue 27: a warm re-run recomputes nothing the store holds): its run.json, its
request rows and the sample rows are exactly what the full path writes (the same re-run
on a copy of the cache with the run's reuse mark removed), and anything that could change
a score or a figure (the package's code, an answer gone from the cache, a failed sample,
answers shared with a paid one) sends the re-run down the full path."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

import asyncbench.run.reuse as reuse
from asyncbench.store import Store
from tests.test_engine import run_cli, write_jsonl

# what differs between two invocations of one command by the clock alone
_CLOCK = ("started_at", "wall_s", "throughput_rps")


def _steady(summary: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in summary.items() if k not in (*_CLOCK, "_exit")}
    out["invocations"] = [{k: v for k, v in inv.items() if k not in _CLOCK} for inv in summary["invocations"]]
    out["this_invocation"] = {k: v for k, v in summary["this_invocation"].items() if k not in _CLOCK}
    return out


def _record(cache: Path) -> dict[str, list[tuple[Any, ...]]]:
    """What the store records of every run, each kind sorted: its ledger request rows,
    sample rows, and the runs (not their config: each names its own --cache)."""
    with Store(cache) as store:
        runs = store.runs.runs()
        kept = {"ledger": [(run.run_id, *dataclasses.astuple(r)) for run in runs
                           for r in store.runs.request_rows(run.run_id)],
                "samples": [dataclasses.astuple(r) for run in runs for r in store.runs.results(run.run_id)],
                "runs": [(r.run_id, r.benchmark, r.model, r.started_at, r.status) for r in runs]}
    return {kind: sorted(rows, key=repr) for kind, rows in kept.items()}


def _booked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The runs booked from the store, as they are (a spy around reuse.book)."""
    calls: list[str] = []
    original = reuse.book

    def spy(p, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(p.run_id)
        return original(p, *args, **kwargs)

    monkeypatch.setattr(reuse, "book", spy)
    return calls


def _forget_mark(cache: Path) -> None:
    con = duckdb.connect(str(cache))
    try:
        con.execute("DELETE FROM reusable")
    finally:
        con.close()


def _same_as_full_path(tmp_path: Path, args: list[str], booked: list[str]) -> dict[str, Any]:
    """Re-run `args` in tmp_path/a (booked from the store) and on a copy of its cache
    without the mark (the full path); both must write the same record."""
    full = tmp_path / "full"
    full.mkdir()
    shutil.copy(tmp_path / "a" / "cache.duckdb", full / "cache.duckdb")
    _forget_mark(full / "cache.duckdb")
    n = len(booked)
    slow = run_cli(full, *args)
    assert len(booked) == n  # the copy without its mark scored again
    fast = run_cli(tmp_path / "a", *args)
    assert booked[n:] == [fast["run_id"]]
    assert fast["_exit"] == slow["_exit"] == 0
    assert json.dumps(_steady(fast)) == json.dumps(_steady(slow))  # in the same order too
    booked_record, full_record = _record(tmp_path / "a" / "cache.duckdb"), _record(full / "cache.duckdb")
    for kind in ("ledger", "samples", "runs"):
        assert booked_record[kind] and booked_record[kind] == full_record[kind], kind
    with Store(tmp_path / "a" / "cache.duckdb") as store:
        stored = store.runs.summary_json(fast["run_id"])
    assert stored is not None
    assert _steady(json.loads(stored)) == _steady(fast)  # the store keeps what run.json says
    return fast


@pytest.mark.parametrize("twins", [False, True])
def test_a_warm_rerun_is_booked_from_the_store_as_the_full_path_books_it(tmp_path, start_sim, monkeypatch,
                                                                         twins):
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 40)
    if twins:  # samples asking what another asks: shared, sent once
        lines = data.read_text().splitlines()
        lines += [line.replace('"id": "q', '"id": "twin') for line in lines[:5]]
        data.write_text("\n".join(lines) + "\n")
    args = [f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1"]
    (tmp_path / "a").mkdir()
    booked = _booked(monkeypatch)
    cold = run_cli(tmp_path / "a", *args)
    assert cold["complete"] and booked == []
    if twins:
        # a paid answer and its twins: a cache-first pass books the twins from the cache
        # as their own the next time, so that pass takes the full path once
        assert cold["samples"]["shared"] == 5
        again = run_cli(tmp_path / "a", *args)
        assert booked == [] and again["this_invocation"]["requests"] == 0
    before = sim.stats()["requests"]
    warm = _same_as_full_path(tmp_path, args, booked)
    assert sim.stats()["requests"] == before  # neither re-run sent anything
    assert warm["scores"] == cold["scores"] and warm["samples"] == cold["samples"]
    assert warm["this_invocation"]["saved_by_cache_usd"] > 0 and warm["latency_ms"]["source"] == "cache"


def test_what_could_change_a_score_takes_the_full_path(tmp_path, start_sim, monkeypatch):
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 30)
    args = [f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1"]
    booked = _booked(monkeypatch)
    run_cli(tmp_path, *args)
    # new code: scored again, and the next re-run under that code is booked
    monkeypatch.setattr(reuse, "code_digest", lambda: "an edited package")
    run_cli(tmp_path, *args)
    assert booked == []
    run_cli(tmp_path, *args)
    assert len(booked) == 1
    # an answer gone from the cache: the full path sends it again
    con = duckdb.connect(str(tmp_path / "cache.duckdb"))
    con.execute("DELETE FROM responses WHERE key = (SELECT min(key) FROM responses)")
    con.close()
    before = sim.stats()["requests"]
    resent = run_cli(tmp_path, *args)
    assert len(booked) == 1 and sim.stats()["requests"] == before + 1 and resent["this_invocation"]["requests"] == 1


def test_a_partial_run_is_never_booked_from_the_store(tmp_path, start_sim, monkeypatch):
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 20, marker_at=3)  # the server refuses one prompt
    args = [f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1"]
    booked = _booked(monkeypatch)
    for _ in range(2):
        run = run_cli(tmp_path, *args)
        assert not run["complete"] and run["samples"]["failed"] == 1
    assert booked == []
    with Store(tmp_path / "cache.duckdb") as store:
        runs = store.runs.runs()
        assert runs and [store.runs.reusable(r.run_id) for r in runs] == [None] * len(runs)


def test_a_listed_benchmark_is_booked_as_the_full_path_books_it(tmp_path, start_sim, monkeypatch, shared_data):
    """MiniLongBench: LongBench's own prompts, cut by the tokenizer, with its truncation block."""
    sim = start_sim()
    args = ["minilongbench:hotpotqa,samsum,lcc", "--model", "openai-compat:sim", "--base-url",
            sim.base_url + "/v1", "--data-dir", str(shared_data)]
    (tmp_path / "a").mkdir()
    booked = _booked(monkeypatch)
    cold = run_cli(tmp_path / "a", *args)
    assert cold["complete"] and booked == []
    warm = _same_as_full_path(tmp_path, args, booked)
    assert warm["scores"] == cold["scores"] and warm["truncation"] == cold["truncation"]


def test_a_rerun_that_changes_only_how_it_is_shown_or_paced_is_booked(tmp_path, start_sim, monkeypatch):
    """`--progress` (as `--json` and `--no-progress` set it), `--out`, the budget and the pace
    change how a run is shown, written and sent, never what it scores: a cached re-run with
    any of them changed is booked from the store (it once scored again: 8.2 s for 1.2)."""
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 20)
    args = [f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1"]
    booked = _booked(monkeypatch)
    run_cli(tmp_path, *args)
    for more in (["--progress"], ["--concurrency", "3", "--max-cost", "5"], ["--rpm", "6000", "--timeout", "30"]):
        run_cli(tmp_path, *args, *more)
    assert len(booked) == 3
    run_cli(tmp_path, *args, "--temperature", "0.5")  # a new run (another id): the full path
    assert len(booked) == 3
