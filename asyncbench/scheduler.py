"""Async fan-out of requests to an endpoint pool under rate limits, with retries.

- A bounded work queue feeds a fixed set of workers (concurrency x endpoints): memory
  stays flat whatever the number of requests; never one gather over everything.
- Before each attempt a worker takes from the RPM/TPM limiter (limits.py), reserves the
  request's estimated cost against `--max-cost`, and picks the endpoint with the fewest
  outstanding requests among the healthy ones.
- Retries (a plain loop in `_try`): rate-limited and transient failures only,
  exponential back-off with jitter, bounded by attempts and by time (the deadline is
  checked before a pause, so no pause runs past it); a 429 pauses the whole endpoint
  group for its Retry-After (cut to 60 s in limits.py, and to `timeout_s`). Fatal errors (auth, bad request,
  context too long) are never retried.
- A server cannot hold a run: each attempt has one total deadline (`timeout_s`) that a
  server dripping bytes cannot extend, and a run whose endpoints have answered nothing
  but errors or 429s — `DEAD_AFTER_JOBS` requests in a row, or for one `timeout_s` since
  its first request — ends partial at once (`dead`).
- An endpoint that fails `fail_threshold` times in a row is taken out and probed back in
  after a growing delay by a single request.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TypedDict

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .claims import checked
from .errors import ProviderError
from .limits import Limiter
from .providers.base import Provider
from .types import Request, Response


@dataclass
class Job:
    index: int
    request: Request
    tokens: int  # prompt tokens + max_tokens, charged against TPM before sending
    est_cost: float = 0.0


@dataclass
class Outcome:
    index: int
    response: Response | None = None
    error: ProviderError | None = None
    attempts: int = 0
    skipped: bool = False  # never sent: budget reached


# Jobs in a row that exhausted their attempts on transient errors or 429s, with not one
# success in the run, after which the endpoints are taken to be dead and the rest fail at
# once.
DEAD_AFTER_JOBS = 8


class EndpointDead(ProviderError):
    """Every request so far failed: the run ends (partial) instead of retrying the rest."""


class EndpointHealth(TypedDict):
    """Served/failed of one endpoint (run.json "endpoints")."""

    url: str
    served: int
    failed: int
    healthy: bool


@dataclass
class SchedulerStats:
    requests_sent: int = 0
    retries: int = 0
    rate_limited: int = 0
    transient_errors: int = 0
    fatal_errors: int = 0
    budget_skipped: int = 0


class Budget:
    """`--max-cost`: refuse to issue a request once spent + in flight + its estimate would
    pass the cap. After the first refusal nothing more is issued (a cheaper request could
    fit, but a run that stops part-way should stop at one clear point)."""

    def __init__(self, max_cost: float | None, spent: float = 0.0) -> None:
        self.max_cost = max_cost
        self.spent = spent  # by earlier invocations of the run: the cap is the run's
        self.reserved = 0.0
        self.exhausted = False

    def reserve(self, amount: float) -> bool:
        if self.max_cost is None:
            return True
        if self.exhausted or self.spent + self.reserved + amount > self.max_cost:
            self.exhausted = True
            return False
        self.reserved += amount
        return True

    def settle(self, reserved: float, actual: float) -> None:
        if self.max_cost is not None:
            self.reserved -= reserved
        self.spent += actual


@dataclass
class Endpoint:
    url: str
    outstanding: int = 0
    fail_streak: int = 0
    down_until: float = 0.0
    backoff_s: float = 1.0
    probing: bool = False
    served: int = 0
    failed: int = 0

    def available(self, now: float, concurrency: int) -> bool:
        if self.outstanding >= concurrency:
            return False
        if self.down_until == 0.0:
            return True
        # down: one probe request once the back-off has passed
        return now >= self.down_until and not self.probing


class EndpointPool:
    """Least-outstanding-requests routing with health tracking."""

    def __init__(self, urls: list[str], concurrency: int, fail_threshold: int = 3,
                 max_backoff_s: float = 30.0) -> None:
        self.endpoints = [Endpoint(u) for u in urls]
        self.concurrency = concurrency
        self.fail_threshold = fail_threshold
        self.max_backoff_s = max_backoff_s
        self._changed = anyio.Event()
        self._waiting = 0  # acquirers waiting for a change

    def _notify(self) -> None:
        """Wake the waiting acquirers. With none (the workers never outnumber the slots,
        so only an endpoint that is down makes one wait) no new Event is made: one per
        request was ~2% of a fast run's CPU."""
        if self._waiting:
            self._changed.set()
            self._changed = anyio.Event()

    async def acquire(self) -> Endpoint:
        while True:
            now = time.monotonic()
            candidates = [e for e in self.endpoints if e.available(now, self.concurrency)]
            if candidates:
                ep = min(candidates, key=lambda e: (e.outstanding, e.served))
                if ep.down_until:
                    ep.probing = True
                ep.outstanding += 1
                return ep
            changed = self._changed
            downs = [e.down_until for e in self.endpoints if e.down_until and not e.probing]
            wait = max(0.01, min(downs) - now) if downs else None
            self._waiting += 1
            try:
                with anyio.move_on_after(wait if wait is not None else 3600):
                    await changed.wait()
            finally:
                self._waiting -= 1

    def release(self, ep: Endpoint, ok: bool | None) -> None:
        """ok=True success, False transient failure (counts toward health), None neutral."""
        ep.outstanding -= 1
        if ok:
            ep.served += 1
            ep.fail_streak = 0
            ep.down_until = 0.0
            ep.backoff_s = 1.0
        elif ok is False:
            ep.failed += 1
            ep.fail_streak += 1
            # Taking an endpoint out only helps when another can take its work: with one,
            # failures slow the retries of the failing request only (its own back-off),
            # never the whole run. The back-off grows once per outage (when the endpoint is
            # taken out, or when its probe fails), not once per request that was in flight.
            if len(self.endpoints) > 1 and (ep.probing or (ep.fail_streak >= self.fail_threshold
                                                           and ep.down_until == 0.0)):
                ep.down_until = time.monotonic() + ep.backoff_s
                ep.backoff_s = min(ep.backoff_s * 2, self.max_backoff_s)
        ep.probing = False
        self._notify()

    def capacity(self) -> int:
        """Requests the pool can have in flight at once (concurrency x endpoints)."""
        return self.concurrency * len(self.endpoints)

    def health(self) -> list[EndpointHealth]:
        now = time.monotonic()
        return [{"url": e.url, "served": e.served, "failed": e.failed,
                 "healthy": e.down_until == 0.0 or now >= e.down_until} for e in self.endpoints]


