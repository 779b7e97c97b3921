"""A paid answer reaches DuckDB through its journal line (store/journal.py `ingest`): the
rows DuckDB reads back from the file are exactly the Python values written, for odd text
too, and a replayed file (a crashed process, its last line cut) adds nothing twice."""

from __future__ import annotations

import dataclasses
import json
import socket
from pathlib import Path

import pytest

from asyncbench.ledger import RequestEntry
from asyncbench.store import Store
from asyncbench.store.journal import Journal, ingest, replay
from asyncbench.store.prompt_files import prompt_dir, read_prompts
from asyncbench.store.rows import RESPONSE_COLUMNS, ResponseRow

ODD = ['plain', 'quote " and backslash \\ and tab\t', "line\nbreaks\r\n", "ünïcödé 中文 🎉", "", "x" * 50_000]


def _row(i: int, text: str) -> ResponseRow:
    return ResponseRow(key=f"k{i}", provider="openai-compat", model="m", endpoint="e", request_json='{"a": 1}',
                       text=text, finish_reason=None if i % 2 else "stop", prompt_tokens=10 + i, completion_tokens=i,
                       cached_prompt_tokens=0, latency_ms=1.5 * i, cost_usd=0.001 * i, served_by="http://h:1/v1",
                       created_at=1_700_000_000.25 + i, cache_write_tokens=i % 3,
                       usage_flag="usage out of bounds" if i == 2 else None,
                       sent_at=None if i % 3 == 0 else 1_700_000_000.5 + i, ttft_ms=None if i % 2 else 0.25 * i,
                       itl_ms=None if i % 2 else [0.5, 1.25 * i])


def _entry(i: int) -> RequestEntry:
    return RequestEntry(invocation=2, purpose="eval", task="t", source="sent", key=f"k{i}",
                        sample_id=None if i == 0 else str(i), prompt_tokens=10 + i, completion_tokens=i,
                        cost_usd=0.001 * i, latency_ms=1.5 * i, attempts=1 + i % 2, cache_write_tokens=i % 3)


def _write(tmp_path: Path) -> tuple[Store, Journal]:
    store = Store(tmp_path / "c.duckdb")
    journal = Journal(store.path, "run1")
    for i, text in enumerate(ODD):
        journal.append(_row(i, text), _entry(i), None if i == 1 else f"prompt {i}: {text}")
    return store, journal


@pytest.mark.parametrize("replay", [False, True])
def test_ingested_rows_equal_what_was_written(tmp_path: Path, replay: bool) -> None:
    """Both ways in: a batch of this process (one read of the file), and a replayed file."""
    store, journal = _write(tmp_path)
    path = journal.rotate()
    assert path is not None and journal.rotate() is None  # nothing new: no empty file to ingest
    with store.transaction():
        ingest(store, path, replay=replay)
    with store.session():
        got = {r[0]: r for r in store.con.execute(f"SELECT {', '.join(RESPONSE_COLUMNS)} FROM responses").fetchall()}
        ledger = store.con.execute("SELECT * FROM ledger_requests ORDER BY key").fetchall()
        refs = store.con.execute("SELECT key, file, start, length FROM prompt_refs").fetchall()
    texts = read_prompts(store.path, [tuple(r[1:]) for r in refs])
    prompts = {key: texts[(f, s, n)] for key, f, s, n in refs}
    assert len(got) == len(ledger) == len(ODD)  # every answer read, each once
    for i, text in enumerate(ODD):
        assert got[f"k{i}"] == tuple(_row(i, text)[c] for c in RESPONSE_COLUMNS)  # type: ignore[literal-required]
    entries = {f"k{i}": _entry(i) for i in range(len(ODD))}
    for row in ledger:
        assert row[0] == "run1"
        assert row[1:] == tuple(dataclasses.astuple(entries[row[5]]))
    assert prompts == {f"k{i}": f"prompt {i}: {t}" for i, t in enumerate(ODD) if i != 1}


