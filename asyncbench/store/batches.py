"""Provider batches (runners/batch.py), recorded the moment they are created so that a
crashed or interrupted run re-attaches to them instead of submitting twice: `batches`
and the request keys of each, `batch_requests`. A request key is the same request
whichever run submitted it, so a batch is found by its keys, any run's."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from .connection import Part, in_session, unnest
from .rows import BATCH_COLUMNS, BatchRow


class BatchRecord(Part):
    """Submitted batches, their state, and which of them hold which request keys."""

    def put(self, batch_id: str, run_id: str, provider: str, model: str, endpoint: str, base_url: str,
            keys: Sequence[str], submitted_at: float) -> None:
        """Record a submitted batch and the request keys in it (one transaction)."""
        with self.db.transaction():
            # the same batch again (recovered from a journal after the store got it): once
            self.con.execute("DELETE FROM batch_requests WHERE batch_id = ?", [batch_id])
            self.con.execute(
                "INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, 'submitted', '{}', ?, ?, false)",
                [batch_id, run_id, provider, model, endpoint, base_url, len(keys), submitted_at, submitted_at])
            self.con.execute(f"INSERT INTO batch_requests SELECT {unnest(3)}",
                             [[batch_id] * len(keys), list(keys), list(keys)])

    @in_session
    def update(self, batch_id: str, state: str, counts: dict[str, int], collected: bool = False) -> None:
        self.con.execute("UPDATE batches SET state = ?, counts_json = ?, updated_at = ?, collected = ? "
                         "WHERE batch_id = ?", [state, json.dumps(counts, sort_keys=True), time.time(), collected,
                                                batch_id])

    @in_session
    def open_holding(self, provider: str, endpoint: str, keys: Sequence[str]) -> list[tuple[str, str, float, list[str]]]:
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

    @in_session
    def rows(self, run_id: str | None = None) -> list[BatchRow]:
        """Every batch (or one run's), oldest first."""
        where = " WHERE run_id = ?" if run_id else ""
        cur = self.con.execute(f"SELECT {', '.join(BATCH_COLUMNS)} FROM batches{where} ORDER BY submitted_at",
                               [run_id] if run_id else [])
        return [BatchRow(*r) for r in cur.fetchall()]