# Authentication and permission refusals: the key is wrong for every request, not this one.
AUTH_STATUSES = (401, 403)


@dataclass
class Scheduler:
    provider: Provider
    pool: EndpointPool
    limiter: Limiter
    budget: Budget = field(default_factory=lambda: Budget(None))
    timeout_s: float = 120.0
    max_attempts: int = 6  # for transient failures
    max_rate_limited_attempts: int = 60
    max_retry_s: float = 900.0
    on_outcome: Callable[[Outcome], None] | None = None
    on_attempt: Callable[[], None] | None = None
    cost_of: Callable[[Response], float] = lambda r: 0.0
    # the provider's send ends within timeout_s by itself (ProviderBase.ends_in_time)
    ends_in_time: bool = False
    stats: SchedulerStats = field(default_factory=SchedulerStats)
    # Set when the endpoints were found dead: one line naming them and the last error.
    dead: str | None = None
    # what a refused key tells the user to fix (ModelClient.key_hint: the variable to set)
    key_hint: str = "check the API key"
    _successes: int = 0
    _failed_in_a_row: int = 0
    _first_sent: float | None = None  # monotonic time of the run's first attempt
    _pauses: set[anyio.CancelScope] = field(default_factory=set)  # waits `_declare_dead` ends

    def _give_up(self, exc: ProviderError, attempts: int, elapsed_s: float) -> bool:
        """After a failed attempt: stop retrying? A fatal error at once; a rate limit after
        many attempts (it is the provider asking to wait, not a failure); anything else
        after a few; all of them once the job has been retried for `max_retry_s`."""
        if exc.kind == "fatal" or elapsed_s > self.max_retry_s:
            return True
        return attempts >= (self.max_rate_limited_attempts if exc.kind == "rate_limited" else self.max_attempts)

    @staticmethod
    def _wait(exc: ProviderError, attempts: int) -> float:
        """The pause before the next attempt, after `attempts` failed ones."""
        if exc.kind == "rate_limited":
            # the limiter is already paused for Retry-After; a little jitter de-synchronises
            # the workers that all wake up at the same instant
            return random.uniform(0.0, 0.05) if exc.retry_after is not None else \
                random.uniform(0, min(30.0, 0.5 * 2 ** attempts))
        # Full-jitter exponential back-off for transient failures (0.2, 0.4, 0.8 ... 10 s at
        # most): a 5xx or a dropped connection is usually one bad request or replica, and a
        # long first wait is what made faulty runs many times slower than clean ones.
        return random.uniform(0, min(10.0, 0.1 * 2 ** attempts))

    async def _attempt(self, job: Job) -> Response:
        if not self.budget.reserve(job.est_cost):
            raise _BudgetReached()
        try:
            if not self.limiter.free():
                await self._unless_dead(self.limiter.acquire(job.tokens))
            ep = await self.pool.acquire()
        except BaseException:
            self.budget.settle(job.est_cost, 0.0)
            raise
        if self.dead is not None:  # declared while this one waited (a refused key): not sent
            self.budget.settle(job.est_cost, 0.0)
            self.pool.release(ep, None)
            raise _Dead()
        self.stats.requests_sent += 1
        if self._first_sent is None:
            self._first_sent = time.monotonic()
        if self.on_attempt:
            self.on_attempt()
        try:
            try:
                # one total deadline for the attempt, whatever the transport: an SDK's
                # timeout is per read, which a server sending a byte at a time resets
                # (a provider whose own deadline is total already needs no second one)
                with nullcontext() if self.ends_in_time else anyio.fail_after(self.timeout_s) as deadline:
                    if deadline is not None:  # endpoints declared dead end this attempt too (_declare_dead)
                        self._pauses.add(deadline)
                    try:
                        response = _validated(await self.provider.send(job.request, ep.url, self.timeout_s),
                                              job.request)
                    finally:
                        if deadline is not None:
                            self._pauses.discard(deadline)
                if deadline is not None and deadline.cancelled_caught:
                    raise _Dead()
            except TimeoutError:
                raise ProviderError("transient", f"no complete answer from {ep.url} within --timeout "
                                                 f"{self.timeout_s:g}s") from None
            except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
                # a response of a shape no server should send: retried like a dropped connection
                raise ProviderError("transient", f"malformed response from {ep.url}: "
                                                 f"{type(exc).__name__}: {exc}"[:300]) from None
        except ProviderError as exc:
            self.budget.settle(job.est_cost, 0.0)
            self.pool.release(ep, False if exc.kind == "transient" else None)
            self.limiter.observe(exc.ratelimit)
            if exc.kind == "rate_limited":
                self.stats.rate_limited += 1
                # never a longer pause for a rate limit than for an answer (--timeout)
                self.limiter.pause(min(exc.retry_after if exc.retry_after is not None else 1.0, self.timeout_s))
            elif exc.kind == "transient":
                self.stats.transient_errors += 1
            else:
                self.stats.fatal_errors += 1
            raise
        except BaseException:
            self.budget.settle(job.est_cost, 0.0)
            self.pool.release(ep, None)
            raise
        self.pool.release(ep, True)
        self.limiter.observe(response.ratelimit)
        self.budget.settle(job.est_cost, self.cost_of(response))
        return response

    async def _unless_dead(self, wait: Awaitable[None]) -> None:
        """Await a pause (the limiter's, a back-off) that ends early, with `_Dead`, when the
        endpoints are declared dead meanwhile: a 429's pause must not outlive the run."""
        with anyio.CancelScope() as scope:
            self._pauses.add(scope)
            try:
                await wait
            finally:
                self._pauses.discard(scope)
        if scope.cancelled_caught:
            raise _Dead()

    async def process(self, job: Job) -> Outcome:
        """One job through its retries (the Ray workers' entry point)."""
        return await self._process(job)

    async def _process(self, job: Job) -> Outcome:
        if self.dead is not None:
            return self._dead_outcome(job, 0)
        outcome = await self._try(job)
        if outcome.response is not None:
            self._successes += 1
            self._failed_in_a_row = 0
        elif outcome.error is not None and outcome.error.status in AUTH_STATUSES:
            # a refused key refuses every request alike: nothing more is sent
            self._declare_dead("", outcome.error)
        elif outcome.error is not None and outcome.error.kind != "fatal" and self._successes == 0 \
                and not isinstance(outcome.error, EndpointDead):
            self._failed_in_a_row += 1
            if self._failed_in_a_row >= DEAD_AFTER_JOBS:
                self._declare_dead(f"{self._failed_in_a_row} in a row, {outcome.attempts} attempts each",
                                   outcome.error)
        return outcome

    def _dead_outcome(self, job: Job, attempts: int) -> Outcome:
        return Outcome(job.index, error=EndpointDead("transient", self.dead or "endpoints dead"), attempts=attempts)

    def _declare_dead(self, how: str, last: ProviderError) -> None:
        """The endpoints are dead: say why once, and end every pause now waiting and every
        attempt in flight under the scheduler's own deadline (an SDK's: endless 100
        Continue heads held those to their deadline, past the run's 2x --timeout)."""
        if self.dead is None:
            urls = ", ".join(e.url for e in self.pool.endpoints)
            if last.status in AUTH_STATUSES:
                self.dead = f"{urls} refused the API key ({last.message}); {self.key_hint}, then run the same command again"
            else:
                what = "refused every request with 429" if last.kind == "rate_limited" else "failed every request"
                self.dead = f"{urls} {what} ({how}); last error: {last.message}"
        for scope in list(self._pauses):
            scope.cancel()

    def _stalled(self, now: float) -> bool:
        """Nothing but failures and 429s for one `timeout_s` since the run's first request:
        a server that only rate-limits, or only times out, cannot hold the run longer."""
        return self._successes == 0 and self._first_sent is not None and now - self._first_sent >= self.timeout_s

    async def _try(self, job: Job) -> Outcome:
        """Attempts until an answer, a fatal error or `_give_up`. A plain loop: a retry
        library's per-call machinery cost ~40 µs a request, 5% of a fast local run."""
        started = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            if attempts > 1:
                self.stats.retries += 1
            try:
                return Outcome(job.index, response=await self._attempt(job), attempts=attempts)
            except _BudgetReached:
                self.stats.budget_skipped += 1
                return Outcome(job.index, attempts=attempts - 1, skipped=True)
            except _Dead:
                return self._dead_outcome(job, attempts - 1)
            except ProviderError as exc:
                now = time.monotonic()
                if exc.kind != "fatal" and self._stalled(now):
                    self._declare_dead(f"for {now - (self._first_sent or now):.0f} s, --timeout "
                                       f"{self.timeout_s:g}s", exc)
                if self.dead is not None and exc.kind != "fatal":
                    return self._dead_outcome(job, attempts)
                pause = self._wait(exc, attempts)
                held = min(exc.retry_after, self.timeout_s) if exc.kind == "rate_limited" and exc.retry_after else 0.0
                # the deadline before the pause (and the limiter's hold after it): a wait
                # that would end past it is not started
                if self._give_up(exc, attempts, now + pause + held - started):
                    return Outcome(job.index, error=_kept(exc), attempts=attempts)
                try:
                    await self._unless_dead(anyio.sleep(pause))
                except _Dead:
                    return self._dead_outcome(job, attempts)

    async def run(self, jobs: Iterable[Job] | AsyncIterable[Job]) -> list[Outcome]:
        """Process every job; outcomes come back in the order the jobs were given (and via
        `on_outcome` as they complete). `jobs` may be an async iterator, so that sending
        starts while later jobs are still being prepared."""
        outcomes: dict[int, Outcome] = {}
        order: list[int] = []
        n_workers = self.pool.capacity()
        if isinstance(jobs, list):
            n_workers = max(1, min(len(jobs), n_workers))
        send, receive = anyio.create_memory_object_stream[Job](max_buffer_size=2 * n_workers)

        async def worker(inbox: MemoryObjectReceiveStream[Job]) -> None:
            async with inbox:
                while (job := await _next(inbox)) is not None:
                    outcome = await self._process(job)
                    outcomes[job.index] = outcome
                    if self.on_outcome:
                        self.on_outcome(outcome)

        source_error: Exception | None = None
        async with anyio.create_task_group() as tg:
            for _ in range(n_workers):
                tg.start_soon(worker, receive.clone())
            receive.close()
            async with send:
                try:
                    async for job in jobs if isinstance(jobs, AsyncIterable) else _aiter(jobs):
                        order.append(job.index)
                        await _put(send, job)
                except Exception as exc:
                    # A failing source (a malformed line in a streamed file) stops the
                    # feeding; requests already sent are paid for, so let them complete.
                    source_error = exc
        if source_error is not None:
            raise source_error
        return [outcomes[i] for i in order]


