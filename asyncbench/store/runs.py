"""The run record: runs (`runs`), their samples (`results`), the ledger's request and
invocation rows (`ledger_requests`, `invocations`) and the prompts as sent (`prompts`).

Request and invocation rows are appended and never rewritten: every count, token and
dollar a run reports is summed from them (ledger.account). A sample row is the run's
status of that sample, replaced when a later invocation settles it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import UserError
from ..ledger import (
    LEGACY_STATUSES,
    SETTLED,
    FlaggedAnswer,
    InvocationEntry,
    Ledger,
    Produced,
    RequestEntry,
    RequestGroup,
    SampleEntry,
    StatusCount,
    stored_status,
)
from ..serving import Measured
from ..types import SampleStatus
from .cache import usage_flag_of
from .connection import Part, in_session, insert_missing, unnest
from .prompt_files import read_prompts
from .rows import INVOCATION_COLUMNS, LEDGER_COLUMNS, RESULT_COLUMNS, RUN_COLUMNS, ResultRow, RunRow, SampleRow


def _float(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]


def _int(v: object) -> int | None:
    return None if v is None else int(v)  # type: ignore[call-overload]


def _bool(v: object) -> bool | None:
    return None if v is None else bool(v)


# What each numeric column's values are made before DuckDB reads a numpy column of them
# (an object column takes its type from its values: a True score is not a DOUBLE to it)
_NUMERIC: dict[str, Callable[[object], object]] = {
    "score": _float, "cost_usd": _float, "latency_ms": _float, "cached": _bool, "prompt_tokens": _int,
    "completion_tokens": _int, "cached_prompt_tokens": _int, "truncated_tokens": _int, "invocation": _int}
_RESULT_TYPES = [_NUMERIC.get(c) for c in RESULT_COLUMNS]

# Sample rows per statement: the columns of a statement are copied into DuckDB whole.
WRITE_CHUNK = 4096

# One row per sample: the prompt (once per request key), what this run paid for the
# sample's eval request (its ledger rows), and for a shared sample the one it shares with.
_SAMPLES = """
SELECT r.run_id, r.sample_id, r.task, r.status, r.score, r.prediction, r.meta_json, r.references_json, {prompt},
       coalesce(a.prompt_tokens, 0), coalesce(a.completion_tokens, 0), coalesce(a.usd, 0), coalesce(a.saved, 0),
       r.latency_ms, coalesce(a.attempts, 0), coalesce(r.truncated_tokens, 0), r.error, r.key, t.twin, a.flag,
       coalesce(a.cached, 0), a.ttft, a.e2e, CASE WHEN a.ttft IS NOT NULL THEN rs.itl_ms END,
       CASE WHEN a.sent_key IS NOT NULL AND a.sent_at IS NOT NULL
                 THEN CASE WHEN a.ttft IS NOT NULL THEN 'streamed' ELSE 'unstreamed' END
            WHEN a.sent_key IS NOT NULL
                 THEN CASE WHEN EXISTS (SELECT 1 FROM batch_requests b WHERE b.key = a.sent_key) THEN 'batch'
                           ELSE 'not measured' END
            WHEN a.hit THEN 'cache hit' END, {ref}
FROM results r{join}
LEFT JOIN (SELECT sample_id, sum(cost_usd) AS usd, sum(saved_usd) AS saved,
                  sum(prompt_tokens) FILTER (WHERE source = 'sent') AS prompt_tokens,
                  sum(completion_tokens) FILTER (WHERE source = 'sent') AS completion_tokens,
                  sum(cached_prompt_tokens) FILTER (WHERE source = 'sent') AS cached,
                  sum(attempts) FILTER (WHERE source IN ('sent', 'failed')) AS attempts,
                  min(usage_flag) FILTER (WHERE source IN ('sent', 'from_cache')) AS flag,
                  max(key) FILTER (WHERE source = 'sent') AS sent_key,
                  max(sent_at) FILTER (WHERE source = 'sent') AS sent_at,
                  max(ttft_ms) FILTER (WHERE source = 'sent') AS ttft,
                  max(latency_ms) FILTER (WHERE source = 'sent' AND sent_at IS NOT NULL) AS e2e,
                  bool_or(source = 'from_cache') AS hit
           FROM ledger_requests WHERE run_id = $run AND purpose = 'eval' GROUP BY sample_id) a
       ON a.sample_id = r.sample_id
