"""The response cache: answers by request key (`responses`), and the requests that
failed (`failures`), which are kept for the record and never served as answers."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import cast

from ..atomic import open_replacing, replacing
from ..errors import UserError
from .connection import Part, in_session, insert_missing
from .rows import RESPONSE_COLUMNS, CachedResponse, CacheStats, FailureRow, ModelStats, ResponseRow
from .schema import SCHEMA_VERSION

# A row stored before usage was checked (claims.py) whose counts did not fit a BIGINT
# (a server that claimed 1e300 tokens) holds NULL: read as 0 tokens, and flagged.
_NULL_FLAG = "usage out of bounds: the cache row has no token counts (stored before usage was checked): booked as 0"


def usage_flag_of(row: str = "") -> str:
    """SQL for a `responses` row's flag as a lookup reads it (`row`: the table's alias)."""
    at = f"{row}." if row else ""
    nulls = " OR ".join(f"{at}{c} IS NULL" for c in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens"))
    return f"coalesce({at}usage_flag, CASE WHEN {at}key IS NOT NULL AND ({nulls}) THEN '{_NULL_FLAG}' END)"


class ResponseCache(Part):
    """Lookups and writes of answers; writes are one columnar statement per batch."""

    @in_session
    def lookup(self, keys: Iterable[str]) -> dict[str, CachedResponse]:
        """Cached answers for many keys in one query."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {}
        rows = self.con.execute(
            "SELECT key, text, finish_reason, coalesce(prompt_tokens, 0), coalesce(completion_tokens, 0), "
            "coalesce(cached_prompt_tokens, 0), latency_ms, coalesce(cost_usd, 0), coalesce(cache_write_tokens, 0), "
            f"{usage_flag_of()} "
            "FROM responses WHERE key IN (SELECT unnest($1))", [keys]
        ).fetchall()
        return {r[0]: CachedResponse(*r) for r in rows}

    @in_session
    def served_by(self, keys: Sequence[str]) -> dict[str, str]:
        """The endpoint that served each of `keys` (those cached and attributed)."""
        if not keys:
            return {}
        rows = self.con.execute("SELECT key, served_by FROM responses WHERE key IN (SELECT unnest($1))",
                                [list(keys)]).fetchall()
        return {k: s for k, s in rows if s}

    @in_session
    def rows(self, keys: Sequence[str] | None = None) -> list[ResponseRow]:
        """The stored answers (of `keys`, or all) as written, by key: what a check of
        what was stored reads (every column, the timing ones included)."""
        where, params = ("", []) if keys is None else (" WHERE key IN (SELECT unnest($1))", [list(keys)])
        cur = self.con.execute(f"SELECT {', '.join(RESPONSE_COLUMNS)} FROM responses{where} ORDER BY key", params)
        return [cast(ResponseRow, dict(zip(RESPONSE_COLUMNS, r))) for r in cur.fetchall()]

    @in_session
    def put_responses(self, rows: Sequence[ResponseRow]) -> None:
        """Insert successful responses (one transaction); existing keys are kept. A row
        without `created_at` is stamped now; other missing columns are NULL."""
        if not rows:
            return
        now = time.time()
        columns = [[r.get(c, now if c == "created_at" else None) for r in rows] for c in RESPONSE_COLUMNS]
        insert_missing(self.con, "responses", RESPONSE_COLUMNS,
                       "SELECT " + ", ".join(f"unnest(${i + 1}) AS {c}" for i, c in enumerate(RESPONSE_COLUMNS)),
                       columns)

    @in_session
    def put_failures(self, rows: Sequence[FailureRow]) -> None:
        if not rows:
            return
        now = time.time()
        self.con.executemany(
            "INSERT INTO failures VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [[r["key"], r.get("run_id"), r.get("sample_id"), r["kind"], r.get("status"), r["message"],
              r.get("attempts", 1), now] for r in rows],
        )

    @in_session
    def stats(self) -> CacheStats:
        n, tok_in, tok_out, cost = self.db.one(
            "SELECT count(*), coalesce(sum(prompt_tokens),0), coalesce(sum(completion_tokens),0), "
            "coalesce(sum(cost_usd),0) FROM responses")
        by_model = self.con.execute(
            "SELECT provider || ':' || model, count(*), coalesce(sum(cost_usd),0) FROM responses GROUP BY 1 ORDER BY 2 DESC"
        ).fetchall()
        return {
            "path": str(self.db.path),
            "schema_version": SCHEMA_VERSION,
            "responses": int(n),
            "prompt_tokens": int(tok_in),
            "completion_tokens": int(tok_out),
            "cost_usd": float(cost),
            "failures": self._count("failures"),
            "runs": self._count("runs"),
            "by_model": {m: ModelStats(responses=c, cost_usd=float(u)) for m, c, u in by_model},
        }

    def _count(self, table: str) -> int:
        return int(self.db.one(f"SELECT count(*) FROM {table}")[0])

    @in_session
    def clear(self, model: str | None = None) -> int:
        """Delete cached responses (of one provider:model, or all, with the failures);
        returns how many responses went."""
        if model:
            n = int(self.db.one("SELECT count(*) FROM responses WHERE provider || ':' || model = ?", [model])[0])
            self.con.execute("DELETE FROM responses WHERE provider || ':' || model = ?", [model])
        else:
            n = self._count("responses")
            self.con.execute("DELETE FROM responses")
            self.con.execute("DELETE FROM failures")
        return n

    @in_session
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
                with replacing(out) as tmp:
                    relation.write_parquet(str(tmp))
            else:
                columns = relation.columns
                cursor = self.con.execute("SELECT * FROM responses ORDER BY key")
                with open_replacing(out) as fh:
                    while rows := cursor.fetchmany(10_000):
                        fh.writelines(json.dumps(dict(zip(columns, row)), ensure_ascii=False, default=str) + "\n"
                                      for row in rows)
        except (OSError, duckdb.Error) as exc:
            raise UserError(f"cannot write {out}: {getattr(exc, 'strerror', None) or str(exc).splitlines()[0]}") from None
        return self._count("responses")
