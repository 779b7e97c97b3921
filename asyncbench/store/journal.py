"""A per-process journal of paid answers, so a crash loses only requests still in flight.

The store is written in batches, each opening the file (other processes share it between
batches), so an answer waits a few tens of milliseconds before it is in DuckDB — longer
when another process holds the file. Each paid answer (its cache row and its ledger row)
is therefore also appended to `<cache>.journal/<host>-<pid>-<n>.jsonl` the moment it
arrives: one line, flushed to the OS, which survives SIGKILL of the process. When a batch
is committed its journal file is renamed `*.jsonl.kept` (a new one takes the answers that
arrive meanwhile): out of replay's way, and kept as the copy of every paid answer that
`cache recover` rebuilds a damaged DuckDB file from. The next run on the cache replays the files of processes that are gone:
responses by key (a key stored is kept), ledger rows only where the same row is not already
stored, so a file renamed late is not counted twice.

The journal line is also how a paid answer reaches DuckDB: a batch is committed by DuckDB
reading the batch's journal file itself (`ingest`, read_json), so each answer — its cache
row, its ledger row and the prompt as sent — is serialised once, by `json.dumps` here, and
parsed natively; converting the same rows from Python values statement by statement cost
several times more CPU than the HTTP request that produced them (issue 27).
"""

from __future__ import annotations

import itertools
import json
import os
import socket
from pathlib import Path
from typing import IO

import orjson

from ..ledger import RequestEntry
from .connection import MAX_JSON_LINE, insert_missing
from .file import Store
from .prompt_files import PromptFile, write_whole
from .rows import LEDGER_COLUMNS, RESPONSE_COLUMNS, ResponseRow

# File numbers unique in the process: the runs of an eval set each keep a journal in one
# process, and one run's committed file must never be another's.
_NUMBERS = itertools.count(1)


def journal_dir(cache: Path) -> Path:
    return cache.with_name(cache.name + ".journal")


class Journal:
    """Append-only files of one process's answers, rotated at each committed batch."""

    def __init__(self, cache: Path, run_id: str) -> None:
        self.dir = journal_dir(cache)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run_id = run_id
        self._prefix = f"{socket.gethostname()}-{os.getpid()}-"
        self._fh: IO[bytes] | None = None
        self.lines = 0  # answers in the current file
        self.path = self._next()
        self.prompts = PromptFile(cache)

    def _next(self) -> Path:
        path = self.dir / f"{self._prefix}{next(_NUMBERS)}.jsonl"
        self._fh = path.open("ab", buffering=0)  # one write a line, none half-written (write_whole)
        self.lines = self._size = 0
        return path

    def append(self, response: ResponseRow, entry: RequestEntry, prompt: str | None = None) -> None:
        """One answer (with the prompt as sent, for the per-sample view: appended to the
        prompt file, the line says where), on disk (in the OS's hands) before this
        returns, the prompt before the line that points at it. Answers arrive one per
        event-loop turn, so deferring the flush to the turn's end saved ~2k of 20k flushes
        (~0.02 s) in a 20,000-answer run: not worth a weaker promise."""
        assert self._fh is not None
        at = None
        if prompt is not None:
            name, start, length = self.prompts.append(prompt)
            at = {"file": name, "start": start, "length": length}
        line = {"run_id": self.run_id, "response": response, "ledger": vars(entry), "prompt_at": at}
        try:  # orjson: ~1 µs where json.dumps took ~9
            data = orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
        except TypeError:  # what orjson refuses (an integer over 64 bits in a request's params) as before
            data = (json.dumps(line, ensure_ascii=False) + "\n").encode()
        write_whole(self._fh, data, self._size, self.path)
        self._size += len(data)
        self.lines += 1

    def rotate(self) -> Path | None:
        """Start a new file for what arrives next and return the old one (None: it holds
        nothing, and is kept for what comes); the old one is ingested, then kept by
        `done` once the batch holding its answers is committed."""
        if not self.lines:
            return None
        old = self.path
        if self._fh is not None:
            self._fh.close()
        self.path = self._next()
        return old

    @staticmethod
    def done(path: Path | None) -> None:
        """A file whose batch is committed: kept as `<name>.kept` (see `keep`)."""
        if path is not None:
            keep(path)

    def close(self) -> None:
        """At the end of a run (everything committed): remove the last, empty file."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self.prompts.close()
        self.done(self.path)


KEPT = ".kept"


def keep(path: Path) -> None:
    """A journal file whose answers are in the store, renamed out of `replay`'s way but
    kept: with the prompt files, the journal is a second copy of every paid answer and its
    ledger row, from which `cache recover` rebuilds what a damaged (truncated, half
    written) DuckDB file lost. About the store's size for short prompts (5,000 answers:
    5.4 MB beside 6.3 MB), small beside long prompts' files; an empty file is removed."""
    try:
        if path.stat().st_size:
            path.replace(path.with_name(path.name + KEPT))
            return
    except FileNotFoundError:
        return
    path.unlink(missing_ok=True)


def _alive(name: str) -> bool:
    """Whether the process that writes journal `<host>-<pid>-<n>` still runs."""
    host, _, pid = name.rpartition("-")[0].rpartition("-")
    if host != socket.gethostname():
        return True  # another machine's process: not ours to judge
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def replay(store: Store) -> int:
    """Write the journals of dead processes into the store, then keep them (`keep`).
    Returns the number of answers replayed (already stored ones included)."""
    folder = journal_dir(store.path)
    if not folder.is_dir():
        return 0
    files = [p for p in sorted(folder.glob("*.jsonl")) if not _alive(p.stem)]
    replayed = 0
    for path in files:
        with store.transaction():
            ingest(store, path, replay=True)
            (n,) = store.one(f"SELECT count(*) FROM {_lines(True)} WHERE response.key IS NOT NULL", [str(path)])
            replayed += int(n)
        keep(path)
    return replayed