def test_a_key_stored_meanwhile_is_kept_and_the_batch_goes_in_whole(tmp_path: Path) -> None:
    """No key index (schema v7): another process's answer stored since the lookup is kept,
    the rest of the batch and every ledger row go in, and a key twice in one batch (or
    ingested twice) is stored once."""
    store, journal = _write(tmp_path)
    path = journal.rotate()
    assert path is not None
    with store.transaction():  # another process stored k2's answer since it was looked up
        store.con.execute("INSERT INTO responses SELECT * FROM (SELECT 'k2', 'other', 'm', 'e', '{}', 'theirs', NULL, "
                          "1, 1, 0, 1.0, 0.0, 'x', 1.0, 0, NULL, NULL, NULL, NULL)")
    with store.transaction():
        ingest(store, path)
    with store.session():
        assert store.one("SELECT count(*) FROM ledger_requests") == (len(ODD),)
        assert store.one("SELECT count(*), count(DISTINCT key) FROM responses") == (len(ODD), len(ODD))
        assert store.one("SELECT text FROM responses WHERE key = 'k2'") == ("theirs",)  # a stored answer is kept
        refs = store.one("SELECT count(*), count(DISTINCT key) FROM prompt_refs")
    with store.transaction():
        ingest(store, path, replay=True)  # the same file again: no key twice
    with store.session():
        assert store.one("SELECT count(*) FROM responses") == (len(ODD),)
        assert store.one("SELECT count(*), count(DISTINCT key) FROM prompt_refs") == refs
    assert refs[0] == refs[1] == len(ODD) - 1


def test_replay_skips_a_cut_line_and_adds_no_ledger_row_twice(tmp_path: Path) -> None:
    store, journal = _write(tmp_path)
    path = journal.path
    journal.close = lambda: None  # type: ignore[method-assign]  # the process "dies": the file stays
    with store.transaction():
        ingest(store, path)  # its batch was committed, the file not yet deleted
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"run_id": "run1", "response": {"key": "cut"')  # the crash cut the last line
    dead = path.with_name(f"{path.name.rsplit('-', 2)[0]}-999999999-1.jsonl")  # a pid that is not running
    path.rename(dead)
    assert replay(store) == len(ODD)
    assert not dead.exists()
    with store.session():
        (n_ledger,) = store.one("SELECT count(*) FROM ledger_requests")
        (n_responses,) = store.one("SELECT count(*) FROM responses")
    assert (n_ledger, n_responses) == (len(ODD), len(ODD))


def test_prompts_are_bytes_in_the_prompt_file_and_a_lone_surrogate_survives(tmp_path: Path) -> None:
    """A prompt is appended to the process's prompt file as it was sent (UTF-8, unescaped)
    and read back exactly, a lone surrogate from a JSON data file included; a prompt file
    gone (a cache moved without its .prompts folder) reads as missing, nothing fails."""
    store = Store(tmp_path / "c.duckdb")
    journal = Journal(store.path, "run1")
    odd = "lone \ud800 surrogate and 中文"
    journal.append(_row(0, "a"), _entry(0), odd)
    journal.append(_row(1, "b"), _entry(1), "plain")
    path = journal.rotate()
    assert path is not None
    with store.transaction():
        ingest(store, path)
    with store.session():
        refs = store.con.execute("SELECT key, file, start, length FROM prompt_refs ORDER BY key").fetchall()
    assert [r[3] for r in refs] == [len(odd.encode("utf-8", "surrogatepass")), 5]
    assert (prompt_dir(store.path) / refs[0][1]).read_bytes() == odd.encode("utf-8", "surrogatepass") + b"plain"
    assert read_prompts(store.path, [tuple(r[1:]) for r in refs]) == {tuple(refs[0][1:]): odd,
                                                                     tuple(refs[1][1:]): "plain"}
    journal.close()
    (prompt_dir(store.path) / refs[0][1]).unlink()
    assert set(read_prompts(store.path, [tuple(r[1:]) for r in refs]).values()) == {None}
    assert read_prompts(store.path, [("../c.duckdb", 0, 4)]) == {}  # a store's name never leaves the folder


def test_a_journal_of_an_earlier_version_replays_with_its_prompt(tmp_path: Path) -> None:
    """A crashed process of an earlier version wrote the prompt text into its lines."""
    store = Store(tmp_path / "c.duckdb")
    folder = store.path.with_name(store.path.name + ".journal")
    folder.mkdir()
    line = {"run_id": "run1", "response": _row(0, "old"), "ledger": dataclasses.asdict(_entry(0)),
            "prompt": "the old prompt"}
    (folder / f"{socket.gethostname()}-999999999-1.jsonl").write_text(json.dumps(line) + "\n")  # a dead pid
    assert replay(store) == 1
    with store.session():
        assert store.con.execute("SELECT key, prompt FROM prompts").fetchall() == [("k0", "the old prompt")]
