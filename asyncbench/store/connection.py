"""The DuckDB file and its lifecycle: opening it (waiting while another process holds
it), sessions, transactions, and letting go of it when another process asks.

Several processes share one file: DuckDB lets one process at a time open it. Each
operation (or a `session()` grouping several) opens the file, works and closes it,
retrying for up to LOCK_WAIT_S while another process holds it. A run's store
(`keep_open=True`) keeps its connection between batches as long as nobody else wants the
file: a process that finds it locked creates `<cache>.wait`, and the holder closes at the
end of its current batch, or within 0.1 s when idle (`release_if_wanted`). Alone, a run
writes as fast as with one held connection; shared, each batch opens and closes the
file (bench/concurrent_writers.md). Every write commits before it returns.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ..errors import UserError

if TYPE_CHECKING:
    import duckdb

# A run's store (keep_open) makes small writes and point lookups: one DuckDB thread (with
# one per core the batches' JSON reads allocated per-thread buffers: a run of 40 KB prompts
# peaked 390 MB, 300 with one), and a memory limit, so that the blocks its lookups scan
# stay few whatever else the shared cache holds (schema.py v7): a 20k run into a cache of
# 1M other answers peaked 275 MB without one, 179 MB with 48 MB, 154 MB into an empty
# cache (bench/memory_cache_size.md). A journal line may then be at most MAX_JSON_LINE bytes (DuckDB's JSON reader allocates
# twice that under the limit: journal.py).
RUN_MEMORY_LIMIT_MB = 64
RUN_CONFIG: dict[str, str | bool | int | float | list[str]] = {"threads": 1, "memory_limit": f"{RUN_MEMORY_LIMIT_MB}MB"}
MAX_JSON_LINE = RUN_MEMORY_LIMIT_MB // 4 * 2**20
# How long an operation waits for another process to release the file before giving up.
LOCK_WAIT_S = float(os.environ.get("ASYNCBENCH_LOCK_WAIT_S", "120"))
# Data-file suffixes DuckDB would open as a database of that format (a JSON file becomes
# a read-only view: nothing written persists, and every re-run pays again).
_DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".parquet", ".txt", ".gz", ".zst")
# A DuckDB file's main header: 8 bytes of checksum, then these 4 (duckdb storage format).
_MAGIC_AT, _MAGIC = 8, b"DUCK"

P = ParamSpec("P")
R = TypeVar("R")


class Connection:
    """One DuckDB file, opened per session (or kept open while nobody else waits)."""

    def __init__(self, path: str | Path, keep_open: bool = False) -> None:
        self.path = Path(path).expanduser()
        self.keep_open = keep_open
        self.wait_file = self.path.with_name(self.path.name + ".wait")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create the cache's folder {self.path.parent}: {exc.strerror or exc} "
                            "(is part of that path a file?); pass --cache PATH.duckdb in a writable folder") from None
        if self.path.is_dir():
            raise UserError(f"cache path {self.path} is a folder; pass --cache {self.path / 'cache.duckdb'}")
        check_cache_path(self.path)
        self._lock = threading.RLock()  # one thread at a time uses the open connection
        self._con: duckdb.DuckDBPyConnection | None = None
        self._depth = 0
        self._in_transaction = False

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The open connection; only inside `session()` (every part's method opens one)."""
        if self._con is None:
            raise RuntimeError("Connection.con used outside session()")
        return self._con

    @contextmanager
    def session(self) -> Iterator[None]:
        """Hold the file open for a group of operations (reentrant; closed at the outer
        end). Keep sessions short: other processes wait for the file meanwhile."""
        with self._lock:
            if self._con is None:
                self._con = self._open()
            self._depth += 1
            try:
                yield
            except Exception as exc:  # a truncated file's missing blocks, a full disk
                if (failed := io_failed(self.path, exc)) is not None:
                    raise failed from None
                raise
            finally:
                self._depth -= 1
                if self._depth == 0 and (not self.keep_open or self.wait_file.exists()):
                    self._release()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A session whose writes commit together (or not at all): one commit, one write
        of DuckDB's log, where each statement alone would commit (and write) its own.
        Reentrant: inside another transaction it is part of that one."""
        with self.session():
            if self._in_transaction:
                yield
                return
            self.con.execute("BEGIN")
            self._in_transaction = True
            try:
                yield
            except BaseException:
                with contextlib.suppress(Exception):  # a failed write may have ended it already
                    self.con.execute("ROLLBACK")
                raise
            finally:
                self._in_transaction = False
            self.con.execute("COMMIT")

    def one(self, sql: str, params: list[object] | None = None) -> tuple[Any, ...]:
        """The single row of an aggregate query (which always has one)."""
        row = self.con.execute(sql, params or []).fetchone()
        assert row is not None, sql
        return tuple(row)

    def _release(self) -> None:
        con, self._con = self._con, None
        if con is not None:
            con.close()

    def release_if_wanted(self) -> None:
        """Close the kept connection if another process waits for the file (called by
        the run's writer every 0.1 s, so an idle run does not keep others waiting)."""
        if self._con is not None and self.wait_file.exists():
            with self._lock:
                if self._depth == 0:
                    self._release()

    def _open(self) -> duckdb.DuckDBPyConnection:
        """Connect, waiting (with jittered backoff) while another process holds the file."""
        import duckdb

        deadline = time.monotonic() + LOCK_WAIT_S
        delay, waited = 0.005, False
        while True:
            try:
                con = duckdb.connect(str(self.path), config=RUN_CONFIG if self.keep_open else {})
                if waited:
                    self.wait_file.unlink(missing_ok=True)
                return con
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise corrupt(self.path, exc) from None
                if time.monotonic() > deadline:
                    raise UserError(
                        f"cache file {self.path} is in use by another process (not asyncbench, or one holding "
                        f"it for over {LOCK_WAIT_S:.0f} s); wait for it to finish or pass --cache OTHER.duckdb"
                    ) from None
            except duckdb.Error as exc:
                raise corrupt(self.path, exc) from None
            waited = True
            self.wait_file.touch()  # asks a run that keeps the file open to let go
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.1)

    def close(self) -> None:
        """Release a kept connection (a `keep_open` store at the end of its run)."""
        with self._lock:
            if self._depth == 0:
                self._release()


