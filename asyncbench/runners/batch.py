"""BatchRunner (`--batch`): a run's uncached requests through the provider's batch API
(OpenAI Batch, Anthropic Message Batches) at the batch price (half of list).

- Jobs are split into batches under the provider's limits (requests and bytes per
  batch). Each submission is paid once: its intent (a client-made id, in the batch's
  metadata where the API has it) and each step after it (the uploaded file, the batch
  id) go to the batch journal (store/batch_journal.py) before the next step, without
  waiting for the store's lock; the store then records the batch and its request keys.
  The runner writes neither: it hands each step and record to the engine as an event
  (base.py), and the engine, the store's only writer, writes them.
  A run interrupted anywhere (Ctrl-C, SIGKILL, `--no-wait`) is re-attached by the same
  command: submissions of dead processes are put in the store, or looked up at the
  provider by their intent, before anything is submitted again; requests in a batch not
  yet collected are never submitted again; the runner polls that batch instead.
- Batches are polled with a growing interval (`poll_s` up to `max_poll_s`); each change
  of state or counts is one line on stderr. An ended batch's results go to the engine's
  `on_event` as they are read, the path live answers take (cache, ledger, journal), and
  the batch is then marked collected.
- Expired, cancelled and server-errored requests are sent again: in the next batch, or
  live with `fallback="live"` (at list price), up to `max_attempts` in all. Fatal errors
  (a bad request, a prompt too long) are outcomes at once.
- `wait=False` (`--no-wait`): submit, collect what has already ended, and return; what is
  still in a batch is a failed outcome ("pending in batch ...": the run ends partial), which
  the same command later collects.
- `--max-cost` reserves each request's estimate at the batch price before submitting.
- The ledger books a batch's requests and spend on the invocation that collects its
  results (the one that learns what was answered and what it cost): with `--no-wait`, the
  submitting invocation shows requests 0 / $0 and the one that collects shows them all,
  so the invocation rows add up to the run's.
- A client whose provider has no batch API (a judge on another server) is sent live.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass, field

import anyio

from ..claims import checked
from ..client import ModelClient
from ..errors import NotRun, ProviderError, UserError
from ..providers.base import BatchStatus
from ..scheduler import Budget, Job, Outcome, SchedulerStats
from ..secrets import strip_userinfo
from ..terminal import shown
from ..types import Response
from .base import (
    JSON,
    BatchLookup,
    BatchRecord,
    BatchState,
    BatchStep,
    Counting,
    JournalsResolved,
    MapChunks,
    OnEvent,
    RunnerReport,
    add_stats,
)
from .local import LocalRunner


def no_batch_api(label: str) -> UserError:
    return UserError(f"--batch: {label} has no batch API (openai: and anthropic: models have one); "
                     "run it without --batch")


@dataclass
class _Batch:
    batch_id: str
    base_url: str
    submitted_at: float
    keys: list[str]
    state: str = "submitted"
    counts: dict[str, int] = field(default_factory=dict)
    ended: bool = False


@dataclass
class _Call:
    """The state of one `BatchRunner.run`: its jobs by request key, attempts and budget
    reservations per key, and the outcomes handed on so far."""

    client: ModelClient
    todo: list[Job]
    budget: Budget
    on_event: OnEvent
    stats: SchedulerStats
    by_key: dict[str, Job] = field(default_factory=dict)
    entries: dict[str, dict[str, object]] = field(default_factory=dict)  # the provider's batch line per key
    attempts: dict[str, int] = field(default_factory=dict)
    reserved: dict[str, float] = field(default_factory=dict)
    outcomes: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        for job in self.todo:
            self.by_key.setdefault(job.request.key(), job)
        self.entries = {k: self.client.provider.batch_entry(j.request, k) for k, j in self.by_key.items()}
        self.attempts = dict.fromkeys(self.by_key, 0)

    def finish(self, key: str, response: Response | None = None, error: ProviderError | None = None,
               skipped: bool = False) -> None:
        job = self.by_key[key]
        self.outcomes.add(job.index)
        self.on_event(Outcome(job.index, response=response, error=error, attempts=self.attempts[key],
                              skipped=skipped))

    def url(self, base_url: str) -> str:
        """The configured URL (with its credentials) that a recorded one stands for."""
        urls = self.client.spec.base_urls
        return next((u for u in urls if strip_userinfo(u) == base_url), urls[0])

    async def lookup(self) -> BatchLookup:
        spec = self.client.spec
        question = BatchLookup(spec.provider, spec.endpoint_id, list(self.by_key))
        self.on_event(question)
        await question.answered.wait()
        return question


class BatchRunner:
    map_chunks: MapChunks | None = None

    def __init__(self, timeout_s: float, max_attempts: int, *, wait: bool = True, fallback: str = "batch",
                 progress: bool | None = None, poll_s: float = 0.5, max_poll_s: float = 30.0) -> None:
        self.live = LocalRunner(timeout_s, max_attempts, by_prefix=False)
        self.max_attempts = max_attempts
        self.wait = wait
        self.fallback = fallback
        self.progress = progress is not False
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
        self.run_id = ""
        self.aborted: str | None = None
        self.submitted: list[str] = []  # batch ids this process submitted
        self.attached: list[str] = []  # batch ids of earlier processes it collected from
        self.pending = 0  # requests left in batches not ended (--no-wait)

    async def _recover(self, call: _Call, found: BatchLookup) -> bool:
        """Submissions that dead processes journaled but the store does not hold: a batch
        id goes into the store; without one, the provider is asked whether the batch
        exists (its metadata names the intent) before anything is submitted again.
        Whether any went into the store."""
        client, recorded = call.client, False
        spec = client.spec
        for sub in [s for s in found.unresolved if not s.done and s.provider == spec.provider
                    and s.endpoint == spec.endpoint_id]:
            batch_id = sub.batch_id
            if batch_id is None:
                try:
                    batch_id = await client.provider.batch_find(call.url(sub.base_url), sub.intent, sub.at,
                                                                len(sub.keys), found.known)
                except ProviderError as exc:
                    raise UserError(f"--batch: cannot check whether an interrupted submission of {len(sub.keys)} "
                                    f"request(s) became a batch ({exc.message}); run the same command again when "
                                    f"{spec.label} answers (nothing is submitted twice)") from None
                if batch_id is None:
                    self._say(f"an interrupted submission of {len(sub.keys)} request(s) never became a batch; "
                              "its requests are submitted now")
                    sub.done = True
                    continue
                self._say(f"batch {batch_id}: found at the provider (an interrupted submission of "
                          f"{len(sub.keys)} request(s)); not submitted again")
            if batch_id not in found.known:
                call.on_event(BatchRecord(batch_id, sub.run_id, sub.provider, sub.model, sub.endpoint, sub.base_url,
                                          sub.keys, sub.at))
                found.known.add(batch_id)
                recorded = True
            sub.done = True
        call.on_event(JournalsResolved(found.unresolved))
        return recorded

    def _say(self, line: str) -> None:
        if self.progress:
            print(f"asyncbench: {shown(line)}", file=sys.stderr, flush=True)

    async def _attach(self, call: _Call) -> list[_Batch]:
        """Recover what dead processes submitted, then re-attach to every batch not yet
        collected that holds one of these requests (nothing of them is submitted again)."""
        found = await call.lookup()
        if await self._recover(call, found):
            found = await call.lookup()  # with the batches just recovered
        self.run_id = found.run_id
        tracked: list[_Batch] = []
        held: set[str] = set()
        for batch_id, base_url, submitted_at, keys in found.open:
            keys = [k for k in keys if k not in held]
            held.update(keys)
            tracked.append(_Batch(batch_id, call.url(base_url), submitted_at, keys))
            self.attached.append(batch_id)
            for k in keys:
                call.attempts[k] += 1
                call.reserved[k] = call.by_key[k].est_cost * call.client.price.batch
                call.budget.reserved += call.reserved[k] if call.budget.max_cost is not None else 0.0
        if tracked:
            self._say(f"re-attached to {len(tracked)} batch(es) holding {len(held)} request(s); nothing of them "
                      "is submitted again")
        return tracked

    async def run(self, client: ModelClient, jobs: AsyncIterable[Job], on_event: OnEvent, *,
                  budget: Budget) -> RunnerReport:
        if not client.has_batch_api:
            return await self.live.run(client, jobs, on_event, budget=budget)
        stats = SchedulerStats()
        on_event(Counting(stats))
        call = _Call(client, [j async for j in jobs], budget, on_event, stats)
        tracked = await self._attach(call)
        held = {k for b in tracked for k in b.keys}
        fresh = [k for k in call.by_key if k not in held]
        total = SchedulerStats()  # this run's counts, with the live fallback's (which says its own)
        while True:
            tracked += await self._submit(call, fresh)
            retry = await self._collect(call, tracked)
            tracked = [b for b in tracked if not b.ended]
            if not self.wait:
                self._leave_pending(call, tracked)
            fresh = self._again(call, retry)
            if not fresh:
                break
            if self.fallback == "live":
                self._say(f"{len(fresh)} request(s) not answered in their batch: sending them live (list price)")
                live = await self.live.run(client, _aiter([call.by_key[k] for k in fresh]), on_event, budget=budget)
                add_stats(total, live.stats)
                break
            self._say(f"{len(fresh)} request(s) not answered in their batch: submitting them in a new batch")
        add_stats(total, stats)
        return RunnerReport(total, client.pool.health(), self.aborted, self.describe())

    def _leave_pending(self, call: _Call, tracked: list[_Batch]) -> None:
        """--no-wait: every request still in a batch is a failed outcome, with one message
        for all (one summary line, not one per request)."""
        pending = ProviderError("transient", "pending in a batch not yet ended; run the same command "
                                             "again to collect it")
        for b in tracked:
            for k in b.keys:
                if k in call.by_key and call.by_key[k].index not in call.outcomes:
                    self.pending += 1
                    call.finish(k, error=pending)

    def _again(self, call: _Call, retry: list[tuple[str, ProviderError]]) -> list[str]:
        """The requests to send again; those out of attempts fail with their last error."""
        for k, err in retry:
            if call.attempts[k] >= self.max_attempts:
                call.finish(k, error=err)
        return [k for k, _ in retry if call.attempts[k] < self.max_attempts]

    def _chunks(self, call: _Call, keys: list[str]) -> list[list[str]]:
        """`keys` in batches under the provider's limits, each request's estimate reserved
        at the batch price (a request over --max-cost is skipped)."""
        limits = call.client.batch_limits
        assert limits is not None
        max_requests = int(os.environ.get("ASYNCBENCH_BATCH_MAX_REQUESTS", limits[0]))
        max_bytes = int(os.environ.get("ASYNCBENCH_BATCH_MAX_BYTES", limits[1]))
        chunks: list[list[str]] = []
        size = 0
        for k in keys:
            est = call.by_key[k].est_cost * call.client.price.batch
            if not call.budget.reserve(est):
                call.finish(k, skipped=True)
                continue
            call.reserved[k] = est
            n = len(json.dumps(call.entries[k], ensure_ascii=False, separators=(",", ":")).encode()) + 1
            # a little room for the envelope around the lines (Anthropic's JSON body)
            if not chunks or len(chunks[-1]) >= max_requests or size + n > max_bytes * 0.98:
                chunks.append([])
                size = 0
            chunks[-1].append(k)
            size += n
        return chunks

    async def _submit(self, call: _Call, keys: list[str]) -> list[_Batch]:
        """Submit `keys` in batches under the provider's limits, each recorded at once."""
        client, on_event = call.client, call.on_event
        out = []
        spec, base_url = client.spec, client.spec.base_urls[0]
        for chunk in self._chunks(call, keys):
            # the intent on disk before anything is sent: from here a crash is recovered
            intent, at = uuid.uuid4().hex, time.time()
            on_event(BatchStep("intent", intent, {
                "run_id": self.run_id, "provider": spec.provider, "model": spec.model, "endpoint": spec.endpoint_id,
                "base_url": strip_userinfo(base_url), "keys": list(chunk), "at": at}))

            def uploaded(file_id: str, intent: str = intent) -> None:
                on_event(BatchStep("uploaded", intent, {"file_id": file_id}))

            try:
                batch_id = await client.provider.batch_submit(
                    base_url, [call.entries[k] for k in chunk],
                    {"asyncbench_run": self.run_id, "asyncbench_intent": intent}, on_uploaded=uploaded)
            except ProviderError as exc:
                if exc.kind == "fatal":  # refused (4xx): no batch exists. Otherwise (a
                    on_event(BatchStep("void", intent))  # timeout) the next run looks it up.
                for k in chunk:
                    call.attempts[k] += 1
                    call.budget.settle(call.reserved.pop(k, 0.0), 0.0)
                    call.finish(k, error=exc)
                continue
            on_event(BatchStep("created", intent, {"batch_id": batch_id}))
            now = time.time()
            on_event(BatchRecord(batch_id, self.run_id, spec.provider, spec.model, spec.endpoint_id,
                                 strip_userinfo(base_url), chunk, now, intent=intent))
            for k in chunk:
                call.attempts[k] += 1
            self.submitted.append(batch_id)
            self._say(f"batch {batch_id}: submitted {len(chunk)} request(s) to {spec.label}")
            out.append(_Batch(batch_id, base_url, now, chunk))
        return out

    async def _collect(self, call: _Call, tracked: list[_Batch]) -> list[tuple[str, ProviderError]]:
        """Poll until every batch ended (or once, without waiting); hand their results on.
        Returns the requests to send again, with their last error."""
        retry: list[tuple[str, ProviderError]] = []
        delay = self.poll_s
        while True:
            for b in [b for b in tracked if not b.ended]:
                retry += await self._poll(call, b)
            if not self.wait or all(b.ended for b in tracked):
                return retry
            await anyio.sleep(delay)
            delay = min(delay * 1.5, self.max_poll_s)

    async def _poll(self, call: _Call, b: _Batch) -> list[tuple[str, ProviderError]]:
        """One poll of batch `b`; once it ended, its results. The requests to send again."""
        try:
            status = await call.client.provider.batch_poll(b.base_url, b.batch_id)
        except ProviderError as exc:
            if exc.kind != "fatal":
                return []
            b.ended = True  # the batch is gone (404): its requests go again
            call.on_event(BatchState(b.batch_id, "lost", {}, True))
            return [(k, exc) for k in b.keys if k in call.by_key]
        if (status.state, status.counts) != (b.state, b.counts):
            b.state, b.counts = status.state, status.counts
            counts = ", ".join(f"{k} {v}" for k, v in status.counts.items())
            self._say(f"batch {b.batch_id}: {status.state} ({counts})")
            call.on_event(BatchState(b.batch_id, status.state, status.counts))
        if not status.ended:
            return []
        retry = await self._results(call, b, status)
        b.ended = True
        # after the answers went to the engine (journal first): a crash before the engine
        # writes this re-attaches and finds them in the cache
        call.on_event(BatchState(b.batch_id, status.state, status.counts, True))
        return retry

    async def _results(self, call: _Call, b: _Batch, status: BatchStatus) -> list[tuple[str, ProviderError]]:
        """An ended batch's answers handed on; its requests to send again."""
        client = call.client
        results = {} if status.error else await client.provider.batch_results(b.base_url, b.batch_id)
        latency = (time.time() - b.submitted_at) * 1000
        retry: list[tuple[str, ProviderError]] = []
        for k in b.keys:
            if k not in call.by_key:
                continue  # answered meanwhile (another run), or not in this call
            got = results.get(k)
            if got is not None and not isinstance(got, NotRun):  # a request the batch ran
                call.stats.requests_sent += 1
            if got is None:
                got = ProviderError("fatal" if status.error else "transient",
                                    f"batch {b.batch_id} {status.state}: {status.error or 'no result'}")
            if isinstance(got, ProviderError):
                call.budget.settle(call.reserved.pop(k, 0.0), 0.0)
                if got.kind == "fatal":
                    call.finish(k, error=got)
                else:
                    retry.append((k, got))
                continue
            got.latency_ms = latency
            got.discount = client.price.batch
            checked(got, call.by_key[k].request)  # its usage bounded before it is priced (claims.py)
            call.budget.settle(call.reserved.pop(k, 0.0), client.price.cost(got.usage, got.discount))
            call.finish(k, response=got)
        return retry

    def describe(self) -> dict[str, JSON]:
        """What run.json records about the runner (its "backend" key)."""
        return {"name": "batch", "fallback": self.fallback, "wait": self.wait, "batches_submitted": list(self.submitted),
                "batches_reattached": list(self.attached), "pending_requests": self.pending}

    async def aclose(self) -> None:
        pass


async def _aiter(items: list[Job]) -> AsyncIterator[Job]:
    for item in items:
        yield item
