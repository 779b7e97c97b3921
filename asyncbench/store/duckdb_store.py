"""The response cache and run store: one DuckDB file.

- `responses`: successful answers keyed by sha256 of the canonical request. Only
  successes are served from cache; failures go to `failures` and are never answers.
- `runs` / `results`: one row per run and per (run, sample) — the sample ledger, with
  the status of each sample (see ledger.py) — so a re-run continues and `report` can
  show a run later.
- `ledger_requests` / `invocations`: one row per request a run needed and per
  invocation of it, appended and never rewritten: every count, token and dollar a run
  reports is summed from them (ledger.account).
- `meta`: the schema version, checked on open; a v1 file is migrated in place.

- `prompts`: the prompt of each request as sent (after truncation), once per request
  key however many runs send it: what the per-sample view shows beside the answer.

Several processes share one file: DuckDB lets one process at a time open it. Each
operation (or a `session()` grouping several) opens the file, works and closes it,
retrying for up to LOCK_WAIT_S while another process holds it. A run's store
(`keep_open=True`) keeps its connection between batches as long as nobody else wants the
file: a process that finds it locked creates `<cache>.wait`, and the holder closes at the
end of its current batch, or within 0.1 s when idle (`release_if_wanted`). Alone, a run
writes as fast as with one held connection; shared, each batch opens and closes the
file (bench/concurrent_writers.md). Every write commits before it returns.
Writes are batched into one columnar statement (row-by-row commits manage ~300 rows/s).
"""

from __future__ import annotations

import functools
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypedDict, TypeVar

from ..errors import UserError
from ..ledger import LEGACY_STATUSES, InvocationEntry, Ledger, RequestEntry, RequestGroup, SampleEntry, StatusCount

if TYPE_CHECKING:
    import duckdb