def salvage(store: Store, folder: Path) -> int:
    """Every journal file in `folder`, kept or not yet replayed, into `store` (a cache
    being recovered): answers by key, ledger rows not already there. Returns the answers
    read (already stored ones included)."""
    salvaged = 0
    for path in sorted([*folder.glob(f"*.jsonl{KEPT}"), *folder.glob("*.jsonl")]):
        with store.transaction():
            ingest(store, path, replay=True)
            (n,) = store.one(f"SELECT count(*) FROM {_lines(True)} WHERE response.key IS NOT NULL", [str(path)])
            salvaged += int(n)
    return salvaged


_TYPES = {"key": "VARCHAR", "provider": "VARCHAR", "model": "VARCHAR", "endpoint": "VARCHAR",
          "request_json": "VARCHAR", "text": "VARCHAR", "finish_reason": "VARCHAR", "prompt_tokens": "BIGINT",
          "completion_tokens": "BIGINT", "cached_prompt_tokens": "BIGINT", "latency_ms": "DOUBLE",
          "cost_usd": "DOUBLE", "served_by": "VARCHAR", "created_at": "DOUBLE", "cache_write_tokens": "BIGINT",
          "invocation": "INTEGER", "purpose": "VARCHAR", "task": "VARCHAR", "source": "VARCHAR",
          "sample_id": "VARCHAR", "saved_usd": "DOUBLE", "attempts": "INTEGER", "usage_flag": "VARCHAR",
          "sent_at": "DOUBLE", "ttft_ms": "DOUBLE", "itl_ms": "DOUBLE[]"}


def _struct(columns: tuple[str, ...]) -> str:
    return "STRUCT(" + ", ".join(f"{c} {_TYPES[c]}" for c in columns) + ")"


# `prompt`: the prompt text itself, as journals of earlier versions carry it (replayed)
_LINE = (f"{{run_id: 'VARCHAR', response: '{_struct(RESPONSE_COLUMNS)}', ledger: '{_struct(LEDGER_COLUMNS)}', "
         "prompt_at: 'STRUCT(file VARCHAR, start BIGINT, length BIGINT)', prompt: 'VARCHAR'}")
_LEDGER = ", ".join(LEDGER_COLUMNS)
_SAME_ROW = " AND ".join(f"l.{c} IS NOT DISTINCT FROM j.ledger.{c}"
                         for c in ("invocation", "key", "purpose", "source", "sample_id"))


def ingest(store: Store, path: Path, replay: bool = False) -> None:
    """A journal file's answers into the store, inside the caller's transaction: DuckDB
    reads the file (every line whole: it was closed before this), inserts the cache rows
    (a key already stored is kept: `insert_missing`), the ledger rows and where the
    prompts are (prompt_files.py). A batch of this process is read once, into a temporary
    table. `replay`: the file of a process that died — its last line may be cut
    (skipped), a ledger row already stored (the batch was committed, the file not yet
    renamed) is not added twice, and an earlier version's line carries its prompt; read
    where each insert needs it rather than held: such lines kept in DuckDB's memory cost
    100+ MB of RSS on a run of 40 KB prompts."""
    con, file = store.con, [str(path)]
    lines = _lines(replay)
    if replay:
        source, params = f"{lines} j WHERE j.response.key IS NOT NULL", file
    else:
        con.execute(f"CREATE OR REPLACE TEMP TABLE journal_batch AS SELECT * FROM {lines} "
                    "WHERE response.key IS NOT NULL", file)
        source, params = "journal_batch j WHERE j.response.key IS NOT NULL", None  # a WHERE, as replay's
    insert_missing(con, "responses", RESPONSE_COLUMNS,
                   "SELECT " + ", ".join(f"j.response.{c} AS {c}" for c in RESPONSE_COLUMNS) + f" FROM {source}",
                   params, unique=not replay)  # this process's batch: one line per answer it paid
    once = f" AND NOT EXISTS (SELECT 1 FROM ledger_requests l WHERE l.run_id = j.run_id AND {_SAME_ROW})"
    con.execute(f"INSERT INTO ledger_requests (run_id, {_LEDGER}) SELECT j.run_id, "
                + ", ".join(f"j.ledger.{c}" for c in LEDGER_COLUMNS)
                + f" FROM {source}{once if replay else ''}", params)
    insert_missing(con, "prompt_refs", ("key", "file", "start", "length"),
                   "SELECT j.response.key AS key, j.prompt_at.file AS file, j.prompt_at.start AS start, "
                   f"j.prompt_at.length AS length FROM {source} AND j.prompt_at IS NOT NULL", params,
                   unique=not replay)
    if replay:
        insert_missing(con, "prompts", ("key", "prompt"),
                       f"SELECT j.response.key AS key, j.prompt AS prompt FROM {source} AND j.prompt IS NOT NULL",
                       params)
    else:
        con.execute("DROP TABLE journal_batch")


def _lines(replay: bool) -> str:
    """The journal file ($1) as DuckDB reads it; `replay`: a cut last line is skipped."""
    return (f"read_json($1, format='newline_delimited', columns={_LINE}, maximum_object_size={MAX_JSON_LINE}, "
            f"ignore_errors={'true' if replay else 'false'})")
