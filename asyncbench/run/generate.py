"""Cache-first generation: requests -> (cache | runner) -> answers, with one writer
that puts every answer and its ledger row in the store in small batches.

`CacheFirst.generate` is the one way a run asks a model anything (eval, judge, prior): it
hashes and looks up requests chunk by chunk, sends the misses through the runner, books
each outcome in the ledger and returns the answers in request order. What the runner
tells (runners/base.py: outcomes, batch records, its counters) comes as events; the
engine writes every one of them itself, so it is the store's only writer.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence, Sized
from contextlib import nullcontext
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import anyio

from ..client import ModelClient, check_reachable
from ..errors import ProviderError
from ..ledger import NO_TASK, RequestEntry
from ..progress import RunProgress
from ..run_summary import Latencies
from ..runners import Runner
from ..runners.base import (
    BatchLookup,
    BatchRecord,
    BatchState,
    BatchStep,
    Counting,
    JournalsResolved,
    RunnerEvent,
    RunnerReport,
    SendOrder,
    add_stats,
)
from ..scheduler import Budget, EndpointHealth, Job, Outcome, SchedulerStats
from ..secrets import redactor, strip_userinfo
from ..store import Store
from ..store.batch_journal import BatchJournal, finished_files, unresolved
from ..store.journal import Journal, ingest
from ..store.rows import CachedResponse, FailureRow, ResponseRow
from ..types import Purpose, Request, RequestSource, Response, Sample, Usage

T = TypeVar("T")

# Requests hashed and looked up per step after the first chunk: from STREAM_CHUNK, doubled
# each step up to MAX_STREAM_CHUNK: small steps while the first wave goes out (reading a
# streamed data file never holds the event loop for long), then large ones, so that a run
# served from the cache pays few lookup queries.
STREAM_CHUNK = 256
MAX_STREAM_CHUNK = 4096
# The longest a shared-prefix group's other requests wait for its first one's answer
# before they are sent anyway (the first is normally answered well within the provider's
# 5-minute cache TTL).
PREFIX_WAIT_S = 240.0
# The writer's pace: at most one batch (one commit, one journal file) per this many seconds.
WRITE_EVERY_S = 1.0


class Lookup(NamedTuple):
    """A chunk of requests hashed and looked up: their keys, the cache's answers, and the
    keys among those that this invocation paid for."""

    keys: list[str]
    hits: dict[str, CachedResponse]
    paid: set[str]


@dataclass
class Generated:
    """What `CacheFirst.generate` returns, one entry per request in order; `sources` says what
    became of each."""

    answers: list[Response | ProviderError | None]
    sources: list[RequestSource]
    keys: list[str]


class CacheFirst:
    """Cache-first generation through the scheduler; one writer to the store."""

    def __init__(self, store: Store, run_id: str, invocation: int, progress_enabled: bool | None, budget: Budget,
                 runner: Runner, journal: Journal, prompt_cache: bool = True) -> None:
        self.store = store
        self.prompt_cache = prompt_cache  # --prompt-cache auto: mark shared prefixes (prompt_cache.py)
        self.journal = journal
        self.runner = runner
        self.run_id = run_id
        self.invocation = invocation
        self.progress_enabled = progress_enabled
        self.budget = budget
        self.latencies = Latencies()
        # every answer and prompt it stores is redacted (hex, \\u-escaped, spaced... echoes too)
        self.redact = redactor()
        self.pending_failures: list[FailureRow] = []
        self.pending_ledger: list[RequestEntry] = []
        self.pending_prompts: list[tuple[str, str]] = []  # (key, prompt as sent), eval and judge
        # the batch runner's records and questions, in the order they came (written, then asked)
        self.pending_batches: list[BatchRecord | BatchState | JournalsResolved | BatchLookup] = []
        self.batch_journal: BatchJournal | None = None  # this process's submissions (opened on the first)
        self.counters: list[SchedulerStats] = []  # the live counters of every runner run (Counting)
        self.endpoints: dict[ModelClient, list[EndpointHealth]] = {}  # each client's, from its last report
        self.last_report: RunnerReport | None = None
        self._flush_event = anyio.Event()
        self._db_lock = anyio.Lock()

    # -- durable writes ----------------------------------------------------------------
    async def writer(self) -> None:
        """Write responses as they arrive, in small batches, until cancelled; between
        batches, let go of the file when another process waits for it. A batch is written
        at most every WRITE_EVERY_S: answers that arrive one by one would otherwise each
        pay a commit and a journal file of their own (the journal keeps them safe meanwhile)."""
        while True:
            with anyio.move_on_after(0.1):
                await self._flush_event.wait()
            if self._flush_event.is_set():
                self._flush_event = anyio.Event()
                await self.flush()
                await anyio.sleep(WRITE_EVERY_S)
            elif not self._db_lock.locked():
                self.store.release_if_wanted()

    async def flush(self) -> None:
        async with self._db_lock:
            journal, rows = self.journal.rotate(), self._take_rows()  # what comes next: a new file
            batches, self.pending_batches = self.pending_batches, []
            if journal is not None or any(rows) or batches:
                await anyio.to_thread.run_sync(self._write, journal, *rows, batches)
                self.journal.done(journal)  # committed: the journal of this batch is not needed
            for event in batches:  # after the commit: what the store now holds
                await self._committed(event)

    def _take_rows(self) -> tuple[list[FailureRow], list[RequestEntry], list[tuple[str, str]]]:
        """The queued failures, ledger rows (other than paid answers': those are in the
        journal) and prompts, handed over to be written."""
        rows = (self.pending_failures, self.pending_ledger, self.pending_prompts)
        self.pending_failures, self.pending_ledger, self.pending_prompts = [], [], []
        return rows

    def write_now(self) -> None:
        """Everything received and queued, into the store now, synchronously (an
        interrupted invocation, as the event loop is torn down). Batch records stay queued:
        a submission's journal resolves them on the next run (runners/batch.py)."""
        journal = self.journal.rotate()
        self._write(journal, *self._take_rows())
        self.journal.done(journal)

    def _write(self, journal: Path | None, failures: list[FailureRow], ledger: list[RequestEntry],
               prompts: list[tuple[str, str]],
               batches: Sequence[BatchRecord | BatchState | JournalsResolved | BatchLookup] = ()) -> None:
        """One batch in one opening of the file (other processes get it between batches),
        in one transaction: the paid answers of the batch's journal file (each with the
        ledger row that paid for it), the failures, the other ledger rows. Then the batch
        records, in order (a batch is marked collected after its answers are in)."""
        with self.store.session():
            self._rows(journal, failures, ledger, prompts)
            for event in batches:
                if isinstance(event, BatchRecord):  # one transaction of its own
                    self.store.batches.put(event.batch_id, event.run_id, event.provider, event.model, event.endpoint,
                                         event.base_url, event.keys, event.submitted_at)
                elif isinstance(event, BatchState):
                    self.store.batches.update(event.batch_id, event.state, event.counts, event.collected)

    def _rows(self, journal: Path | None, failures: list[FailureRow], ledger: list[RequestEntry],
              prompts: list[tuple[str, str]]) -> None:
        with self.store.transaction():
            if journal is not None:
                ingest(self.store, journal)
            self.store.cache.put_failures(failures)
            self.store.runs.put_ledger_requests(self.run_id, ledger)
            self.store.runs.put_prompts(prompts)
            stats = self.stats()  # the invocation's counts so far, for a viewer in another process
            self.store.runs.put_live_counts(self.run_id, self.invocation, stats.requests_sent, stats.retries,
                                            stats.rate_limited, stats.transient_errors)

    async def _committed(self, event: BatchRecord | BatchState | JournalsResolved | BatchLookup) -> None:
        """A batch event's part after the commit: the journal's "recorded" step, the journal
        files of gone processes all resolved now, a question answered from the store."""
        if isinstance(event, BatchRecord) and event.intent is not None:
            self._batch_journal().write("recorded", event.intent)
        elif isinstance(event, JournalsResolved):
            for path in finished_files(self.store.path, event.submissions):
                path.unlink(missing_ok=True)
        elif isinstance(event, BatchLookup):
            await anyio.to_thread.run_sync(self._answer, event)
            event.answered.set()

    def _answer(self, question: BatchLookup) -> None:
        question.run_id = self.run_id
        question.unresolved = unresolved(self.store.path)
        question.known = {b.batch_id for b in self.store.batches.rows()}
        question.open = self.store.batches.open_holding(question.provider, question.endpoint, question.keys)

    def _batch_journal(self) -> BatchJournal:
        if self.batch_journal is None:
            self.batch_journal = BatchJournal(self.store.path)
        return self.batch_journal

    def on_batch_event(self, event: BatchStep | BatchRecord | BatchState | JournalsResolved | BatchLookup) -> None:
        """A journal step goes to disk now (fsynced: a batch is money) before the runner's
        next step; records and questions go to the writer, in the order they came."""
        if isinstance(event, BatchStep):
            self._batch_journal().write(event.step, event.intent, **event.fields)
            return
        self.pending_batches.append(event)
        self.wake_writer()

    # -- what the runner reported --------------------------------------------------------
    def stats(self) -> SchedulerStats:
        """Requests, retries, 429s... of every runner run so far (live: a run's counters
        are read while it goes)."""
        total = SchedulerStats()
        for part in self.counters:
            add_stats(total, part)
        return total

    def report(self, client: ModelClient) -> RunnerReport:
        """The runner's report for run.json: counts of the whole invocation, `client`'s
        endpoints, why the runner stopped sending, what it records about itself."""
        last = self.last_report
        return RunnerReport(self.stats(), self.endpoints.get(client, client.pool.health()),
                            last.aborted if last else None, last.backend if last else {},
                            last.per_node if last else [])

    def wake_writer(self) -> None:
        self._flush_event.set()

    # -- generation -----------------------------------------------------------------
    async def keys_and_hits(self, requests: list[Request]) -> Lookup:
        """Hash a chunk of requests and look them up, off the event loop (sha256 of long
        prompts releases the GIL, so this overlaps requests already in flight)."""
        def work() -> Lookup:
            keys = [r.key() for r in requests]
            hits = self.store.cache.lookup(keys)
            # hits this invocation paid for (in an earlier window or call): shared, not
            # cached. Asked of the ledger, whose row is stored with the answer, rather
            # than kept in memory for every answer of the run.
            paid = self.store.runs.sent_in(self.run_id, self.invocation, list(hits)) if hits else set()
            return Lookup(keys, hits, paid)

        return await self.in_store(work)

    async def in_store(self, work: Callable[[], T]) -> T:
        """`work` (store reads and writes) in a worker thread, between the writer's batches."""
        async with self._db_lock:
            return await anyio.to_thread.run_sync(work)

    def counts(self) -> tuple[int, int]:
        """Retries and 429s so far, for a progress bar."""
        stats = self.stats()
        return stats.retries, stats.rate_limited

    async def generate(self, client: ModelClient, requests: Iterable[Request], purpose: Purpose,
                       samples: Sequence[Sample] | None = None, label: str | None = None,
                       progress: RunProgress | None = None) -> Generated:
        """One answer per request (None: skipped by the budget), whether it was cached, and
        its cache key.

        Requests are hashed and looked up chunk by chunk, and each chunk's misses go to
        the runner at once: the first wave is on the wire while the rest of a large run
        is still being read, hashed and looked up. `requests` may be a lazy iterator (a
        streamed data file); `samples[i]` is the sample of the i-th request, for the
        failure log, and may grow as the iterator runs. `progress`: a bar the caller keeps
        across calls (a streamed source's windows), which sets its total."""
        total = len(requests) if isinstance(requests, Sized) else None
        looked_up: Lookup | None = None
        if self.prompt_cache and isinstance(requests, list) and client.prompt_cache_min_tokens():
            # shared prefixes among the requests to be sent (a streamed file is not marked):
            # a group's only uncached request would pay the cache write for nothing
            looked_up = await self.keys_and_hits(requests)
            client.plan_prefixes([r for r in requests if r.key() not in looked_up.hits], mark=True)
        own = progress is None
        bar = RunProgress(total, label or f"{purpose} {client.spec.label}", self.progress_enabled,
                          stats=self.counts) if progress is None else progress
        call = _Generation(self, client, iter(requests), purpose, samples, bar, looked_up, own_total=own)
        try:
            with bar if own else nullcontext(bar):
                report = await self.runner.run(client, call.jobs(), call.on_event, budget=self.budget)
                self.endpoints[client], self.last_report = report.endpoints, report
                generated = call.generated()  # books shared and unsent requests: the bar's last counts
        finally:  # also when the data stream fails part-way: keep every answer received
            await self.flush()
            if self.batch_journal is not None:
                self.batch_journal.close()  # gone once every submission in it is recorded
        return generated