SCHEMA_VERSION = 4
# How long an operation waits for another process to release the file before giving up.
LOCK_WAIT_S = float(os.environ.get("ASYNCBENCH_LOCK_WAIT_S", "120"))

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS responses (
        key VARCHAR PRIMARY KEY, provider VARCHAR, model VARCHAR, endpoint VARCHAR,
        request_json VARCHAR, text VARCHAR, finish_reason VARCHAR,
        prompt_tokens BIGINT, completion_tokens BIGINT, cached_prompt_tokens BIGINT,
        latency_ms DOUBLE, cost_usd DOUBLE, served_by VARCHAR, created_at DOUBLE, cache_write_tokens BIGINT DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS failures (
        key VARCHAR, run_id VARCHAR, sample_id VARCHAR, kind VARCHAR, status INTEGER,
        message VARCHAR, attempts INTEGER, created_at DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY, benchmark VARCHAR, model VARCHAR, config_json VARCHAR,
        started_at DOUBLE, finished_at DOUBLE, status VARCHAR, summary_json VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS results (
        run_id VARCHAR, sample_id VARCHAR, task VARCHAR, purpose VARCHAR, key VARCHAR,
        status VARCHAR, score DOUBLE, prediction VARCHAR, cached BOOLEAN, error VARCHAR,
        prompt_tokens BIGINT, completion_tokens BIGINT, cached_prompt_tokens BIGINT,
        cost_usd DOUBLE, latency_ms DOUBLE, truncated_tokens BIGINT, meta_json VARCHAR,
        invocation INTEGER, references_json VARCHAR, PRIMARY KEY (run_id, sample_id, purpose))""",
    """CREATE TABLE IF NOT EXISTS ledger_requests (
        run_id VARCHAR, invocation INTEGER, purpose VARCHAR, task VARCHAR, source VARCHAR, key VARCHAR,
        sample_id VARCHAR, prompt_tokens BIGINT, completion_tokens BIGINT, cached_prompt_tokens BIGINT,
        cost_usd DOUBLE, saved_usd DOUBLE, latency_ms DOUBLE, attempts INTEGER, cache_write_tokens BIGINT DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS invocations (
        run_id VARCHAR, invocation INTEGER, started_at DOUBLE, wall_s DOUBLE, requests BIGINT, retries BIGINT,
        rate_limited BIGINT, transient_errors BIGINT, complete BOOLEAN, finished BOOLEAN, pid INTEGER,
        host VARCHAR, PRIMARY KEY (run_id, invocation))""",
    "CREATE TABLE IF NOT EXISTS prompts (key VARCHAR PRIMARY KEY, prompt VARCHAR)",
    # provider batches (runners/batch.py), recorded the moment they are created so that a
    # crashed or interrupted run re-attaches to them instead of submitting twice
    """CREATE TABLE IF NOT EXISTS batches (
        batch_id VARCHAR PRIMARY KEY, run_id VARCHAR, provider VARCHAR, model VARCHAR, endpoint VARCHAR,
        base_url VARCHAR, n_requests BIGINT, state VARCHAR, counts_json VARCHAR, submitted_at DOUBLE,
        updated_at DOUBLE, collected BOOLEAN)""",
    "CREATE TABLE IF NOT EXISTS batch_requests (batch_id VARCHAR, key VARCHAR, custom_id VARCHAR)",
]
LEDGER_COLUMNS = ("invocation", "purpose", "task", "source", "key", "sample_id", "prompt_tokens", "completion_tokens",
                  "cached_prompt_tokens", "cost_usd", "saved_usd", "latency_ms", "attempts", "cache_write_tokens")
INVOCATION_COLUMNS = ("invocation", "started_at", "wall_s", "requests", "retries", "rate_limited", "transient_errors",
                      "complete", "finished", "pid", "host")

class ResponseRow(TypedDict):
    """One answer as the cache stores it (the prompt itself only as its size)."""

    key: str
    provider: str
    model: str
    endpoint: str
    request_json: str
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    latency_ms: float
    cost_usd: float
    served_by: str
    created_at: float
    cache_write_tokens: int  # written to the provider's prompt cache (Anthropic; part of prompt_tokens)


class FailureRow(TypedDict):
    """One request that failed after its attempts (never served as an answer)."""

    key: str
    run_id: str
    sample_id: str | None
    kind: str
    status: int | None
    message: str
    attempts: int


RESPONSE_COLUMNS = ("key", "provider", "model", "endpoint", "request_json", "text", "finish_reason",
                    "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "latency_ms",
                    "cost_usd", "served_by", "created_at", "cache_write_tokens")
RESULT_COLUMNS = ("run_id", "sample_id", "task", "purpose", "key", "status", "score", "prediction",
                  "cached", "error", "prompt_tokens", "completion_tokens", "cached_prompt_tokens",
                  "cost_usd", "latency_ms", "truncated_tokens", "meta_json", "invocation", "references_json")
P = ParamSpec("P")
R = TypeVar("R")


def _in_session(method: Callable[Concatenate[Store, P], R]) -> Callable[Concatenate[Store, P], R]:
    """Run a Store method inside a session: its own connection, or the caller's open one."""
    @functools.wraps(method)
    def wrapper(self: Store, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.session():
            return method(self, *args, **kwargs)
    return wrapper


@dataclass
class CachedResponse:
    key: str
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    latency_ms: float
    cost_usd: float
    cache_write_tokens: int = 0


class Store:
    """A DuckDB file holding the cache, runs and results. Use as a context manager."""

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
        with self.session():
            self._migrate()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The open connection; only inside `session()` (every public method opens one)."""
        if self._con is None:
            raise RuntimeError("Store.con used outside Store.session()")
        return self._con

    @contextmanager
    def session(self) -> Iterator[Store]:
        """Hold the file open for a group of operations (reentrant; closed at the outer
        end). Keep sessions short: other processes wait for the file meanwhile."""
        with self._lock:
            if self._con is None:
                self._con = self._open()
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
                if self._depth == 0 and (not self.keep_open or self.wait_file.exists()):
                    self._release()

    @contextmanager
    def transaction(self) -> Iterator[Store]:
        """A session whose writes commit together (or not at all): one commit, one write
        of DuckDB's log, where each statement alone would commit (and write) its own."""
        with self.session():
            self.con.execute("BEGIN")
            try:
                yield self
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self.con.execute("COMMIT")

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
                con = duckdb.connect(str(self.path))
                if waited:
                    self.wait_file.unlink(missing_ok=True)
                return con
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise _corrupt(self.path, exc) from None
                if time.monotonic() > deadline:
                    raise UserError(
                        f"cache file {self.path} is in use by another process (not asyncbench, or one holding "
                        f"it for over {LOCK_WAIT_S:.0f} s); wait for it to finish or pass --cache OTHER.duckdb"
                    ) from None
            except duckdb.Error as exc:
                raise _corrupt(self.path, exc) from None
            waited = True
            self.wait_file.touch()  # asks a run that keeps the file open to let go
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.1)

    def _migrate(self) -> None:
        for stmt in _SCHEMA:
            self.con.execute(stmt)
        row = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        elif int(row[0]) > SCHEMA_VERSION:
            raise UserError(f"cache file {self.path} has schema v{row[0]}, newer than this asyncbench "
                            f"(v{SCHEMA_VERSION}); upgrade asyncbench or use another --cache")
        elif int(row[0]) < SCHEMA_VERSION:
            if int(row[0]) == 1:
                self._from_v1()
            if int(row[0]) <= 2:
                self._from_v2()
            self._from_v3()

    def _from_v2(self) -> None:
        """v3 adds each sample's references to `results` (`prompts` is created above)."""
        self.con.execute("ALTER TABLE results ADD COLUMN IF NOT EXISTS references_json VARCHAR")
        self.con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")

    def _from_v3(self) -> None:
        """v4 adds the tokens written to the provider's prompt cache (Anthropic bills them
        at 1.25x input) to `responses` and `ledger_requests`: 0 for older rows."""
        for table in ("responses", "ledger_requests"):
            self.con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS cache_write_tokens BIGINT DEFAULT 0")
        self.con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])

    def _from_v1(self) -> None:
        """v1 kept per-sample results and a summary per run, no ledger: each old run gets
        its sample statuses, one invocation (its last, as the summary recorded it) and the
        request rows its results imply (eval only: v1 did not keep judge requests apart)."""
        with self.transaction():
            con = self.con
            con.execute("ALTER TABLE results ADD COLUMN IF NOT EXISTS invocation INTEGER DEFAULT 1")
            con.execute("UPDATE results SET status = CASE WHEN status = 'ok' AND cached THEN 'from_cache' "
                        "WHEN status = 'ok' THEN 'answered' WHEN status = 'skipped' THEN 'skipped_budget' "
                        "ELSE status END")
            con.execute("INSERT INTO ledger_requests (run_id, invocation, purpose, task, source, key, sample_id, "
                        "prompt_tokens, completion_tokens, cached_prompt_tokens, cost_usd, saved_usd, latency_ms, "
                        "attempts) SELECT run_id, 1, purpose, task, CASE WHEN status = 'answered' "
                        "THEN 'sent' WHEN status = 'from_cache' THEN 'from_cache' WHEN status = 'failed' THEN 'failed' "
                        "ELSE 'skipped_budget' END, key, sample_id, prompt_tokens, completion_tokens, cached_prompt_tokens, "
                        "CASE WHEN status = 'answered' THEN cost_usd ELSE 0 END, "
                        "CASE WHEN status = 'from_cache' THEN cost_usd ELSE 0 END, latency_ms, 1 FROM results")
            for run_id, started, summary_json in con.execute("SELECT run_id, started_at, summary_json FROM runs").fetchall():
                old = json.loads(summary_json) if summary_json else {}
                con.execute("INSERT OR IGNORE INTO invocations VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, 0, '')",
                            [run_id, started, old.get("wall_s", 0.0), old.get("requests_sent", 0), old.get("retries", 0),
                             old.get("rate_limited", 0), old.get("transient_errors", 0),
                             bool(old) and not old.get("n_failed") and not old.get("n_skipped_budget"), bool(old)])
            con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")

    # -- responses -------------------------------------------------------------------
    @_in_session
    def lookup(self, keys: Iterable[str]) -> dict[str, CachedResponse]:
        """Cached answers for many keys in one query."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {}
        rows = self.con.execute(
            "SELECT key, text, finish_reason, prompt_tokens, completion_tokens, cached_prompt_tokens, "
            "latency_ms, cost_usd, coalesce(cache_write_tokens, 0) FROM responses WHERE key IN (SELECT unnest($1))", [keys]
        ).fetchall()
        return {r[0]: CachedResponse(*r) for r in rows}

    @_in_session
    def put_responses(self, rows: Sequence[ResponseRow] | Sequence[dict[str, Any]]) -> None:
        """Insert successful responses (one transaction); existing keys are kept."""
        if not rows:
            return
        now = time.time()
        columns = [[r.get(c, now if c == "created_at" else None) for r in rows] for c in RESPONSE_COLUMNS]
        self.con.execute(f"INSERT OR IGNORE INTO responses SELECT {_unnest(len(columns))}", columns)

    @_in_session
    def put_failures(self, rows: Sequence[FailureRow] | Sequence[dict[str, Any]]) -> None:
        if not rows:
            return
        now = time.time()
        self.con.executemany(
            "INSERT INTO failures VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [[r["key"], r.get("run_id"), r.get("sample_id"), r["kind"], r.get("status"), r["message"],
              r.get("attempts", 1), now] for r in rows],
        )

    # -- runs and results ------------------------------------------------------------
    @_in_session
    def start_run(self, run_id: str, benchmark: str, model: str, config: dict[str, Any]) -> None:
        self.con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, NULL, 'running', NULL) ON CONFLICT (run_id) DO UPDATE "
            "SET status = 'running', config_json = excluded.config_json",
            [run_id, benchmark, model, json.dumps(config, sort_keys=True), time.time()],
        )

    @_in_session
    def run_config(self, run_id: str) -> dict[str, Any] | None:
        row = self.con.execute("SELECT config_json FROM runs WHERE run_id = ?", [run_id]).fetchone()
        return json.loads(row[0]) if row else None

    @_in_session
    def finish_run(self, run_id: str, status: str, summary: dict[str, Any]) -> None:
        self.con.execute("UPDATE runs SET finished_at = ?, status = ?, summary_json = ? WHERE run_id = ?",
                         [time.time(), status, json.dumps(summary, sort_keys=True), run_id])

    # -- the ledger -------------------------------------------------------------------
    @_in_session
    def put_ledger_requests(self, run_id: str, rows: Sequence[RequestEntry]) -> None:
        """Append request rows (one transaction)."""
        if not rows:
            return
        columns: list[list[Any]] = [[run_id] * len(rows)]
        columns += [[getattr(r, c) for r in rows] for c in LEDGER_COLUMNS]
        self.con.execute(f"INSERT INTO ledger_requests SELECT {_unnest(len(columns))}", columns)

    @_in_session
    def put_invocation(self, run_id: str, inv: InvocationEntry) -> None:
        """Record an invocation when it starts, and again (the same row) when it ends."""
        self.con.execute(f"INSERT OR REPLACE INTO invocations VALUES ({', '.join('?' * (len(INVOCATION_COLUMNS) + 1))})",
                         [run_id, *(getattr(inv, c) for c in INVOCATION_COLUMNS)])

    @_in_session
    def ledger(self, run_id: str) -> Ledger:
        """A run's ledger as `ledger.account` reads it: sample statuses counted per task and
        request rows summed per (invocation, task, purpose, source) — GROUP BY queries over
        its rows — and its invocations, oldest first."""
        statuses = [StatusCount(*r) for r in self.con.execute(
            "SELECT task, status, count(*) FROM results WHERE run_id = ? AND purpose = 'eval' GROUP BY ALL",
            [run_id]).fetchall()]
        requests = [RequestGroup(*r) for r in self.con.execute(
            "SELECT invocation, task, purpose, source, count(*), sum(prompt_tokens), sum(completion_tokens), "
            "sum(cached_prompt_tokens), sum(cost_usd), sum(saved_usd), coalesce(sum(cache_write_tokens), 0) "
            "FROM ledger_requests WHERE run_id = ? "
            "GROUP BY ALL ORDER BY ALL", [run_id]).fetchall()]
        invocations = [InvocationEntry(*r) for r in self.con.execute(
            f"SELECT {', '.join(INVOCATION_COLUMNS)} FROM invocations WHERE run_id = ? ORDER BY invocation",
            [run_id]).fetchall()]
        return Ledger(statuses, requests, invocations)

    @_in_session
    def sample_entries(self, run_id: str) -> list[SampleEntry]:
        """A run's sample rows (eval), by sample id."""
        return [SampleEntry(sid, task, LEGACY_STATUSES.get(status, status), inv, error)
                for sid, task, status, inv, error in self.con.execute(
                    "SELECT sample_id, task, status, coalesce(invocation, 1), error FROM results "
                    "WHERE run_id = ? AND purpose = 'eval' ORDER BY sample_id", [run_id]).fetchall()]

    @_in_session
    def book_killed(self, run_id: str, gone: Callable[[InvocationEntry], bool]) -> None:
        """Book invocations whose process died without booking themselves (SIGKILL, a
        crash; Ctrl-C books itself): requests from their request rows' attempts, wall time
        to their last stored answer. `gone`: whether an unfinished invocation's process
        is gone (ledger.interrupted)."""
        for inv in self.ledger(run_id).invocations:
            if inv.finished or inv.requests or not gone(inv):
                continue
            requests, last = self._one(
                "SELECT coalesce(sum(l.attempts) FILTER (WHERE l.source IN ('sent', 'failed')), 0), max(r.created_at) "
                "FROM ledger_requests l LEFT JOIN responses r ON r.key = l.key AND l.source = 'sent' "
                "WHERE l.run_id = ? AND l.invocation = ?", [run_id, inv.invocation])
            inv.requests = int(requests)
            inv.wall_s = round(max(0.0, float(last) - inv.started_at), 3) if last is not None else inv.wall_s
            self.put_invocation(run_id, inv)

    @_in_session
    def samples_seen(self, run_id: str) -> int:
        """The samples a run has booked so far: its sample rows, and those a running (or
        interrupted) invocation has requests for but has not recorded yet."""
        row = self.con.execute(
            "SELECT count(DISTINCT sample_id) FROM (SELECT sample_id FROM results WHERE run_id = $1 AND purpose = 'eval' "
            "UNION ALL SELECT sample_id FROM ledger_requests WHERE run_id = $1 AND purpose = 'eval' "
            "AND sample_id IS NOT NULL)", [run_id]).fetchone()
        return int(row[0]) if row else 0

    @_in_session
    def paid_keys(self, run_id: str) -> dict[str, tuple[int, str | None]]:
        """Request keys a run paid for: the (first) invocation that paid, and the sample
        the request was sent for (None for a judge or prior request)."""
        rows = self.con.execute("SELECT key, min(invocation), arg_min(sample_id, invocation) FROM ledger_requests "
                                "WHERE run_id = ? AND source = 'sent' GROUP BY key", [run_id]).fetchall()
        return {k: (int(i), s) for k, i, s in rows}

    # -- provider batches ---------------------------------------------------------------
    def put_batch(self, batch_id: str, run_id: str, provider: str, model: str, endpoint: str, base_url: str,
                  keys: Sequence[str], submitted_at: float) -> None:
        """Record a submitted batch and the request keys in it (one transaction)."""
        with self.transaction():
            # the same batch again (recovered from a journal after the store got it): once
            self.con.execute("DELETE FROM batch_requests WHERE batch_id = ?", [batch_id])
            self.con.execute(
                "INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, 'submitted', '{}', ?, ?, false)",
                [batch_id, run_id, provider, model, endpoint, base_url, len(keys), submitted_at, submitted_at])
            self.con.execute(f"INSERT INTO batch_requests SELECT {_unnest(3)}",
                             [[batch_id] * len(keys), list(keys), list(keys)])

    @_in_session
    def update_batch(self, batch_id: str, state: str, counts: dict[str, int], collected: bool = False) -> None:
        self.con.execute("UPDATE batches SET state = ?, counts_json = ?, updated_at = ?, collected = ? "
                         "WHERE batch_id = ?", [state, json.dumps(counts, sort_keys=True), time.time(), collected,
                                                batch_id])

    @_in_session
    def open_batches(self, provider: str, endpoint: str, keys: Sequence[str]) -> list[tuple[str, str, float, list[str]]]:
        """Batches not yet collected that hold any of `keys` (any run's: a request key is
        the same request whoever submitted it): (batch id, base URL, submitted at, the
        keys among `keys`), oldest first."""
        if not keys:
            return []
        rows = self.con.execute(
            "SELECT b.batch_id, b.base_url, b.submitted_at, list(r.key) FROM batches b JOIN batch_requests r "
            "USING (batch_id) WHERE NOT b.collected AND b.provider = $1 AND b.endpoint = $2 "
            "AND r.key IN (SELECT unnest($3)) GROUP BY ALL ORDER BY b.submitted_at",
            [provider, endpoint, list(keys)]).fetchall()
        return [(str(b), str(u), float(t), list(k)) for b, u, t, k in rows]

    @_in_session
    def batches(self, run_id: str | None = None) -> list[dict[str, Any]]:
        cols = ("batch_id", "run_id", "provider", "model", "n_requests", "state", "counts_json", "submitted_at",
                "updated_at", "collected")
        where = " WHERE run_id = ?" if run_id else ""
        cur = self.con.execute(f"SELECT {', '.join(cols)} FROM batches{where} ORDER BY submitted_at",
                               [run_id] if run_id else [])
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    @_in_session
    def put_prompts(self, rows: Sequence[tuple[str, str]]) -> None:
        """Store (request key, prompt as sent) pairs; a key already stored is kept."""
        if rows:
            self.con.execute(f"INSERT OR IGNORE INTO prompts SELECT {_unnest(2)}",
                             [[k for k, _ in rows], [p for _, p in rows]])

    @_in_session
    def put_results(self, rows: list[dict[str, Any]]) -> None:
        """Upsert per-sample results of a run (one transaction)."""
        if not rows:
            return
        columns = [[r.get(c) for r in rows] for c in RESULT_COLUMNS]
        self.con.execute(f"INSERT OR REPLACE INTO results SELECT {_unnest(len(columns))}", columns)

    @_in_session
    def results(self, run_id: str) -> list[dict[str, Any]]:
        cur = self.con.execute(f"SELECT {', '.join(RESULT_COLUMNS)} FROM results WHERE run_id = ? ORDER BY sample_id", [run_id])
        return [dict(zip(RESULT_COLUMNS, r)) for r in cur.fetchall()]

    @_in_session
    def find_run(self, wanted: str) -> str:
        """The run id that `wanted` is, or is the unique prefix of."""
        ids = [r[0] for r in self.con.execute("SELECT run_id FROM runs WHERE starts_with(run_id, ?) ORDER BY started_at",
                                                [wanted]).fetchall()]
        if not ids:
            raise UserError(f"no run {wanted!r} in {self.path}; `asyncbench cache runs` lists the stored runs")
        if len(ids) > 1:
            raise UserError(f"run id prefix {wanted!r} matches {len(ids)} runs in {self.path}; give more characters")
        return str(ids[0])

    @_in_session
    def runs(self) -> list[dict[str, Any]]:
        cols = ("run_id", "benchmark", "model", "started_at", "finished_at", "status", "summary_json")
        cur = self.con.execute(f"SELECT {', '.join(cols)} FROM runs ORDER BY started_at")
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    # -- maintenance -----------------------------------------------------------------
    def _one(self, sql: str, params: list[Any] | None = None) -> tuple[Any, ...]:
        """The single row of an aggregate query (which always has one)."""
        row = self.con.execute(sql, params or []).fetchone()
        assert row is not None, sql
        return tuple(row)

    @_in_session
    def stats(self) -> dict[str, Any]:
        n, tok_in, tok_out, cost = self._one(
            "SELECT count(*), coalesce(sum(prompt_tokens),0), coalesce(sum(completion_tokens),0), "
            "coalesce(sum(cost_usd),0) FROM responses")
        by_model = self.con.execute(
            "SELECT provider || ':' || model, count(*), coalesce(sum(cost_usd),0) FROM responses GROUP BY 1 ORDER BY 2 DESC"
        ).fetchall()
        return {
            "path": str(self.path),
            "schema_version": SCHEMA_VERSION,
            "responses": n,
            "prompt_tokens": int(tok_in),
            "completion_tokens": int(tok_out),
            "cost_usd": float(cost),
            "failures": self._one("SELECT count(*) FROM failures")[0],
            "runs": self._one("SELECT count(*) FROM runs")[0],
            "by_model": {m: {"responses": c, "cost_usd": float(u)} for m, c, u in by_model},
        }

    @_in_session
    def clear(self, model: str | None = None, runs: bool = False) -> int:
        """Delete cached responses (of one provider:model, or all) and their failures; with
        `runs`, also every run's history (runs, samples, ledger, invocations)."""
        if model:
            n = self._one("SELECT count(*) FROM responses WHERE provider || ':' || model = ?", [model])[0]
            self.con.execute("DELETE FROM responses WHERE provider || ':' || model = ?", [model])
        else:
            n = self._one("SELECT count(*) FROM responses")[0]
            self.con.execute("DELETE FROM responses")
            self.con.execute("DELETE FROM failures")
        if runs:
            for table in ("results", "runs", "ledger_requests", "invocations"):
                self.con.execute(f"DELETE FROM {table}")
        return int(n)

    @_in_session
    def export(self, out: Path, fmt: str) -> int:
        """Write the responses to `out` through DuckDB's relation API (parquet) or line by
        line (JSON lines): the path never becomes part of an SQL statement."""
        import duckdb

        out = Path(out)
        if not out.parent.is_dir():
            raise UserError(f"cannot write {out}: folder {out.parent} does not exist")
        relation = self.con.cursor().table("responses")  # a cursor of its own: no pending result
        try:
            if fmt == "parquet":
                relation.write_parquet(str(out))
            else:
                columns = relation.columns
                cursor = self.con.execute("SELECT * FROM responses ORDER BY key")
                with out.open("w", encoding="utf-8") as fh:
                    while rows := cursor.fetchmany(10_000):
                        fh.writelines(json.dumps(dict(zip(columns, row)), ensure_ascii=False, default=str) + "\n"
                                      for row in rows)
        except (OSError, duckdb.Error) as exc:
            raise UserError(f"cannot write {out}: {getattr(exc, 'strerror', None) or str(exc).splitlines()[0]}") from None
        row = self.con.execute("SELECT count(*) FROM responses").fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        """Release a kept connection (a `keep_open` store at the end of its run)."""
        with self._lock:
            if self._depth == 0:
                self._release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class StoredPlan:
    """What a dry run reads about a run already in the cache: which of its requests are
    answered, and what its judge and prior calls were."""

    cached: set[str]  # of the keys asked about, those the cache answers
    complete: bool  # the run's last invocation finished with every sample settled
    calls: dict[str, tuple[int, int]]  # judge/prior -> (distinct keys the run asked, how many are cached)
    excluded: set[str]  # sample ids the run excluded by its benchmark's rule (not data defects)


def stored_plan(path: Path, run_id: str, keys: list[str]) -> StoredPlan | None:
    """Read-only (the dry run creates no file): the cache's answers among `keys` and the
    stored run's judge and prior calls; None when there is no cache or another process
    holds it."""
    import duckdb

    if not path.is_file():
        return None
    try:
        check_cache_path(path)
        con = duckdb.connect(str(path), read_only=True)
    except (duckdb.Error, UserError):
        return None
    try:
        cached = {r[0] for r in con.execute("SELECT key FROM responses WHERE key IN (SELECT unnest($1))",
                                            [keys]).fetchall()}
        try:
            last = con.execute("SELECT finished, complete FROM invocations WHERE run_id = ? ORDER BY invocation DESC "
                               "LIMIT 1", [run_id]).fetchone()
            calls = {p: (int(n), int(c)) for p, n, c in con.execute(
                "SELECT l.purpose, count(DISTINCT l.key), count(DISTINCT r.key) FROM ledger_requests l "
                "LEFT JOIN responses r USING (key) WHERE l.run_id = ? AND l.purpose IN ('judge', 'prior') "
                "GROUP BY ALL", [run_id]).fetchall()}
            excluded = {r[0] for r in con.execute(
                "SELECT sample_id FROM results WHERE run_id = ? AND purpose = 'eval' AND status = 'excluded' "
                "AND NOT starts_with(coalesce(error, ''), 'malformed data row')", [run_id]).fetchall()}
        except duckdb.Error:  # an older file without the ledger tables
            last, calls, excluded = None, {}, set()
    finally:
        con.close()
    return StoredPlan(cached, bool(last and last[0] and last[1]), calls, excluded)


# Data-file suffixes DuckDB would open as a database of that format (a JSON file becomes
# a read-only view: nothing written persists, and every re-run pays again).
_DATA_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".parquet", ".txt", ".gz", ".zst")
# A DuckDB file's main header: 8 bytes of checksum, then these 4 (duckdb storage format).
_MAGIC_AT, _MAGIC = 8, b"DUCK"


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


