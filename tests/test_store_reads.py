"""The store's read methods that tests use instead of SQL (tests/test_architecture.py:
tests read the store through its API): what is written comes back as written, typed,
in a stated order. A real DuckDB file."""

from __future__ import annotations

from pathlib import Path

from asyncbench.ledger import RequestEntry
from asyncbench.store import Store
from asyncbench.store.rows import ResponseRow


def _response(key: str, text: str, **more: object) -> ResponseRow:
    row: ResponseRow = {"key": key, "provider": "openai", "model": "m", "endpoint": "e", "request_json": "{}",
                        "text": text, "finish_reason": "stop", "prompt_tokens": 10, "completion_tokens": 3,
                        "cached_prompt_tokens": 0, "latency_ms": 5.0, "cost_usd": 0.01, "served_by": "http://h",
                        "created_at": 1.0, "cache_write_tokens": 0, "usage_flag": None, "sent_at": 2.0,
                        "ttft_ms": 1.5, "itl_ms": [0.5, 0.25]}
    row.update(more)  # type: ignore[typeddict-item]
    return row


def test_cache_rows_are_the_answers_as_written_by_key(tmp_path: Path) -> None:
    written = [_response("k2", "two"), _response("k1", "one", sent_at=None, ttft_ms=None, itl_ms=None)]
    with Store(tmp_path / "c.duckdb") as store:
        store.cache.put_responses(written)
        assert store.cache.rows() == sorted(written, key=lambda r: r["key"])
        assert store.cache.rows(["k2", "absent"]) == [written[0]]
        assert store.cache.rows([]) == []


def test_request_rows_are_a_runs_ledger_rows_one_each(tmp_path: Path) -> None:
    rows = [RequestEntry(2, "eval", "t", "from_cache", "k1", "s1", 10, 3, 0, 0.0, 0.01, 4.0),
            RequestEntry(1, "eval", "t", "sent", "k1", "s1", 10, 3, 0, 0.01, 0.0, 5.0, 1, sent_at=2.0, ttft_ms=1.5),
            RequestEntry(1, "judge", "t", "sent", "k0", None, 7, 1, 0, 0.002, 0.0, 3.0, 2)]
    with Store(tmp_path / "c.duckdb") as store:
        store.runs.put_ledger_requests("run-a", rows)
        store.runs.put_ledger_requests("run-b", rows[:1])
        assert store.runs.request_rows("run-a") == [rows[2], rows[1], rows[0]]  # invocation, then key
        assert store.runs.request_rows("run-b") == rows[:1]
        assert store.runs.request_rows("none") == []


def test_prompts_are_the_prompts_as_sent_by_key(tmp_path: Path) -> None:
    with Store(tmp_path / "c.duckdb") as store:
        store.runs.put_prompts([("k1", "first prompt"), ("k2", "second, é")])
        assert store.runs.prompts() == {"k1": "first prompt", "k2": "second, é"}
        assert store.runs.prompts(["k2", "absent"]) == {"k2": "second, é"}