class _Generation:
    """The state of one `CacheFirst.generate` call, in one place: the requests read so far,
    their keys, cache hits and in-run duplicates; the methods that feed the runner, take
    its outcomes (accounts, cache rows, progress) and put the answers in request order."""

    def __init__(self, engine: CacheFirst, client: ModelClient, source: Iterator[Request], purpose: Purpose,
                 samples: Sequence[Sample] | None, progress: RunProgress,
                 looked_up: Lookup | None = None, own_total: bool = True) -> None:
        self.engine = engine
        self.own_total = own_total  # the bar's total is this call's (else its caller's)
        self.looked_up = looked_up  # every request's cache hits, when generate() already asked
        self.client = client
        self.source = source
        self.purpose = purpose
        self.samples = samples
        self.progress = progress
        self.requests: list[Request] = []
        self.keys: list[str] = []
        self.sources: list[RequestSource] = []
        self.hits: dict[int, Response] = {}
        self.first_index: dict[str, int] = {}
        self.duplicates: list[tuple[int, int]] = []
        self.hit_keys: set[str] = set()  # keys this call served from the cache (once each)
        self.outcomes: list[Outcome] = []
        # --prompt-cache: a shared-prefix group's first request goes alone, the others
        # wait (held) until it is answered, then go first; other requests fill meanwhile.
        # Only where the runner says it sends jobs one by one as they come (SendOrder).
        self.prefix_order = False
        self.opened: set[int] = set()  # groups whose first request was sent
        self.released: set[int] = set()  # ... and answered (or failed)
        self.leaders: dict[int, int] = {}  # request index -> the group it leads
        self.held: dict[int, list[Job]] = {}
        self.ready: deque[Job] = deque()
        self.wake = anyio.Event()

    async def jobs(self) -> AsyncIterator[Job]:
        """The cache misses as jobs, chunk by chunk; hits and duplicates are settled here."""
        client = self.client
        size = client.pool.capacity()  # the first chunk fills the endpoints, at once
        step = STREAM_CHUNK
        while chunk := list(islice(self.source, size)):
            size, step = step, min(2 * step, MAX_STREAM_CHUNK)
            lo = len(self.requests)
            self.requests.extend(chunk)
            if self.looked_up is None:
                chunk_keys, hits, paid = await self.engine.keys_and_hits(chunk)
            else:  # hashed and looked up once already (keys are kept on the requests)
                chunk_keys = [r.key() for r in chunk]
                hits, paid = self.looked_up.hits, self.looked_up.paid
            self.keys.extend(chunk_keys)
            self.sources.extend([RequestSource.SKIPPED_BUDGET] * len(chunk))  # until an outcome says otherwise
            for i, key in enumerate(chunk_keys, start=lo):
                while self.ready:  # groups whose first answer came: before new work
                    yield self.ready.popleft()
                hit = hits.get(key)
                if hit is not None:
                    self._from_cache(i, hit, key in paid)
                elif key in self.first_index:  # identical request twice in one run: send once
                    self.duplicates.append((i, self.first_index[key]))
                else:
                    if not client.reachable:  # only once something must be sent
                        await check_reachable(client)
                        client.reachable = True
                    self.first_index[key] = i
                    req = self.requests[i]
                    tokens = client.count(req.text()) + req.max_tokens
                    est = client.price.estimate(tokens - req.max_tokens, req.max_tokens)
                    job = Job(index=i, request=req, tokens=tokens, est_cost=est)
                    group = req.cache_group if self.prefix_order else -1
                    if group < 0 or group in self.released:
                        yield job
                    elif group not in self.opened:
                        self.opened.add(group)
                        self.leaders[i] = group
                        yield job
                    else:
                        self.held.setdefault(group, []).append(job)
        if self.own_total:
            self.progress.set_total(len(self.requests))
        while self.held or self.ready:  # the rest of the groups, as their first answers come
            while self.ready:
                yield self.ready.popleft()
            if self.held:
                with anyio.move_on_after(PREFIX_WAIT_S) as waited:
                    await self.wake.wait()
                self.wake = anyio.Event()
                if waited.cancelled_caught:  # never left waiting: send what is held
                    for jobs in self.held.values():
                        self.ready.extend(jobs)
                    self.released.update(self.held)
                    self.held.clear()

    def _release(self, i: int) -> None:
        """Request i has its outcome: if it led a group, the group's others may go."""
        group = self.leaders.pop(i, None)
        if group is not None:
            self.released.add(group)
            self.ready.extend(self.held.pop(group, []))
            self.wake.set()

    def _task(self, i: int) -> str:
        if self.samples is not None:
            return self.samples[i].task
        return self.requests[i].task or NO_TASK

    def _entry(self, i: int, source: RequestSource, **fields: Any) -> RequestEntry:
        sid = self.samples[i].id if self.samples is not None else None
        return RequestEntry(invocation=self.engine.invocation, purpose=self.purpose, task=self._task(i), source=source,
                            key=self.keys[i], sample_id=sid, **fields)

    def _from_cache(self, i: int, hit: CachedResponse, paid: bool) -> None:
        """`paid`: this invocation sent the request (in an earlier window or call)."""
        usage = Usage(hit.prompt_tokens, hit.completion_tokens, hit.cached_prompt_tokens, hit.cache_write_tokens)
        self.hits[i] = Response(hit.text, usage, hit.latency_ms, hit.finish_reason, "cache", usage_flag=hit.usage_flag)
        if paid or hit.key in self.hit_keys:
            # sent earlier in this invocation and stored since, or a cache hit this call
            # already served to another sample: one answer, paid (or saved) once
            self.sources[i] = RequestSource.SHARED
            self.engine.pending_ledger.append(self._entry(i, RequestSource.SHARED))
            self.progress.add(RequestSource.SHARED)
            return
        self.sources[i] = RequestSource.FROM_CACHE
        self.hit_keys.add(hit.key)
        # what the answer cost when it was paid (its cache row), not today's list price
        self.engine.pending_ledger.append(self._entry(
            i, RequestSource.FROM_CACHE, prompt_tokens=hit.prompt_tokens, completion_tokens=hit.completion_tokens,
            cached_prompt_tokens=hit.cached_prompt_tokens, saved_usd=hit.cost_usd or 0.0, latency_ms=hit.latency_ms,
            usage_flag=hit.usage_flag))
        self.engine.latencies.cached.append(hit.latency_ms)
        self.progress.add(RequestSource.FROM_CACHE)

    def on_event(self, event: RunnerEvent) -> None:
        """What the runner tells: an outcome, how it sends, its counters, a batch record."""
        if isinstance(event, Outcome):
            self.outcomes.append(event)
            self.on_outcome(event)
        elif isinstance(event, SendOrder):  # prefix-aware order where jobs go one by one
            self.prefix_order = self.engine.prompt_cache and event.by_prefix
        elif isinstance(event, Counting):
            self.engine.counters.append(event.stats)
        else:
            self.engine.on_batch_event(event)

    def on_outcome(self, outcome: Outcome) -> None:
        """Account for one outcome and queue its row for the store (written by the
        engine's writer in small batches)."""
        self._release(outcome.index)
        if outcome.response is not None:
            self._answered(outcome.index, outcome.response, outcome.attempts)
        elif outcome.error is not None:
            self._failed(outcome.index, outcome.error, outcome.attempts)
        self.engine.wake_writer()  # not sent (the budget was reached): booked in `generated`

    def _answered(self, i: int, resp: Response, attempts: int) -> None:
        engine, req, usage, timing = self.engine, self.requests[i], resp.usage, resp.timing
        sent_at, ttft = (timing.sent_at, timing.ttft_ms) if timing is not None else (None, None)
        resp.text = engine.redact(resp.text)  # a server that echoes the key into its answer, in any form
        cost = self.client.price.cost(usage, resp.discount)
        self.sources[i] = RequestSource.SENT
        # saved: the batch discount (what the list price would have been, less what was paid)
        entry = self._entry(
            i, RequestSource.SENT, prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
            cached_prompt_tokens=usage.cached_prompt_tokens, cache_write_tokens=usage.cache_write_tokens, cost_usd=cost,
            saved_usd=self.client.price.cost(usage) - cost if resp.discount != 1.0 else 0.0,
            latency_ms=resp.latency_ms, attempts=attempts, usage_flag=resp.usage_flag, sent_at=sent_at, ttft_ms=ttft)
        engine.latencies.fresh.append(resp.latency_ms)
        row = ResponseRow(
            key=self.keys[i], provider=req.provider, model=req.model, endpoint=req.endpoint_id,
            request_json=req.hashed_json(), text=resp.text, finish_reason=resp.finish_reason,
            prompt_tokens=resp.usage.prompt_tokens, completion_tokens=resp.usage.completion_tokens,
            cached_prompt_tokens=resp.usage.cached_prompt_tokens, latency_ms=resp.latency_ms, cost_usd=cost,
            served_by=strip_userinfo(resp.endpoint), created_at=time.time(),
            cache_write_tokens=resp.usage.cache_write_tokens, usage_flag=resp.usage_flag, sent_at=sent_at, ttft_ms=ttft,
            itl_ms=timing.itl_ms if timing is not None and ttft is not None else None)
        # on disk now (a crash keeps it), and how it reaches the store: the writer's batch
        # ingests this journal file (store/journal.py)
        engine.journal.append(row, entry, self._prompt_text(i))
        self.progress.add(RequestSource.SENT, usage.prompt_tokens + usage.completion_tokens, cost)

    def _prompt_text(self, i: int) -> str:
        """The prompt as sent (after truncation), for the per-sample view, secrets redacted."""
        req = self.requests[i]
        text = req.prompt if req.prompt is not None else json.dumps(req.messages, ensure_ascii=False)
        return self.engine.redact(text)

    def _keep_prompt(self, i: int) -> None:
        """Queue the prompt of a request that failed (an answered one is kept with its
        journal line): once per request key; an answer served from the cache was kept when
        paid."""
        self.engine.pending_prompts.append((self.keys[i], self._prompt_text(i)))

    def _failed(self, i: int, err: ProviderError, attempts: int) -> None:
        self.sources[i] = RequestSource.FAILED
        self.engine.pending_ledger.append(self._entry(i, RequestSource.FAILED, attempts=attempts))
        self._keep_prompt(i)
        sid = self.samples[i].id if self.samples is not None else None
        self.engine.pending_failures.append(FailureRow(key=self.keys[i], run_id=self.engine.run_id, sample_id=sid,
                                                       kind=err.kind, status=err.status, message=err.message,
                                                       attempts=attempts))
        self.progress.add(RequestSource.FAILED)

    def generated(self) -> Generated:
        """Answers in request order. A request identical to an earlier one of this call
        shares its answer: "shared" when there is one, else what became of the original."""
        answers: list[Response | ProviderError | None] = [self.hits.get(i) for i in range(len(self.requests))]
        for o in self.outcomes:
            answers[o.index] = o.response if o.response is not None else o.error
        copies = {i for i, _ in self.duplicates}
        for i, source in enumerate(self.sources):
            if source == RequestSource.SKIPPED_BUDGET and i not in copies:  # never sent, with or without an outcome
                self.engine.pending_ledger.append(self._entry(i, RequestSource.SKIPPED_BUDGET))
                self.progress.add(RequestSource.SKIPPED_BUDGET)
        for i, j in self.duplicates:
            answers[i] = answers[j]
            self.sources[i] = (RequestSource.SHARED if self.sources[j] in (RequestSource.SENT, RequestSource.FROM_CACHE)
                               else self.sources[j])
            self.engine.pending_ledger.append(self._entry(i, RequestSource.SHARED))
            self.progress.add(self.sources[i])
        return Generated(answers, self.sources, self.keys)


