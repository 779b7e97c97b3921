"""Closing an invocation: its samples' ledger rows (results, and the samples that never
became requests), its wall time and request counts, the scores, and the summary stored
with the run and written to run.json — or, when it did not finish, what it did so far.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass

from ..benchmarks.base import notes_of
from ..ledger import SETTLED, InvocationEntry, SampleEntry, merge_sample, stored_status
from ..run_summary import Closing, RunSummary, Truncation, interrupted_summary, run_summary, write_out
from ..serving import serving_figures
from ..store import Store
from ..store.rows import ResultRow
from ..types import Sample, SampleResult, SampleStatus
from .generate import CacheFirst, Generated
from .plan import RunPlan
from .prompting import Tally

# Why a sample the benchmark's prepare() left out is excluded (run.json "prepare" says more).
EXCLUDED_BY_RULE = "left out by the benchmark's own rule (see run.json prepare)"
# Samples whose rows are built, compared and written at a time: memory for the rows of
# one window, whatever the number of samples.
RECORD_WINDOW = 8192


@dataclass(frozen=True)
class Scored:
    """What generating and scoring produced: the samples loaded, those asked (in order),
    their answers and results, and prepare's (and adaptive rounds') report. `recorder`:
    what wrote the results' sample rows already (a streamed source, window by window;
    `results` then holds only what the aggregate reads, and the rest is empty)."""

    loaded: list[Sample]
    kept: list[Sample]
    generated: Generated
    results: list[SampleResult]
    report: dict[str, object]
    recorder: Recorder | None = None


class Recorder:
    """Writes an invocation's sample rows, a window of scored samples at a time. Earlier
    invocations' statuses and payments count (an answer this run produced stays its
    own), read for the window's samples only; a row the store already holds as it is
    (a warm re-run: the same answer, score and status) is not written again."""

    def __init__(self, run_id: str, invocation: int, earlier: bool) -> None:
        self.run_id, self.invocation, self.earlier = run_id, invocation, earlier

    def write(self, store: Store, results: list[SampleResult]) -> None:
        """Book the window's results."""
        run_id, ids = self.run_id, [r.sample_id for r in results]
        with store.session(), store.transaction():
            stored = store.runs.stored_results(run_id, ids) if self.earlier else {}
            previous = {sid: SampleEntry(sid, row.task, stored_status(row.status or ""), row.invocation or 1, row.error)
                        for sid, row in stored.items() if row.status}
            # the payments that count: of samples read from the cache that this run has not settled
            unsettled = [r.key for r in results if r.key and r.status in (SampleStatus.FROM_CACHE, SampleStatus.SHARED)
                         and not _has_answer(previous.get(r.sample_id))]
            paid = store.runs.paid_keys(run_id, unsettled) if self.earlier and unsettled else {}
            rows = [ResultRow.scored(run_id, r, e.status, e.invocation)
                    for r, e in ((r, merge_sample(previous.get(r.sample_id),
                                                  SampleEntry(r.sample_id, r.task, r.status, self.invocation),
                                                  paid.get(r.key or "")))
                                 for r in results)]
            # a run's first invocation writes each sample once, and none before it did
            store.runs.put_results([row for row in rows if not _same(stored.get(row.sample_id), row)],
                                   new=not self.earlier)


def _has_answer(entry: SampleEntry | None) -> bool:
    return entry is not None and entry.status.has_answer


def _same(stored: ResultRow | None, row: ResultRow) -> bool:
    """Whether the stored row says what `row` says (`cached`, whether this invocation read
    the answer from the cache, is not part of what a sample's row records)."""
    return stored is not None and dataclasses.replace(stored, cached=row.cached) == row


# the meta and references of every slim result: read, never written (one empty pair
# instead of a new dict and list per sample: ~12 MB at 100k samples)
_NO_META: dict[str, object] = {}
_NO_REFERENCES: list[str] = []


def slim(r: SampleResult) -> SampleResult:
    """What a streamed benchmark's aggregate reads of a recorded result: its sample, task,
    status and score (the answer and the rest are in the store)."""
    return SampleResult(sample_id=r.sample_id, task=r.task, status=r.status, score=r.score, meta=_NO_META,
                        references=_NO_REFERENCES)


def book_stats(invocation: InvocationEntry, engine: CacheFirst, started: float) -> None:
    """The invocation's wall time and the runner's request counts, finished or not."""
    stats = engine.stats()
    invocation.wall_s = round(time.time() - started, 3)
    invocation.requests, invocation.retries = stats.requests_sent, stats.retries
    invocation.rate_limited, invocation.transient_errors = stats.rate_limited, stats.transient_errors