LEFT JOIN responses rs ON rs.key = a.sent_key
LEFT JOIN (SELECT key, min(sample_id) AS twin FROM results
           WHERE run_id = $run AND purpose = 'eval' AND status IN ('answered', 'from_cache') GROUP BY key) t
       ON r.status = 'shared' AND t.key = r.key
WHERE r.run_id = $run AND r.purpose = 'eval'{where}
ORDER BY r.task, r.sample_id
"""


@dataclass(frozen=True)
class SamplePage:
    """One page of a run's samples (a viewer's): `limit` from `offset`, of those with
    `status` (a ledger status) whose id, prediction or references contain `search`."""

    offset: int = 0
    limit: int = 50
    status: str | None = None
    search: str | None = None


def _sample_filter(run_id: str, task: str | None, failed: bool,
                   page: SamplePage | None) -> tuple[str, dict[str, object]]:
    """The WHERE clause (after the run's) and parameters that select samples."""
    where, params = "", dict[str, object](run=run_id)
    if task is not None:
        where += " AND r.task = $task"
        params["task"] = task
    if failed:
        where += f" AND r.status NOT IN ({', '.join(repr(s.value) for s in sorted(SETTLED))})"
    if page is not None and page.status:
        where += " AND r.status = $status"
        params["status"] = page.status
    if page is not None and page.search:
        where += (" AND (contains(r.sample_id, $q) OR contains(coalesce(r.prediction, ''), $q) "
                  "OR contains(coalesce(r.references_json, ''), $q))")
        params["q"] = page.search
    return where, params


class RunRecord(Part):
    """Runs, their samples, ledger rows and prompts."""

    # -- runs ---------------------------------------------------------------------------
    @in_session
    def start_run(self, run_id: str, benchmark: str, model: str, config: Mapping[str, object]) -> None:
        self.con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, NULL, 'running', NULL) ON CONFLICT (run_id) DO UPDATE "
            "SET status = 'running', config_json = excluded.config_json",
            [run_id, benchmark, model, json.dumps(config, sort_keys=True), time.time()],
        )

    @in_session
    def summary_json(self, run_id: str) -> str | None:
        """The run's stored summary, as JSON text (None: no such run, or none stored yet)."""
        row = self.con.execute("SELECT summary_json FROM runs WHERE run_id = ?", [run_id]).fetchone()
        return str(row[0]) if row and row[0] is not None else None

    @in_session
    def config_json(self, run_id: str) -> str | None:
        """The settings a run was started with, as JSON text (None: no such run)."""
        row = self.con.execute("SELECT config_json FROM runs WHERE run_id = ?", [run_id]).fetchone()
        return str(row[0]) if row else None

    @in_session
    def finish_run(self, run_id: str, status: str, summary: Mapping[str, object]) -> None:
        """The run's status and summary, in run.json's order (a re-run booked from the
        store, reuse.py, writes the same run.json from it)."""
        self.con.execute("UPDATE runs SET finished_at = ?, status = ?, summary_json = ? WHERE run_id = ?",
                         [time.time(), status, json.dumps(summary), run_id])

    @in_session
    def find_run(self, wanted: str) -> str:
        """The run id that `wanted` is, or is the unique prefix of."""
        ids = [r[0] for r in self.con.execute("SELECT run_id FROM runs WHERE starts_with(run_id, ?) ORDER BY started_at",
                                                [wanted]).fetchall()]
        if not ids:
            raise UserError(f"no run {wanted!r} in {self.db.path}; `asyncbench cache runs` lists the stored runs")
        if len(ids) > 1:
            raise UserError(f"run id prefix {wanted!r} matches {len(ids)} runs in {self.db.path}; give more characters")
        return str(ids[0])

    @in_session
    def runs(self) -> list[RunRow]:
        """Every run, oldest first."""
        cur = self.con.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs ORDER BY started_at")
        return [RunRow(*r) for r in cur.fetchall()]

    @in_session
    def run(self, run_id: str) -> RunRow:
        """One run by its exact id (find_run resolves a prefix)."""
        row = self.con.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            raise UserError(f"no run {run_id!r} in {self.db.path}; `asyncbench cache runs` lists the stored runs")
        return RunRow(*row)

    @in_session
    def clear(self) -> None:
        """Delete every run's history (runs, samples, ledger, invocations)."""
        for table in ("results", "runs", "ledger_requests", "invocations", "reusable"):
            self.con.execute(f"DELETE FROM {table}")

    # -- the ledger -----------------------------------------------------------------------
    @in_session
    def put_ledger_requests(self, run_id: str, rows: Sequence[RequestEntry]) -> None:
        """Append request rows (one transaction)."""
        if not rows:
            return
        columns: list[list[object]] = [[run_id] * len(rows)]
        columns += [[getattr(r, c) for r in rows] for c in LEDGER_COLUMNS]
        self.con.execute(f"INSERT INTO ledger_requests SELECT {unnest(len(columns))}", columns)

    @in_session
    def put_ledger_requests_once(self, rows: Sequence[tuple[str, RequestEntry]]) -> None:
        """Append (run id, request row)s that are not stored yet: a journal replayed after
        its batch was committed adds nothing twice."""
        for run_id, entry in rows:
            values = [run_id, *(getattr(entry, c) for c in LEDGER_COLUMNS)]
            self.con.execute(
                f"INSERT INTO ledger_requests SELECT {', '.join('?' * len(values))} WHERE NOT EXISTS ("
                "SELECT 1 FROM ledger_requests WHERE run_id = ? AND invocation = ? AND key = ? AND purpose = ? "
                "AND source = ? AND sample_id IS NOT DISTINCT FROM ?)",
                [*values, run_id, entry.invocation, entry.key, entry.purpose, entry.source, entry.sample_id])

    @in_session
    def request_rows(self, run_id: str) -> list[RequestEntry]:
        """A run's request rows as appended, one per row (ledger() sums them): by
        invocation, key, purpose, source and sample."""
        cur = self.con.execute(f"SELECT {', '.join(LEDGER_COLUMNS)} FROM ledger_requests WHERE run_id = ? "
                               "ORDER BY invocation, key, purpose, source, sample_id NULLS FIRST", [run_id])
        return [RequestEntry(*r) for r in cur.fetchall()]

    @in_session
    def put_invocation(self, run_id: str, inv: InvocationEntry) -> None:
        """Record an invocation when it starts, and again (the same row) when it ends."""
        self.con.execute(f"INSERT OR REPLACE INTO invocations VALUES ({', '.join('?' * (len(INVOCATION_COLUMNS) + 1))})",
                         [run_id, *(getattr(inv, c) for c in INVOCATION_COLUMNS)])

    @in_session
    def put_live_counts(self, run_id: str, invocation: int, requests: int, retries: int, rate_limited: int,
                        transient_errors: int) -> None:
        """A running invocation's request counts so far (its row's figures until it ends),
        so that another process (`asyncbench view`) sees them while it runs."""
        self.con.execute("UPDATE invocations SET requests = ?, retries = ?, rate_limited = ?, transient_errors = ? "
                         "WHERE run_id = ? AND invocation = ? AND NOT coalesce(finished, false)",
                         [requests, retries, rate_limited, transient_errors, run_id, invocation])

    @in_session
    def progress(self, run_id: str) -> dict[str, float | int | None]:
        """What a run's ledger holds so far, live: eval requests by what became of them
        (answered, from the cache, shared with an identical request of the run, failed:
        the words of the run's summary), USD paid for every purpose, request latency
        p50/p95 (ms), and its invocations' request counts."""
        answered, cached, shared, failed, usd, p50, p95 = self.db.one(
            "SELECT count(*) FILTER (WHERE source = 'sent' AND purpose = 'eval'), "
            "count(*) FILTER (WHERE source = 'from_cache' AND purpose = 'eval'), "
            "count(*) FILTER (WHERE source = 'shared' AND purpose = 'eval'), "
            "count(*) FILTER (WHERE source = 'failed' AND purpose = 'eval'), coalesce(sum(cost_usd), 0), "
            "quantile_cont(latency_ms, 0.5) FILTER (WHERE source = 'sent'), "
            "quantile_cont(latency_ms, 0.95) FILTER (WHERE source = 'sent') "
            "FROM ledger_requests WHERE run_id = ?", [run_id])
        requests, retries, limited = self.db.one(
            "SELECT coalesce(sum(requests), 0), coalesce(sum(retries), 0), coalesce(sum(rate_limited), 0) "
            "FROM invocations WHERE run_id = ?", [run_id])
        return {"answered": int(answered), "from_cache": int(cached), "shared": int(shared), "failed": int(failed),
                "usd": float(usd),
                "latency_p50_ms": _float(p50), "latency_p95_ms": _float(p95), "requests": int(requests),
                "retries": int(retries), "rate_limited": int(limited)}

    @in_session
    def served_by_endpoint(self, run_id: str) -> dict[str, int]:
        """The answers each endpoint served the run, every invocation and purpose: its
        request rows sent, by the endpoint their cached response names."""
        rows = self.con.execute(
            "SELECT r.served_by, count(*) FROM ledger_requests l JOIN responses r ON r.key = l.key "
            "WHERE l.run_id = ? AND l.source = 'sent' AND r.served_by IS NOT NULL GROUP BY ALL", [run_id]).fetchall()
        return {str(url): int(n) for url, n in rows}

    @in_session
    def produced(self, run_id: str) -> Produced:
        """ledger.Produced of a run from its request rows: per request key, what the run
        paid where it sent it (any invocation), else what its cached answer cost when paid
        (one from-cache row: a re-run reads the same answer again and again)."""
        row = self.con.execute(
            "WITH k AS (SELECT bool_or(source = 'sent') AS paid, "
            "coalesce(sum(cost_usd) FILTER (WHERE source = 'sent'), 0) AS usd, "
            "coalesce(sum(prompt_tokens) FILTER (WHERE source = 'sent'), 0) AS pt, "
            "coalesce(sum(completion_tokens) FILTER (WHERE source = 'sent'), 0) AS ct, "
            "coalesce(max(saved_usd) FILTER (WHERE source = 'from_cache'), 0) AS c_usd, "
            "coalesce(max(prompt_tokens) FILTER (WHERE source = 'from_cache'), 0) AS c_pt, "
            "coalesce(max(completion_tokens) FILTER (WHERE source = 'from_cache'), 0) AS c_ct "
            "FROM ledger_requests WHERE run_id = ? AND source IN ('sent', 'from_cache') GROUP BY key) "
            "SELECT coalesce(sum(CASE WHEN paid THEN usd ELSE c_usd END), 0), "
            "coalesce(sum(CASE WHEN paid THEN pt ELSE c_pt END), 0), coalesce(sum(CASE WHEN paid THEN ct ELSE c_ct END), 0), "
            "coalesce(sum(CASE WHEN paid THEN 0 ELSE c_usd END), 0) FROM k", [run_id]).fetchone()
        usd, pt, ct, cached = row if row is not None else (0.0, 0, 0, 0.0)
        return Produced(round(float(usd), 6), int(pt), int(ct), round(float(cached), 6))

    @in_session
    def ledger(self, run_id: str) -> Ledger:
        """A run's ledger as `ledger.account` reads it: sample statuses counted per task and
        request rows summed per (invocation, task, purpose, source) — GROUP BY queries over
        its rows — and its invocations, oldest first."""
        statuses = [StatusCount(*r) for r in self.con.execute(
            "SELECT task, status, count(*) FROM results WHERE run_id = ? AND purpose = 'eval' GROUP BY ALL",
            [run_id]).fetchall()]
        # coalesced: rows stored before usage was checked (claims.py) may hold NULL counts
        requests = [RequestGroup(*r) for r in self.con.execute(
            "SELECT invocation, task, purpose, source, count(*), coalesce(sum(prompt_tokens), 0), "
            "coalesce(sum(completion_tokens), 0), coalesce(sum(cached_prompt_tokens), 0), coalesce(sum(cost_usd), 0), "
            "coalesce(sum(saved_usd), 0), coalesce(sum(cache_write_tokens), 0) "
            "FROM ledger_requests WHERE run_id = ? "
            "GROUP BY ALL ORDER BY ALL", [run_id]).fetchall()]
        invocations = [InvocationEntry(*r) for r in self.con.execute(
            f"SELECT {', '.join(INVOCATION_COLUMNS)} FROM invocations WHERE run_id = ? ORDER BY invocation",
            [run_id]).fetchall()]
        return Ledger(statuses, requests, invocations, self.flagged(run_id))

    @in_session
    def flagged(self, run_id: str) -> list[FlaggedAnswer]:
        """The run's answers whose usage was booked at our bound (claims.py), one per
        request key (a re-run reads the same answer back: one answer, one flag), in sample
        order; a row stored before usage was checked, with NULL counts, is one too."""
        rows = self.con.execute(
            "SELECT min(l.sample_id), min(l.task), min(l.purpose), "
            f"min(coalesce(l.usage_flag, {usage_flag_of('r')})) AS flag "
            "FROM ledger_requests l LEFT JOIN responses r ON r.key = l.key "
            "WHERE l.run_id = ? AND l.source IN ('sent', 'from_cache') GROUP BY l.key "
            "HAVING flag IS NOT NULL ORDER BY 1 NULLS LAST, 2", [run_id]).fetchall()
        return [FlaggedAnswer(str(s or "-"), str(t), str(p), str(f)) for s, t, p, f in rows]

    @in_session
    def sample_entries(self, run_id: str, unsettled: bool = False) -> list[SampleEntry]:
        """A run's sample rows (eval), by sample id; `unsettled`: only those not settled,
        and the excluded ones (what a run's summary lists), so a run of many samples does
        not read every row back."""
        where = ""
        if unsettled:
            kept = sorted(s.value for s in SETTLED if s != SampleStatus.EXCLUDED)
            kept += sorted(old for old, new in LEGACY_STATUSES.items() if new in kept)
            where += f" AND status NOT IN ({', '.join(repr(s) for s in kept)})"
        return [SampleEntry(sid, task, stored_status(status), inv, error)
                for sid, task, status, inv, error in self.con.execute(
                    "SELECT sample_id, task, status, coalesce(invocation, 1), error FROM results "
                    f"WHERE run_id = $run AND purpose = 'eval'{where} ORDER BY sample_id", {"run": run_id}).fetchall()]

    @in_session
    def stored_results(self, run_id: str, ids: Sequence[str]) -> dict[str, ResultRow]:
        """The stored sample rows of `ids` (eval), by sample id: what a re-run compares its
        rows with, to write only those that changed."""
        cur = self.con.execute(f"SELECT {', '.join(RESULT_COLUMNS)} FROM results WHERE run_id = $run "
                               "AND purpose = 'eval' AND sample_id IN (SELECT unnest($ids))",
                               {"run": run_id, "ids": list(ids)})
        return {r.sample_id: r for r in (ResultRow(*row) for row in cur.fetchall())}

    @in_session
    def book_killed(self, run_id: str, gone: Callable[[InvocationEntry], bool]) -> None:
        """Book invocations whose process died without booking themselves (SIGKILL, a
        crash; Ctrl-C books itself): requests from their request rows' attempts, wall time
        to their last stored answer, or the live counts it last stored where those are
        higher (put_live_counts: taken as a batch is written, they may trail its rows). One
        that booked itself has its wall time (an interrupted one: unfinished, yet booked).
        `gone`: whether an unfinished invocation's process is gone (ledger.interrupted)."""
        for inv in self.ledger(run_id).invocations:
            if inv.finished or inv.wall_s or not gone(inv):
                continue
            requests, last = self.db.one(
                "SELECT coalesce(sum(l.attempts) FILTER (WHERE l.source IN ('sent', 'failed')), 0), max(r.created_at) "
                "FROM ledger_requests l LEFT JOIN responses r ON r.key = l.key AND l.source = 'sent' "
                "WHERE l.run_id = ? AND l.invocation = ?", [run_id, inv.invocation])
            inv.requests = max(inv.requests or 0, int(requests))
            inv.wall_s = round(max(0.0, float(last) - inv.started_at), 3) if last is not None else inv.wall_s
            self.put_invocation(run_id, inv)

    @in_session
    def samples_seen(self, run_id: str) -> int:
        """The samples a run has booked so far: its sample rows, and those a running (or
        interrupted) invocation has requests for but has not recorded yet."""
        row = self.con.execute(
            "SELECT count(DISTINCT sample_id) FROM (SELECT sample_id FROM results WHERE run_id = $1 AND purpose = 'eval' "
            "UNION ALL SELECT sample_id FROM ledger_requests WHERE run_id = $1 AND purpose = 'eval' "
            "AND sample_id IS NOT NULL)", [run_id]).fetchone()
        return int(row[0]) if row else 0

    @in_session
    def paid_keys(self, run_id: str, keys: Sequence[str] | None = None) -> dict[str, tuple[int, str | None]]:
        """Request keys a run paid for: the (first) invocation that paid, and the sample
        the request was sent for (None for a judge or prior request); `keys`: of those only."""
        where, params = "", dict[str, object](run=run_id)
        if keys is not None:
            where, params["keys"] = " AND key IN (SELECT unnest($keys))", list(keys)
        rows = self.con.execute("SELECT key, min(invocation), arg_min(sample_id, invocation) FROM ledger_requests "
                                f"WHERE run_id = $run AND source = 'sent'{where} GROUP BY key", params).fetchall()
        return {k: (int(i), s) for k, i, s in rows}

    # -- a re-run booked from the store (reuse.py) -----------------------------------------
    @in_session
    def mark_reusable(self, run_id: str, invocation: int, fingerprint: str) -> None:
        """Record that `invocation` completed the run from what `fingerprint` names."""
        self.con.execute("INSERT OR REPLACE INTO reusable VALUES (?, ?, ?)", [run_id, invocation, fingerprint])

    @in_session
    def reusable(self, run_id: str) -> tuple[int, str] | None:
        """The run's last complete invocation and its fingerprint, if one was recorded."""
        row = self.con.execute("SELECT invocation, fingerprint FROM reusable WHERE run_id = ?", [run_id]).fetchone()
        return (int(row[0]), str(row[1])) if row else None

    @in_session
    def rebookable(self, run_id: str, invocation: int) -> bool:
        """Whether a cache-first pass would book `invocation`'s request rows again as they
        are, a paid answer as read from the cache: nothing failed or skipped, no batch
        discount (a cache hit's sample row carries the list price), every answer still in
        the cache, and not both a paid answer and a shared one (a sample sharing an answer
        paid in an earlier window would read it from the cache, as its own, next time)."""
        sent, shared, other, discounted, missing = self.db.one(
            "SELECT count(*) FILTER (WHERE source = 'sent'), count(*) FILTER (WHERE source = 'shared'), "
            "count(*) FILTER (WHERE source NOT IN ('sent', 'from_cache', 'shared')), "
            "count(*) FILTER (WHERE source = 'sent' AND saved_usd <> 0), "
            "count(*) FILTER (WHERE source IN ('sent', 'from_cache') AND r.key IS NULL) "
            "FROM ledger_requests l LEFT JOIN responses r ON r.key = l.key "
            "WHERE l.run_id = ? AND l.invocation = ?", [run_id, invocation])
        return not (other or discounted or missing or (sent and shared))

    @in_session
    def rebook(self, run_id: str, last: int, invocation: int, excluded: bool) -> list[float]:
        """Book `last`'s request rows again as `invocation`'s, each answer read from the
        cache as run/generate.py books a hit (what it cost when paid, its stored latency),
        the shared ones shared; `excluded`: the excluded sample rows are this invocation's
        (a listed source books them each time). Returns the cache hits' latencies."""
        self.con.execute(
            "INSERT INTO ledger_requests SELECT l.run_id, $new, l.purpose, l.task, "
            "CASE WHEN l.source = 'shared' THEN 'shared' ELSE 'from_cache' END, l.key, l.sample_id, "
            "CASE WHEN l.source = 'shared' THEN 0 ELSE coalesce(r.prompt_tokens, 0) END, "
            "CASE WHEN l.source = 'shared' THEN 0 ELSE coalesce(r.completion_tokens, 0) END, "
            "CASE WHEN l.source = 'shared' THEN 0 ELSE coalesce(r.cached_prompt_tokens, 0) END, 0.0, "
            "CASE WHEN l.source = 'shared' THEN 0.0 ELSE coalesce(r.cost_usd, 0.0) END, "
            "CASE WHEN l.source = 'shared' THEN NULL ELSE r.latency_ms END, 0, 0, "
            f"CASE WHEN l.source = 'shared' THEN NULL ELSE {usage_flag_of('r')} END, NULL, NULL "
            "FROM ledger_requests l LEFT JOIN responses r ON r.key = l.key AND l.source <> 'shared' "
            "WHERE l.run_id = $run AND l.invocation = $last", {"run": run_id, "last": last, "new": invocation})
        if excluded:
            self.con.execute("UPDATE results SET invocation = ? WHERE run_id = ? AND purpose = 'eval' "
                             "AND status = 'excluded'", [invocation, run_id])
        return [float(x) for (x,) in self.con.execute(
            "SELECT latency_ms FROM ledger_requests WHERE run_id = ? AND invocation = ? AND source = 'from_cache' "
            "AND latency_ms IS NOT NULL", [run_id, invocation]).fetchall()]

    # -- serving latency (serving.py) ------------------------------------------------------
    @in_session
    def measured(self, run_id: str) -> list[Measured]:
        """The run's eval requests sent live and timed, every invocation's, with their
        sample's meta (for its length bin) and their answer's inter-token gaps."""
        rows = self.con.execute(
            "SELECT l.sample_id, r.meta_json, coalesce(l.prompt_tokens, 0), coalesce(l.cached_prompt_tokens, 0), "
            "coalesce(l.completion_tokens, 0), l.latency_ms, l.sent_at, l.ttft_ms, "
            "CASE WHEN l.ttft_ms IS NOT NULL THEN s.itl_ms END "
            "FROM ledger_requests l "
            "LEFT JOIN results r ON r.run_id = l.run_id AND r.sample_id = l.sample_id AND r.purpose = 'eval' "
            "LEFT JOIN responses s ON s.key = l.key "
            "WHERE l.run_id = $run AND l.purpose = 'eval' AND l.source = 'sent' AND l.sent_at IS NOT NULL "
            "AND l.latency_ms IS NOT NULL ORDER BY l.sent_at", {"run": run_id}).fetchall()
        return [Measured(*r) for r in rows]

    @in_session
    def not_measured(self, run_id: str) -> dict[str, int]:
        """The run's eval answers without a timing of its own, by why: read from the
        cache (paid by another run), batch results, sent before timings were kept."""
        hits, batch, old = self.con.execute(
            "WITH sent AS (SELECT key, sent_at FROM ledger_requests WHERE run_id = $run AND purpose = 'eval' "
            "AND source = 'sent') "
            "SELECT (SELECT count(DISTINCT key) FROM ledger_requests WHERE run_id = $run AND purpose = 'eval' "
            "        AND source = 'from_cache' AND key NOT IN (SELECT key FROM sent)), "
            "(SELECT count(*) FROM sent WHERE sent_at IS NULL "
            "        AND key IN (SELECT key FROM batch_requests)), "
            "(SELECT count(*) FROM sent WHERE sent_at IS NULL "
            "        AND key NOT IN (SELECT key FROM batch_requests))", {"run": run_id}).fetchone() or (0, 0, 0)
        return {"from cache": int(hits), "batch": int(batch), "sent before timings were kept": int(old)}

    @in_session
    def sent_in(self, run_id: str, invocation: int, keys: Sequence[str]) -> set[str]:
        """Those of `keys` that `invocation` of the run sent (and paid for)."""
        return {str(k) for (k,) in self.con.execute(
            "SELECT DISTINCT key FROM ledger_requests WHERE run_id = $run AND invocation = $inv AND source = 'sent' "
            "AND key IN (SELECT unnest($keys))", {"run": run_id, "inv": invocation, "keys": list(keys)}).fetchall()}

    # -- samples and prompts --------------------------------------------------------------
    @in_session
    def put_prompts(self, rows: Sequence[tuple[str, str]]) -> None:
        """Store (request key, prompt as sent) pairs; a key already stored is kept."""
        if rows:
            insert_missing(self.con, "prompts", ("key", "prompt"), "SELECT unnest($1) AS key, unnest($2) AS prompt",
                           [[k for k, _ in rows], [p for _, p in rows]])

    @in_session
    def prompts(self, keys: Sequence[str] | None = None) -> dict[str, str | None]:
        """The prompt as sent of each request key (of `keys`, or every one stored): from
        the prompts table or the cache's prompt files (None: its file is gone)."""
        where, params = ("", []) if keys is None else (" WHERE key IN (SELECT unnest($1))", [list(keys)])
        texts: dict[str, str | None] = {str(k): str(p) for k, p in self.con.execute(f"SELECT key, prompt FROM prompts{where}",
                                                                params).fetchall()}
        refs = {str(k): (str(f), int(s), int(n)) for k, f, s, n in self.con.execute(
            f"SELECT key, file, start, length FROM prompt_refs{where}", params).fetchall()}
        found = read_prompts(self.db.path, refs.values())
        return {**{k: found.get(at) for k, at in refs.items()}, **texts}

    @in_session
    def put_results(self, rows: Sequence[ResultRow], new: bool = False) -> None:
        """Upsert per-sample results of a run (one transaction). `new`: none of these
        samples has a row yet (the first invocation of a run writing each sample once),
        so a plain INSERT of numpy columns does: ~4 µs a row against ~19 for the upsert
        of Python lists, whose conflict check against the key is most of it
        (bench/raw_client_ratio.md)."""
        if not rows:
            return
        for lo in range(0, len(rows), WRITE_CHUNK):  # one chunk's columns in memory at a time
            chunk = rows[lo:lo + WRITE_CHUNK]
            if new:
                import numpy as np

                self.con.register("new_results", {c: np.array([_as(getattr(r, c)) for r in chunk] if _as else
                                                              [getattr(r, c) for r in chunk], dtype=object)
                                                  for c, _as in zip(RESULT_COLUMNS, _RESULT_TYPES)})
                try:
                    self.con.execute(f"INSERT INTO results SELECT {', '.join(RESULT_COLUMNS)} FROM new_results")
                finally:
                    self.con.unregister("new_results")
                continue
            columns = [[getattr(r, c) for r in chunk] for c in RESULT_COLUMNS]
            # an upsert: the rows these replace go first, in one transaction with the insert
            # (results has no key index: schema.py v7)
            with self.db.transaction():
                self.con.execute("DELETE FROM results USING (SELECT unnest($1) AS run_id, unnest($2) AS sample_id, "
                                 "unnest($3) AS purpose) n WHERE results.run_id = n.run_id "
                                 "AND results.sample_id = n.sample_id AND results.purpose = n.purpose",
                                 [columns[RESULT_COLUMNS.index(c)] for c in ("run_id", "sample_id", "purpose")])
                self.con.execute(f"INSERT INTO results SELECT {unnest(len(columns))}", columns)

    @in_session
    def results(self, run_id: str) -> list[ResultRow]:
        """A run's sample rows (every purpose), by sample id."""
        cur = self.con.execute(f"SELECT {', '.join(RESULT_COLUMNS)} FROM results WHERE run_id = ? ORDER BY sample_id",
                               [run_id])
        return [ResultRow(*r) for r in cur.fetchall()]

    @in_session
    def samples(self, run_id: str, task: str | None = None, failed: bool = False,
                prompts: bool = True, page: SamplePage | None = None) -> list[SampleRow]:
        """A run's eval samples with prompt, cost and twin, by task and sample id (as
        text); `task`: that task only; `failed`: only those not settled; `prompts=False`:
        the prompt column NULL (not read); `page`: that page of the samples it selects."""
        where, params = _sample_filter(run_id, task, failed, page)
        query = _SAMPLES.format(where=where, prompt="p.prompt" if prompts else "NULL",
                                ref="f.file, f.start, f.length" if prompts else "NULL, NULL, NULL",
                                join="\nLEFT JOIN prompts p ON p.key = r.key\nLEFT JOIN prompt_refs f ON f.key = r.key"
                                if prompts else "")
        if page is not None:
            query += f"LIMIT {int(page.limit)} OFFSET {int(page.offset)}\n"
        rows = self.con.execute(query, params).fetchall()
        # the prompts kept in the cache's prompt files (their text NULL here), each file read once
        refs = {i: (str(r[-3]), int(r[-2]), int(r[-1])) for i, r in enumerate(rows) if r[8] is None and r[-3] is not None}
        texts = read_prompts(self.db.path, refs.values())
        return [SampleRow._make((*r[:8], texts.get(refs[i]) if i in refs else r[8], *r[9:-3]))
                for i, r in enumerate(rows)]

    @in_session
    def count_samples(self, run_id: str, task: str | None = None, page: SamplePage | None = None) -> int:
        """How many eval samples `samples(run_id, task, page=page)` pages through."""
        where, params = _sample_filter(run_id, task, False, page)
        row = self.con.execute(f"SELECT count(*) FROM results r WHERE r.run_id = $run AND r.purpose = 'eval'{where}",
                               params).fetchone()
        return int(row[0]) if row else 0

    @in_session
    def scored(self, run_id: str) -> list[tuple[str, str, float, str | None, str | None]]:
        """(task, sample id, score, prediction, meta JSON) of a run's settled, scored
        samples: what a comparison of two runs reads of them."""
        return [(str(t), str(i), float(sc), pr, m) for t, i, sc, pr, m in self.con.execute(
            "SELECT task, sample_id, score, prediction, meta_json FROM results WHERE run_id = $run AND purpose = 'eval' "
            f"AND score IS NOT NULL AND status IN ({', '.join(repr(s.value) for s in sorted(SETTLED))})",
            {"run": run_id}).fetchall()]

    @in_session
    def tasks(self, run_id: str) -> list[str]:
        """The tasks a run has samples of, by name."""
        return [str(t) for (t,) in self.con.execute(
            "SELECT DISTINCT task FROM results WHERE run_id = ? AND purpose = 'eval' ORDER BY 1", [run_id]).fetchall()]
