"""What a dry run reads about a run already in the cache: read-only, creating no file,
and nothing when another process holds the file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from .connection import check_cache_path


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
                                            [keys]).fetchall()} if keys else set()
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