def close_run(p: RunPlan, store: Store, engine: CacheFirst, invocation: InvocationEntry,
              earlier: list[InvocationEntry], outcome: Scored, tally: Tally,
              fingerprint: str | None = None) -> RunSummary:
    """Book every sample and the invocation, aggregate the scores, store the summary with
    the run and write run.json. `fingerprint`: what the scores came from (reuse.py), kept
    with a complete run so that a re-run under the same one is booked from the store."""
    run_id = p.run_id
    with store.session():  # the closing writes and reads in one opening of the file
        recorder = outcome.recorder
        if recorder is None:
            recorder = Recorder(run_id, invocation.invocation, bool(earlier))
            for lo in range(0, len(outcome.results), RECORD_WINDOW):
                recorder.write(store, outcome.results[lo:lo + RECORD_WINDOW])
        store.runs.put_results(_unsent_rows(run_id, invocation.invocation, outcome.loaded, outcome.kept,
                                            str(outcome.report.get("excluded_reason") or EXCLUDED_BY_RULE)))
        book_stats(invocation, engine, p.started)
        scores = p.benchmark.aggregate(outcome.results, outcome.report)
        report = engine.report(p.client)
        closing = Closing(engine.latencies, [dict(e) for e in report.endpoints], dict(report.backend), report.aborted,
                          scores, outcome.report, tally.truncated, p.prompting.limits_found(tally),
                          p.prices.version, list(p.unpriced))
        summary = store_summary(p, store, invocation, closing, fingerprint)
    assert p.out is not None
    return write_out(p.out, summary)


def store_summary(p: RunPlan, store: Store, invocation: InvocationEntry, closing: Closing, fingerprint: str | None,
                  truncation: Truncation | None = None) -> RunSummary:
    """End the invocation's row (its row exists already) and store the run's summary: the
    ledger's figures with `closing`'s, and a complete run's reuse mark (reuse.py) when it
    has a `fingerprint`. `truncation`: run.json's block as stored (a re-run booked from
    the store builds no prompts). Inside the caller's session; run.json is the caller's."""
    run_id = p.run_id
    invocation.finished = True
    ledger = store.runs.ledger(run_id)
    invocation.complete = all(c.status in SETTLED for c in ledger.statuses)
    store.runs.put_invocation(run_id, invocation)
    ledger.invocations[-1] = invocation
    entries = store.runs.sample_entries(run_id, unsettled=True)
    closing = dataclasses.replace(closing, endpoints=failed_in_run(store, run_id, closing.endpoints),
                                  serving=serving_figures(store.runs.measured(run_id), p.benchmark.length_bin,
                                                          store.runs.not_measured(run_id)))
    summary = run_summary(p.benchmark_name, run_id, p.client.spec, ledger,
                          [e for e in entries if e.status not in SETTLED],
                          [e for e in entries if e.status == SampleStatus.EXCLUDED], closing)
    if truncation is not None:
        summary = dataclasses.replace(summary, truncation=truncation)
    summary = summary.redacted()
    store.runs.finish_run(run_id, "complete" if summary.complete else "partial", summary.to_json())
    if summary.complete and fingerprint is not None:
        store.runs.mark_reusable(run_id, invocation.invocation, fingerprint)
    return summary


def failed_in_run(store: Store, run_id: str, endpoints: list[dict[str, object]]) -> list[dict[str, object]]:
    """This invocation's endpoint health with `failed_in_run`: its failed attempts added
    to those the run's stored summary counted before (every finished invocation's; the
    report's Endpoints table once showed only the last one's)."""
    stored = json.loads(store.runs.summary_json(run_id) or "{}")
    before = {str(e.get("url")): int(e.get("failed_in_run", e.get("failed")) or 0) for e in stored.get("endpoints") or []}
    return [{**e, "failed_in_run": before.get(str(e.get("url")), 0) + int(str(e.get("failed") or 0))}
            for e in endpoints]


def book_interrupted(p: RunPlan, store: Store, engine: CacheFirst,
                     invocation: InvocationEntry) -> RunSummary:
    """An invocation that did not finish (Ctrl-C, a crash): store the answers and ledger
    rows still queued, book its requests and wall time, and write run.json from the
    ledger (no scores: they need every sample). Synchronous: the event loop is being
    torn down, and the store's own lock waits for a batch a worker thread is writing."""
    with store.session():
        engine.write_now()  # a journal file ingested twice later (replayed) adds nothing twice
        book_stats(invocation, engine, p.started)
        store.runs.put_invocation(p.run_id, invocation)
        summary = interrupted_summary(p.benchmark_name, p.run_id, p.client.spec, store.runs.ledger(p.run_id),
                                      store.runs.samples_seen(p.run_id)).redacted()
    engine.journal.close()
    assert p.out is not None
    return write_out(p.out, summary)


def _unsent_rows(run_id: str, invocation: int, loaded: list[Sample], kept: list[Sample],
                 rule: str) -> list[ResultRow]:
    """Ledger rows of samples that never became requests, "excluded" with their reason:
    left out by the benchmark's own rule (prepare's "excluded_reason", else a generic
    one), or malformed data rows (file, line, parse error), which no re-run can fix."""
    kept_ids = {s.id for s in kept}
    rows = [ResultRow.excluded(run_id, s.id, s.task, rule, invocation) for s in loaded if s.id not in kept_ids]
    for bad in notes_of(loaded).get("skipped_rows", []):
        rows.append(ResultRow.excluded(run_id, bad.sample_id, bad.task, f"malformed data row: {bad.describe()}",
                                       invocation))
    return rows

