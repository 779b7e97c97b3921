"""Write throughput of the shared cache (responses/s): today's design, where each batch
opens the file, writes and closes it (so other processes can use it between batches),
against the earlier single writer that held one connection for the whole run; one and
two processes; plus the journal's cost per answer.

    .venv/bin/python bench/concurrent_writers.py [--rows 6000] [--batch 64]

Rows are realistic cache rows (a ~1 KB answer, a request JSON); batches are the engine
writer's (responses + ledger rows in one opening). Results: bench/concurrent_writers.md.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from asyncbench.ledger import RequestEntry
from asyncbench.store import Store
from asyncbench.store.journal import Journal


def _batch(tag: str, start: int, n: int) -> tuple[list[dict[str, object]], list[RequestEntry]]:
    rows, ledger = [], []
    for i in range(start, start + n):
        key = f"{tag}-{i:08d}"
        rows.append({"key": key, "provider": "openai", "model": tag, "endpoint": "e", "request_json": json.dumps(
            {"max_tokens": 128, "prompt_chars": 40000}), "text": "answer " * 150, "finish_reason": "stop",
            "prompt_tokens": 10000, "completion_tokens": 150, "cached_prompt_tokens": 0, "latency_ms": 900.0,
            "cost_usd": 0.001, "served_by": "http://x", "created_at": time.time()})
        ledger.append(RequestEntry(1, "eval", "t", "sent", key, f"s{i}", 10000, 150, 0, 0.001, 0.0, 900.0, 1))
    return rows, ledger


def write(path: str, tag: str, rows: int, batch: int, held: bool, keep_open: bool = True) -> float:
    """Seconds to write `rows` answers in batches; `held`: one connection throughout;
    else a session per batch, as the run's writer does (`keep_open`: as a run's store)."""
    store = Store(path, keep_open=keep_open)
    t0 = time.perf_counter()
    if held:
        with store.session():
            for start in range(0, rows, batch):
                r, led = _batch(tag, start, batch)
                store.cache.put_responses(r)
                store.runs.put_ledger_requests("run", led)
    else:
        for start in range(0, rows, batch):
            r, led = _batch(tag, start, batch)
            with store.session():
                store.cache.put_responses(r)
                store.runs.put_ledger_requests("run", led)
    return time.perf_counter() - t0


def _child(args: tuple[str, str, int, int]) -> float:
    return write(*args, held=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        held = write(f"{tmp}/held.duckdb", "a", a.rows, a.batch, held=True)
        one = write(f"{tmp}/one.duckdb", "a", a.rows, a.batch, held=False)
        shared = write(f"{tmp}/shared.duckdb", "a", a.rows, a.batch, held=False, keep_open=False)
        t0 = time.perf_counter()
        with multiprocessing.get_context("spawn").Pool(2) as pool:
            pool.map(_child, [(f"{tmp}/two.duckdb", tag, a.rows, a.batch) for tag in ("a", "b")])
        two = time.perf_counter() - t0
        journal = Journal(Path(tmp) / "j.duckdb", "run")
        rows, ledger = _batch("j", 0, a.rows)
        t0 = time.perf_counter()
        for r, e in zip(rows, ledger):
            journal.append(r, e)  # type: ignore[arg-type]
        per_answer_us = (time.perf_counter() - t0) / a.rows * 1e6
        journal.close()
    print(f"rows {a.rows}, batches of {a.batch}")
    print(f"single writer, one held connection:   {a.rows / held:8.0f} responses/s")
    print(f"run's store alone (kept open while nobody waits): {a.rows / one:8.0f} responses/s ({held / one:.2f}x)")
    print(f"open-write-close per batch, 1 process: {a.rows / shared:8.0f} responses/s ({held / shared:.2f}x)")
    print(f"2 processes on one file (each releases when the other waits): {2 * a.rows / two:8.0f} responses/s in all")
    print(f"journal append (flushed line) per answer: {per_answer_us:.1f} us")


if __name__ == "__main__":
    main()