def _corrupt(path: Path, exc: Exception) -> UserError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return UserError(f"cache file {path} cannot be read ({first}); copy what is readable into a new file with "
                     f"`asyncbench cache recover --cache {path} --out NEW.duckdb`, or pass --cache OTHER.duckdb")


TABLES = ("responses", "failures", "results", "runs", "ledger_requests", "invocations", "prompts")


def recover(broken: Path, out: Path) -> dict[str, int]:
    """Copy every readable row of every table of a damaged cache into a new one, table by
    table and in chunks, so one unreadable block loses only its own rows. Returns rows
    copied per table."""
    import duckdb

    if out.exists():
        raise UserError(f"{out} exists; recover into a new file")
    try:
        src = duckdb.connect(str(broken), read_only=True)
    except duckdb.Error as exc:
        raise UserError(f"nothing in {broken} is readable ({str(exc).splitlines()[0]}); "
                        "delete it and run again to rebuild the cache from the APIs") from None
    copied: dict[str, int] = {}
    with Store(out).session() as dst:
        for table in TABLES:
            copied[table] = 0
            try:
                # names from our schema; an older file lacks later columns (and tables)
                columns = [c for c in dst.con.table(table).columns if c in src.table(table).columns]
                cursor = src.execute(f"SELECT {', '.join(columns)} FROM {table}")
                while rows := cursor.fetchmany(5_000):
                    with dst.transaction():
                        dst.con.executemany(f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) "
                                            f"VALUES ({', '.join('?' * len(columns))})", rows)
                    copied[table] += len(rows)
            except duckdb.Error:
                continue  # the rest of this table is unreadable; keep what was copied
    src.close()
    return copied


def _unnest(n: int) -> str:
    """A columnar batch insert: one list parameter per column, unnested in parallel — one
    statement per batch, no per-row round trips and no pyarrow import on the hot path."""
    return ", ".join(f"unnest(${i + 1})" for i in range(n))


def default_cache_path() -> Path:
    """$ASYNCBENCH_CACHE, else ~/.cache/asyncbench/cache.duckdb (--cache overrides both)."""
    import os

    from ..datadir import cache_root

    return Path(os.environ["ASYNCBENCH_CACHE"]).expanduser() if os.environ.get("ASYNCBENCH_CACHE") \
        else cache_root() / "cache.duckdb"
