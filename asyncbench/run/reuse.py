"""A re-run of a complete run that nothing has changed since, booked from the store.

Re-running a finished command reads every answer back from the cache, scores them again
and aggregates the same scores: at 100k samples ~10 CPU-s to learn nothing new. When the
store says the run's last invocation completed it from the same code, settings,
prompting and prices (the run's `reusable` row: that invocation and a fingerprint of all
of these), and a cache-first pass would book that invocation's request rows as they are
(`RunRecord.rebookable`), the new invocation is booked in SQL instead: its request rows
are the last one's, each answer read from the cache (`RunRecord.rebook`), its sample rows
stay as they are (a pass reading answers back keeps them), and its summary has the stored
scores with the ledger's figures of now. tests/test_reuse.py checks that the run.json and
ledger rows are those the full path writes.

The full path stays where a re-run could learn something: a benchmark whose scores depend
on this machine (BAMBOO's PrivateEval sandbox, `Benchmark.RESCORES`), adaptive rounds,
another runner than the local one, and any change to the package's own files. A server
that cuts prompts with its own tokenizer is taken at what planning asked of it (its model
and context, in the prompting limits): a server that swaps its model under the same name
and context changes its answers unseen by either path, since the cache keys requests,
not weights.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from functools import cache
from pathlib import Path

from ..ledger import InvocationEntry, Ledger
from ..run_summary import Closing, Latencies, RunSummary, write_out
from ..runners.local import LOCAL, LocalRunner
from ..store import Store
from .plan import RunPlan
from .record import store_summary


@cache
def code_digest() -> str:
    """sha256 of the package's files (names and bytes): a changed metric, prompt rule or
    summary is new code, and a re-run under it scores again."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


# Options that change how a run is shown, where it is written and how fast it sends, never
# what it scores: a re-run with `--no-progress` or `--json` (which turns progress off) once
# took the full path, 8 s where the booked re-run takes 1.
HOW_NOT_WHAT = frozenset({"progress", "out", "cache", "max_cost", "concurrency", "rpm", "tpm", "timeout_s",
                          "max_attempts", "max_response_bytes", "no_wait", "stream"})


def fingerprint(p: RunPlan) -> str | None:
    """What a complete run's scores and figures came from (None: a re-run scores again)."""
    if p.caps.administer is not None or p.caps.rescores or type(p.runner) is not LocalRunner:
        return None
    config = {k: v for k, v in p.stored_config.items() if k not in HOW_NOT_WHAT}
    what = [p.run_id, p.benchmark_name, config, dict(p.prompting.limits), p.prices.version,
            repr(p.client.price), repr(p.judge.price) if p.judge is not None else None]
    h = hashlib.sha256(code_digest().encode())
    h.update(json.dumps(what, sort_keys=True, default=str).encode())
    return h.hexdigest()


def stored_summary(store: Store, p: RunPlan, before: Ledger, fp: str | None) -> RunSummary | None:
    """The summary of the run's last invocation, when a re-run can be booked from it."""
    if fp is None or not before.invocations:
        return None
    last = before.invocations[-1]
    if not (last.finished and last.complete) or store.runs.reusable(p.run_id) != (last.invocation, fp):
        return None
    run = store.runs.run(p.run_id)
    if run.status != "complete" or not run.summary_json or not store.runs.rebookable(p.run_id, last.invocation):
        return None
    return RunSummary.from_json(run.summary_json)


def book(p: RunPlan, store: Store, before: Ledger, stored: RunSummary, fp: str) -> RunSummary:
    """A new invocation of the run, booked from its last one in one transaction (all or
    nothing); run.json written as the full path writes it."""
    last = before.invocations[-1].invocation
    invocation = InvocationEntry(last + 1, p.started, pid=os.getpid(), host=socket.gethostname())
    with store.session(), store.transaction():
        store.runs.start_run(p.run_id, p.benchmark_name, p.client.spec.label, dict(p.stored_config))
        cached = store.runs.rebook(p.run_id, last, invocation.invocation, excluded=p.samples.listed is not None or p.samples.drawn is not None)
        store.runs.put_invocation(p.run_id, invocation)
        invocation.wall_s = round(time.time() - p.started, 3)
        assert stored.scores is not None  # a complete run's summary has them
        closing = Closing(Latencies(cached=cached), [dict(e) for e in p.client.pool.health()], {"name": LOCAL},
                          None, stored.scores, stored.prepare, {}, p.prompting.limits, p.prices.version,
                          list(p.unpriced))
        # how prompts were cut is what building them found last time (the same prompts)
        summary = store_summary(p, store, invocation, closing, fp, truncation=stored.truncation)
    assert p.out is not None
    return write_out(p.out, summary)