class Part:
    """A store part (the response cache, the run record, the batches): named methods over
    the tables it keeps, each in a session of the shared file."""

    def __init__(self, db: Connection) -> None:
        self.db = db

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        return self.db.con


PartT = TypeVar("PartT", bound=Part)


def in_session(method: Callable[Concatenate[PartT, P], R]) -> Callable[Concatenate[PartT, P], R]:
    """Run a part's method inside a session: its own connection, or the caller's open one."""
    @functools.wraps(method)
    def wrapper(self: PartT, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.db.session():
            return method(self, *args, **kwargs)
    return wrapper


def unnest(n: int) -> str:
    """A columnar batch insert: one list parameter per column, unnested in parallel — one
    statement per batch, no per-row round trips and no pyarrow import on the hot path.
    Row-by-row commits manage ~300 rows/s."""
    return ", ".join(f"unnest(${i + 1})" for i in range(n))


def insert_missing(con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str], source: str,
                   params: object = None, key: str = "key", unique: bool = False) -> None:
    """INSERT the rows of `source` (a query yielding `columns`) whose `key` `table` lacks,
    one row per key: what a primary key's INSERT OR IGNORE did, without the index that
    DuckDB holds whole in memory (schema.py, v7). The table's keys are found by a semi-join
    built on the incoming batch (small) and probed by a scan of the table's key column,
    whose blocks stay evictable; inside the write transaction (one writer per file) no
    other process can add a key between the check and the insert. `unique`: `source`
    holds each key once (a journal batch: one line per paid answer), so no window is
    needed to keep one row per key."""
    cols = ", ".join(columns)
    once = "" if unique else f" QUALIFY row_number() OVER (PARTITION BY {key}) = 1"
    con.execute(f"WITH incoming AS ({source}), present AS (SELECT {key} FROM {table} "
                f"WHERE {key} IN (SELECT {key} FROM incoming)) "
                f"INSERT INTO {table} ({cols}) SELECT {cols} FROM incoming "
                f"WHERE {key} NOT IN (SELECT {key} FROM present){once}", params)


def check_cache_path(path: Path) -> None:
    """A cache path is a DuckDB file or absent: never a data file DuckDB would open as
    another format, nor a file of something else."""
    if path.suffix.lower() in _DATA_SUFFIXES:
        raise UserError(f"cache path {path} names a {path.suffix} file, not a DuckDB cache; pass --cache "
                        f"{path.with_suffix('.duckdb')} (a cache path must be a DuckDB file or absent)")
    if not path.is_file():
        return
    try:
        with path.open("rb") as fh:
            head = fh.read(_MAGIC_AT + len(_MAGIC))
    except OSError as exc:
        raise UserError(f"cannot read cache file {path}: {exc.strerror or exc}") from None
    if head[_MAGIC_AT:] != _MAGIC:
        raise UserError(f"cache file {path} is not a DuckDB file (no DuckDB header); pass --cache NEW.duckdb, "
                        f"or if it is a damaged cache run `asyncbench cache recover --cache {path} --out NEW.duckdb`")


def io_failed(path: Path, exc: Exception) -> UserError | None:
    """DuckDB could not read or write the file mid-run (a full disk, or a damaged file) as
    one line; None for any other error."""
    import duckdb

    text = str(exc)
    if isinstance(exc, (duckdb.IOException, duckdb.TransactionException)) and (
            "No space left" in text or "Disk quota" in text):
        return UserError(f"cannot write cache file {path}: the disk is full; the answers paid so far are kept (the "
                         "cache and its journal): free some space and run the same command again")
    return corrupt(path, exc) if isinstance(exc, duckdb.IOException) else None


def corrupt(path: Path, exc: Exception) -> UserError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return UserError(f"cache file {path} cannot be read ({first}); copy what is readable into a new file with "
                     f"`asyncbench cache recover --cache {path} --out NEW.duckdb`, or pass --cache OTHER.duckdb")
