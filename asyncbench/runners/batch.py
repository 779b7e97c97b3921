"""BatchRunner (`--batch`): a run's uncached requests through the provider's batch API
(OpenAI Batch, Anthropic Message Batches) at the batch price (half of list).

- Jobs are split into batches under the provider's limits (requests and bytes per
  batch). Each submission is paid once: its intent (a client-made id, in the batch's
  metadata where the API has it) and each step after it (the uploaded file, the batch
  id) go to the batch journal (store/batch_journal.py) before the next step, without
  waiting for the store's lock; the store then records the batch and its request keys.
  A run interrupted anywhere (Ctrl-C, SIGKILL, `--no-wait`) is re-attached by the same
  command: submissions of dead processes are put in the store, or looked up at the
  provider by their intent, before anything is submitted again; requests in a batch not
  yet collected are never submitted again; the runner polls that batch instead.
- Batches are polled with a growing interval (`poll_s` up to `max_poll_s`); each change
  of state or counts is one line on stderr. An ended batch's results go to the engine's
  `on_outcome` as they are read, the path live answers take (cache, ledger, journal), and
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

import functools
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ..client import ModelClient
from ..errors import ProviderError, UserError
from ..scheduler import Budget, Job, Outcome, SchedulerStats
from ..secrets import strip_userinfo
from ..store.batch_journal import BatchJournal, finished_files, unresolved
from .base import MapChunks, add_stats
from .local import LocalRunner

if TYPE_CHECKING:
    from ..store import Store


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


class BatchRunner:
    name = "batch"
    map_chunks: MapChunks | None = None

    def __init__(self, timeout_s: float, max_attempts: int, *, wait: bool = True, fallback: str = "batch",
                 progress: bool | None = None, poll_s: float = 0.5, max_poll_s: float = 30.0) -> None:
        self.live = LocalRunner(timeout_s, max_attempts)
        self.max_attempts = max_attempts
        self.wait = wait
        self.fallback = fallback
        self.progress = progress is not False
        self.poll_s = poll_s
        self.max_poll_s = max_poll_s
        self._stats = SchedulerStats()
        self.store: Store | None = None
        self.run_id = ""
        self.aborted: str | None = None
        self.submitted: list[str] = []  # batch ids this process submitted
        self.attached: list[str] = []  # batch ids of earlier processes it collected from
        self.pending = 0  # requests left in batches not ended (--no-wait)

    def bind(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.journal = BatchJournal(store.path)

    async def _recover(self, client: ModelClient) -> None:
        """Submissions that dead processes journaled but the store does not hold: a batch
        id goes into the store; without one, the provider is asked whether the batch
        exists (its metadata names the intent) before anything is submitted again."""
        store = self.store
        assert store is not None
        subs = unresolved(store.path)
        mine = [s for s in subs if not s.done and s.provider == client.spec.provider
                and s.endpoint == client.spec.endpoint_id]
        known = {b.batch_id for b in await anyio.to_thread.run_sync(store.batches.rows)} if mine else set()
        for sub in mine:
            url = next((u for u in client.spec.base_urls if strip_userinfo(u) == sub.base_url),
                       client.spec.base_urls[0])
            batch_id = sub.batch_id
            if batch_id is None:
                try:
                    batch_id = await client.provider.batch_find(url, sub.intent, sub.at, len(sub.keys), known)
                except ProviderError as exc:
                    raise UserError(f"--batch: cannot check whether an interrupted submission of {len(sub.keys)} "
                                    f"request(s) became a batch ({exc.message}); run the same command again when "
                                    f"{client.spec.label} answers (nothing is submitted twice)") from None
                if batch_id is None:
                    self._say(f"an interrupted submission of {len(sub.keys)} request(s) never became a batch; "
                              "its requests are submitted now")
                    sub.done = True
                    continue
                self._say(f"batch {batch_id}: found at the provider (an interrupted submission of "
                          f"{len(sub.keys)} request(s)); not submitted again")
            if batch_id not in known:
                await anyio.to_thread.run_sync(store.batches.put, batch_id, sub.run_id, sub.provider, sub.model,
                                               sub.endpoint, sub.base_url, sub.keys, sub.at)
                known.add(batch_id)
            sub.done = True
        for path in finished_files(store.path, subs):
            path.unlink(missing_ok=True)

    def _say(self, line: str) -> None:
        if self.progress:
            print(f"asyncbench: {line}", file=sys.stderr, flush=True)

    async def run(self, client: ModelClient, jobs: AsyncIterable[Job], *, budget: Budget,
                  on_outcome: Callable[[Outcome], None]) -> list[Outcome]:
        provider = client.provider
        if provider.batch_limits is None:
            return await self.live.run(client, jobs, budget=budget, on_outcome=on_outcome)
        if self.store is None:
            raise RuntimeError("BatchRunner.run before bind(store, run_id)")
        store = self.store
        todo = [j async for j in jobs]
        outcomes: dict[int, Outcome] = {}
        by_key: dict[str, Job] = {}
        for job in todo:
            by_key.setdefault(job.request.key(), job)
        entries = {k: provider.batch_entry(j.request, k) for k, j in by_key.items()}
        attempts = dict.fromkeys(by_key, 0)
        reserved: dict[str, float] = {}
        endpoint = client.spec.endpoint_id
        await self._recover(client)
        # re-attach to batches an earlier process submitted and did not collect
        tracked: list[_Batch] = []
        held: set[str] = set()
        for batch_id, base_url, submitted_at, keys in await anyio.to_thread.run_sync(
                store.batches.open_holding, client.spec.provider, endpoint, list(by_key)):
            keys = [k for k in keys if k not in held]
            held.update(keys)
            url = next((u for u in client.spec.base_urls if strip_userinfo(u) == base_url), client.spec.base_urls[0])
            tracked.append(_Batch(batch_id, url, submitted_at, keys))
            self.attached.append(batch_id)
            for k in keys:
                attempts[k] += 1
                reserved[k] = by_key[k].est_cost * client.price.batch
                budget.reserved += reserved[k] if budget.max_cost is not None else 0.0
        if tracked:
            self._say(f"re-attached to {len(tracked)} batch(es) holding {len(held)} request(s); nothing of them "
                      "is submitted again")
        fresh = [k for k in by_key if k not in held]

        def finish(key: str, response: Any = None, error: ProviderError | None = None, skipped: bool = False) -> None:
            job = by_key[key]
            out = Outcome(job.index, response=response, error=error, attempts=attempts[key], skipped=skipped)
            outcomes[job.index] = out
            on_outcome(out)

        while True:
            tracked += await self._submit(client, fresh, entries, by_key, attempts, reserved, budget, finish)
            fresh = []
            retry = await self._collect(client, tracked, by_key, attempts, reserved, budget, finish)
            tracked = [b for b in tracked if not b.ended]
            if not self.wait:
                # one message for every pending request (one summary line, not one per request)
                pending = ProviderError("transient", "pending in a batch not yet ended; run the same command "
                                                     "again to collect it")
                for b in tracked:
                    for k in b.keys:
                        if k in by_key and by_key[k].index not in outcomes:
                            self.pending += 1
                            finish(k, error=pending)
            if not retry:
                break
            again = [k for k, _ in retry if attempts[k] < self.max_attempts]
            for k, err in retry:
                if attempts[k] >= self.max_attempts:
                    finish(k, error=err)
            if not again:
                break
            if self.fallback == "live":
                self._say(f"{len(again)} request(s) not answered in their batch: sending them live (list price)")
                live_jobs = [by_key[k] for k in again]
                for out in await self.live.run(client, _aiter(live_jobs), budget=budget, on_outcome=on_outcome):
                    outcomes[out.index] = out
                break
            self._say(f"{len(again)} request(s) not answered in their batch: submitting them in a new batch")
            fresh = again
        return [outcomes[j.index] for j in todo if j.index in outcomes]

    async def _submit(self, client: ModelClient, keys: list[str], entries: dict[str, dict[str, Any]],
                      by_key: dict[str, Job], attempts: dict[str, int], reserved: dict[str, float], budget: Budget,
                      finish: Callable[..., None]) -> list[_Batch]:
        """Submit `keys` in batches under the provider's limits, each recorded at once."""
        provider, store = client.provider, self.store
        assert provider.batch_limits is not None and store is not None
        max_requests, max_bytes = provider.batch_limits
        max_requests = int(os.environ.get("ASYNCBENCH_BATCH_MAX_REQUESTS", max_requests))
        max_bytes = int(os.environ.get("ASYNCBENCH_BATCH_MAX_BYTES", max_bytes))
        chunks: list[list[str]] = []
        size = 0
        for k in keys:
            est = by_key[k].est_cost * client.price.batch
            if not budget.reserve(est):
                finish(k, skipped=True)
                continue
            reserved[k] = est
            n = len(json.dumps(entries[k], ensure_ascii=False, separators=(",", ":")).encode()) + 1
            # a little room for the envelope around the lines (Anthropic's JSON body)
            if not chunks or len(chunks[-1]) >= max_requests or size + n > max_bytes * 0.98:
                chunks.append([])
                size = 0
            chunks[-1].append(k)
            size += n
        out = []
        base_url = client.spec.base_urls[0]
        spec, journal = client.spec, self.journal
        for chunk in chunks:
            # the intent on disk before anything is sent: from here a crash is recovered
            intent, at = uuid.uuid4().hex, time.time()
            journal.write("intent", intent, run_id=self.run_id, provider=spec.provider, model=spec.model,
                          endpoint=spec.endpoint_id, base_url=strip_userinfo(base_url), keys=chunk, at=at)
            try:
                batch_id = await provider.batch_submit(
                    base_url, [entries[k] for k in chunk], {"asyncbench_run": self.run_id, "asyncbench_intent": intent},
                    on_uploaded=functools.partial(self._uploaded, intent))
            except ProviderError as exc:
                if exc.kind == "fatal":  # refused (4xx): no batch exists. Otherwise (a
                    journal.write("void", intent)  # timeout) the next run looks it up.
                for k in chunk:
                    attempts[k] += 1
                    budget.settle(reserved.pop(k, 0.0), 0.0)
                    finish(k, error=exc)
                continue
            journal.write("created", intent, batch_id=batch_id)
            now = time.time()
            await anyio.to_thread.run_sync(store.batches.put, batch_id, self.run_id, client.spec.provider,
                                           client.spec.model, client.spec.endpoint_id, strip_userinfo(base_url),
                                           chunk, now)
            journal.write("recorded", intent)
            for k in chunk:
                attempts[k] += 1
            self.submitted.append(batch_id)
            self._say(f"batch {batch_id}: submitted {len(chunk)} request(s) to {client.spec.label}")
            out.append(_Batch(batch_id, base_url, now, chunk))
        return out

    def _uploaded(self, intent: str, file_id: str) -> None:
        self.journal.write("uploaded", intent, file_id=file_id)

    async def _collect(self, client: ModelClient, tracked: list[_Batch], by_key: dict[str, Job],
                       attempts: dict[str, int], reserved: dict[str, float], budget: Budget,
                       finish: Callable[..., None]) -> list[tuple[str, ProviderError]]:
        """Poll until every batch ended (or once, without waiting); hand their results on.
        Returns the requests to send again, with their last error."""
        provider, store = client.provider, self.store
        assert store is not None
        retry: list[tuple[str, ProviderError]] = []
        delay = self.poll_s
        while True:
            for b in [b for b in tracked if not b.ended]:
                try:
                    status = await provider.batch_poll(b.base_url, b.batch_id)
                except ProviderError as exc:
                    if exc.kind == "fatal":  # the batch is gone (404): its requests go again
                        b.ended = True
                        retry += [(k, exc) for k in b.keys if k in by_key]
                        await anyio.to_thread.run_sync(store.batches.update, b.batch_id, "lost", {}, True)
                    continue
                if (status.state, status.counts) != (b.state, b.counts):
                    b.state, b.counts = status.state, status.counts
                    counts = ", ".join(f"{k} {v}" for k, v in status.counts.items())
                    self._say(f"batch {b.batch_id}: {status.state} ({counts})")
                    await anyio.to_thread.run_sync(store.batches.update, b.batch_id, status.state, status.counts)
                if not status.ended:
                    continue
                results = {} if status.error else await provider.batch_results(b.base_url, b.batch_id)
                latency = (time.time() - b.submitted_at) * 1000
                for k in b.keys:
                    if k not in by_key:
                        continue  # answered meanwhile (another run), or not in this call
                    got = results.get(k)
                    if got is not None:  # a request the batch ran: booked where its answer lands
                        self._stats.requests_sent += 1
                    if got is None:
                        got = ProviderError("fatal" if status.error else "transient",
                                            f"batch {b.batch_id} {status.state}: {status.error or 'no result'}")
                    if isinstance(got, ProviderError):
                        budget.settle(reserved.pop(k, 0.0), 0.0)
                        if got.kind == "fatal":
                            finish(k, error=got)
                        else:
                            retry.append((k, got))
                        continue
                    got.latency_ms = latency
                    got.discount = client.price.batch
                    budget.settle(reserved.pop(k, 0.0), client.price.cost(got.usage, got.discount))
                    finish(k, response=got)
                b.ended = True
                # after the answers went to the engine (journal first): a crash before this
                # line re-attaches and finds them in the cache
                await anyio.to_thread.run_sync(store.batches.update, b.batch_id, status.state, status.counts, True)
            if not self.wait or all(b.ended for b in tracked):
                return retry
            await anyio.sleep(delay)
            delay = min(delay * 1.5, self.max_poll_s)

    def stats(self) -> SchedulerStats:
        total = SchedulerStats()
        add_stats(total, self._stats)
        add_stats(total, self.live.stats())  # live fallback and clients without a batch API
        return total

    def endpoint_health(self, client: ModelClient) -> list[dict[str, Any]]:
        return client.pool.health()

    def describe(self) -> dict[str, Any]:
        return {"name": "batch", "fallback": self.fallback, "wait": self.wait, "batches_submitted": self.submitted,
                "batches_reattached": self.attached, "pending_requests": self.pending}

    def close(self) -> None:
        journal: BatchJournal | None = getattr(self, "journal", None)
        if journal is not None:
            journal.close()


async def _aiter(items: list[Job]) -> AsyncIterator[Job]:
    for item in items:
        yield item