def _kept(exc: ProviderError) -> ProviderError:
    """A failure as an outcome keeps it: without its traceback, whose frames hold the
    scheduler, its request and everything they reach. Kept with them, each failure was a
    reference cycle that only the cyclic collector frees, so a window's prompts (100-
    LongBench's are ~0.5 MB each) outlived it: 60 rows of 128k peaked 280 MB higher."""
    exc.__traceback__ = exc.__cause__ = exc.__context__ = None
    return exc


async def _next(inbox: MemoryObjectReceiveStream[Job]) -> Job | None:
    """The next job (None: no more). One already waiting is taken without a checkpoint:
    `async for` on the stream yields to the event loop for every item, which was a few
    percent of a fast run's CPU; the worker yields anyway when it sends the request."""
    try:
        return inbox.receive_nowait()
    except anyio.WouldBlock:
        try:
            return await inbox.receive()
        except anyio.EndOfStream:
            return None
    except anyio.EndOfStream:
        return None


async def _put(outbox: MemoryObjectSendStream[Job], job: Job) -> None:
    """Hand a job to the workers; with room in the buffer, without a checkpoint (`send`
    yields to the event loop for every item first; the source yields when it must wait)."""
    try:
        outbox.send_nowait(job)
    except anyio.WouldBlock:
        await outbox.send(job)


async def _aiter(items: Iterable[Job]) -> AsyncIterator[Job]:
    for item in items:
        yield item


class _BudgetReached(Exception):
    pass


class _Dead(Exception):
    """A pause ended because the endpoints were declared dead meanwhile."""


def _validated(response: Response, request: Request) -> Response:
    """Values from a server, checked before they reach the store or the budget: text is
    text, token counts are counts within what `request` can have used (claims.py: out of
    bounds, booked at the bound and flagged)."""
    if not isinstance(response.text, str):
        raise TypeError(f"answer text is {type(response.text).__name__}, not a string")
    response.text = _unicode(response.text)
    checked(response, request)
    if response.finish_reason is not None:
        response.finish_reason = _unicode(str(response.finish_reason))
    return response


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unicode(text: str) -> str:
    """`text` with each lone surrogate (JSON's "\\ud800" parses to one, but no UTF-8 file,
    journal or store takes it) as U+FFFD: the answer was paid for and is kept."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text
