"""The store: one DuckDB file holding the response cache and the run record.

`Store(path)` opens (creating or migrating) the file and exposes what it keeps by kind:
`store.cache` (answers by request key, failures), `store.runs` (runs, samples, ledger
rows, invocations, prompts) and `store.batches` (provider batches). Every statement is a
named method of one of them, so no module outside this package writes SQL. A method
opens the file for itself, or joins the caller's `session()` / `transaction()`.
"""

from __future__ import annotations

import os
from pathlib import Path

from .batches import BatchRecord
from .cache import ResponseCache
from .connection import Connection
from .runs import RunRecord
from .schema import migrate


class Store(Connection):
    """A DuckDB file holding the cache, runs and results. Use as a context manager."""

    def __init__(self, path: str | Path, keep_open: bool = False) -> None:
        super().__init__(path, keep_open)
        with self.session():
            migrate(self)
        self.cache = ResponseCache(self)
        self.runs = RunRecord(self)
        self.batches = BatchRecord(self)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def default_cache_path() -> Path:
    """$ASYNCBENCH_CACHE, else ~/.cache/asyncbench/cache.duckdb (--cache overrides both)."""
    from ..datadir import cache_root

    return Path(os.environ["ASYNCBENCH_CACHE"]).expanduser() if os.environ.get("ASYNCBENCH_CACHE") \
        else cache_root() / "cache.duckdb"
