"""A run's memory does not depend on what else the cache holds (issue 41, item 5).

DuckDB holds a table's primary-key index whole in memory from its first insert (114 MB
per million response keys) and never evicts it, so every run into the shared default
cache grew with it. Schema v7 keeps the tables that grow with the cache without an index
(store/schema.py), their writers keep keys unique (`insert_missing`), and a run's
connection has a memory limit (store/connection.py RUN_CONFIG)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from asyncbench.store import Store
from asyncbench.store.rows import ResultRow
from asyncbench.store.schema import SCHEMA_VERSION, UNINDEXED

REPO = Path(__file__).resolve().parents[1]

# the v6 tables that had a primary key, as v6 created them (with their v6 columns)
V6 = {
    "responses": "key VARCHAR PRIMARY KEY, provider VARCHAR, model VARCHAR, endpoint VARCHAR, request_json VARCHAR, "
                 "text VARCHAR, finish_reason VARCHAR, prompt_tokens BIGINT, completion_tokens BIGINT, "
                 "cached_prompt_tokens BIGINT, latency_ms DOUBLE, cost_usd DOUBLE, served_by VARCHAR, "
                 "created_at DOUBLE, cache_write_tokens BIGINT DEFAULT 0, usage_flag VARCHAR, sent_at DOUBLE, "
                 "ttft_ms DOUBLE, itl_ms DOUBLE[]",
    "results": "run_id VARCHAR, sample_id VARCHAR, task VARCHAR, purpose VARCHAR, key VARCHAR, status VARCHAR, "
               "score DOUBLE, prediction VARCHAR, cached BOOLEAN, error VARCHAR, prompt_tokens BIGINT, "
               "completion_tokens BIGINT, cached_prompt_tokens BIGINT, cost_usd DOUBLE, latency_ms DOUBLE, "
               "truncated_tokens BIGINT, meta_json VARCHAR, invocation INTEGER, references_json VARCHAR, "
               "PRIMARY KEY (run_id, sample_id, purpose)",
    "prompts": "key VARCHAR PRIMARY KEY, prompt VARCHAR",
    "prompt_refs": "key VARCHAR PRIMARY KEY, file VARCHAR, start BIGINT, length BIGINT",
}


def _keys(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {t for (t,) in con.execute("SELECT table_name FROM duckdb_constraints() "
                                      "WHERE constraint_type = 'PRIMARY KEY'").fetchall()}


def test_a_v6_cache_loses_its_key_indexes_and_keeps_every_row(tmp_path: Path) -> None:
    path = tmp_path / "v6.duckdb"
    con = duckdb.connect(str(path))
    for table, columns in V6.items():
        con.execute(f"CREATE TABLE {table} ({columns})")
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '6')")
    con.execute("INSERT INTO responses (key, text, cache_write_tokens, itl_ms) VALUES ('k1', 'one', 3, [1.5, 2.0]), "
                "('k2', 'two', 0, NULL)")
    con.execute("INSERT INTO results (run_id, sample_id, purpose, score, references_json) VALUES "
                "('r', 's1', 'eval', 0.5, '[\"a\"]')")
    con.execute("INSERT INTO prompts VALUES ('k1', 'the prompt')")
    con.execute("INSERT INTO prompt_refs VALUES ('k2', 'f', 0, 10)")
    assert set(UNINDEXED) <= _keys(con)
    con.close()
    with Store(path) as store:
        assert store.cache.lookup(["k1"])["k1"].text == "one"
    con = duckdb.connect(str(path), read_only=True)
    assert not set(UNINDEXED) & _keys(con)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert con.execute("SELECT key, text, cache_write_tokens, itl_ms FROM responses ORDER BY key").fetchall() == [
        ("k1", "one", 3, [1.5, 2.0]), ("k2", "two", 0, None)]
    assert con.execute("SELECT score, references_json FROM results").fetchall() == [(0.5, '["a"]')]
    assert con.execute("SELECT * FROM prompts").fetchall() == [("k1", "the prompt")]
    assert con.execute("SELECT * FROM prompt_refs").fetchall() == [("k2", "f", 0, 10)]
    con.close()


def test_keys_stay_unique_without_an_index(tmp_path: Path) -> None:
    """A stored answer is kept (the first paid), a key twice in one batch is stored once,
    a prompt once per key, and a sample row rewritten replaces the one stored."""
    with Store(tmp_path / "c.duckdb") as store, store.session():
        store.cache.put_responses([{"key": "a", "text": "first"}])
        store.cache.put_responses([{"key": "a", "text": "again"}, {"key": "b", "text": "b1"},
                                   {"key": "b", "text": "b2"}])
        assert store.one("SELECT count(*), count(DISTINCT key) FROM responses") == (2, 2)
        assert store.cache.lookup(["a"])["a"].text == "first"
        store.runs.put_prompts([("a", "p"), ("a", "p"), ("b", "q")])
        store.runs.put_prompts([("b", "other")])
        assert store.con.execute("SELECT key, prompt FROM prompts ORDER BY key").fetchall() == [("a", "p"), ("b", "q")]
        row = ResultRow(run_id="r", sample_id="s", task="t", purpose="eval", key="a", status="answered", score=0.0,
                        prediction="x", cached=False, error=None, prompt_tokens=1, completion_tokens=1,
                        cached_prompt_tokens=0, cost_usd=0.0, latency_ms=1.0, truncated_tokens=0, meta_json="{}",
                        invocation=1, references_json="[]")
        store.runs.put_results([row], new=True)
        store.runs.put_results([dataclasses.replace(row, score=1.0, invocation=2)])
        assert store.con.execute("SELECT score, invocation FROM results").fetchall() == [(1.0, 2)]


@pytest.mark.slow
def test_a_100k_run_into_a_cache_of_a_million_answers_stays_within_300_mb(tmp_path: Path) -> None:
    from asyncbench.sim.testing import sim_subprocess

    cache = tmp_path / "big.duckdb"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    # filled in a process of its own: a child's peak RSS counts what it was forked from
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO / 'bench')!r}); "
                    f"from memory_cache_size import fill; fill(__import__('pathlib').Path({str(cache)!r}), 1_000_000)"],
                   env=env, check=True, timeout=600, capture_output=True)
    data = tmp_path / "d.jsonl"
    with data.open("w") as fh:
        for i in range(100_000):
            fh.write(json.dumps({"id": f"q{i}", "prompt": f"question {i}: what is {i} plus one?",
                                 "answers": [str(i + 1)], "max_tokens": 4}) + "\n")
    # through a wrapper process that runs only the command: a child's peak RSS (ru_maxrss)
    # counts the process it was forked from, here a pytest worker that may hold hundreds of MB
    sys.path.insert(0, str(REPO / "bench"))
    from raw_client_ratio import WRAP

    with sim_subprocess(["--latency-ms", "0"]) as url:
        done = subprocess.run([sys.executable, "-c", WRAP, sys.executable, "-m", "asyncbench.cli", "run",
                               f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", url + "/v1", "--cache",
                               str(cache), "--out", str(tmp_path / "out"), "--no-progress", "--concurrency", "256"],
                              env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    measured = json.loads(done.stdout)
    assert measured["rc"] == 0, measured["stderr"]
    summary = json.loads((tmp_path / "out" / "run.json").read_text())
    assert summary["samples"]["answered"] == 100_000
    peak_mb = measured["rss_kb"] / 1024
    print(f"100k run into a cache of 1M other answers: peak RSS {peak_mb:.0f} MB")
    assert peak_mb <= 300
    with Store(cache) as store, store.session():  # every answer once: the run's 100k and the other 1M
        assert store.one("SELECT count(*), count(DISTINCT key) FROM responses") == (1_100_000, 1_100_000)
