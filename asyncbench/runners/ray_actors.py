"""What the Ray backend runs inside the cluster: generation workers (async actors
running the ordinary scheduler on the batches the driver hands them, outcomes and
counters streamed back) and the limiter actor they lease rate-limit tokens from in
blocks.

Both are long-lived on a running cluster: named detached actors that every run of the
same code reuses (starting a Ray worker process and importing the engine costs seconds
to tens of seconds per run; reusing one, a few actor calls). A driver `attach`es to each
with its own id, opens its endpoint groups (or limiter keys) under it, renews the
attachment from a thread while it runs and detaches at its end (closing what it opened:
the API key goes with its group). A driver that dies without detaching expires after
`ttl_s`, its groups with it; an actor with no driver attached for `idle_s` ends itself.
"""

from __future__ import annotations

import asyncio
import pickle
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Protocol, TypedDict

import anyio

from ..errors import ProviderError
from ..limits import RateLimiter
from ..providers import ModelSpec, make_provider
from ..providers.base import Provider
from ..scheduler import EndpointHealth, EndpointPool, Job, Outcome, Scheduler, SchedulerStats
from .ray_connect import import_ray

# A driver's attachment lapses this long after its last renewal (it renews 4x as often).
TTL_S = 60.0
# A pooled actor (worker, limiter host) with no driver attached this long ends itself.
IDLE_S = 600.0
# How long a worker gathers outcomes and counters before sending them, unless two pool
# capacities of outcomes (a whole batch, at most) or the batch's last are in first:
# under load one message carries dozens, and a message costs both sides about what a
# request does (a message per half capacity took ~10% more CPU on 20,000 small requests
# than one per capacity, and that ~5% more than one per two, bench/ray_backend.md).
FLUSH_S = 0.05
# The limiter key of a shared limiter (--ray-shared-limiter): it holds that one limit.
SHARED = ""


class WorkerReport(TypedDict):
    """What a worker's `take_stats` hands the driver at a run's end: the counters not yet
    sent with outcomes, the limiter leases it took, its endpoints' health, whether it
    gave up."""

    stats: dict[str, int]
    leases: int
    health: list[EndpointHealth]
    dead: str | None


@dataclass(frozen=True)
class Progress:
    """One message of a batch's stream: the outcomes finished since the last message and
    the group's counters since then (requests sent, retries, 429s...), so what a worker
    sent is known as it goes, not only if it lives to the run's end (a lost node's
    requests are counted like any others)."""

    outcomes: list[Outcome]
    stats: dict[str, int] | None


class _Lease(Protocol):
    def remote(self, key: str, waiting: int, tokens: int, info: dict[str, float], /) -> Awaitable[int]: ...


class _Pause(Protocol):
    def remote(self, key: str, seconds: float, /) -> object: ...


class LimiterHandle(Protocol):
    """The Ray actor handle of a limiter actor (LimiterActor below): its two methods,
    called with `.remote` and the key of the limit; a lease's ObjectRef is awaited for
    the grant."""

    @property
    def lease(self) -> _Lease: ...

    @property
    def pause(self) -> _Pause: ...


class LeasedLimiter:
    """The scheduler's limiter interface inside a worker: requests and tokens are leased
    from the group's limiter actor in blocks, one call for every request then waiting in
    this worker (a block is used at once: leases kept for later would let a worker send
    a stored burst on top of the bucket's). No call at all while no limit applies: no
    `--rpm`/`--tpm`, no rate-limit header seen, no 429."""

    def __init__(self, handle: LimiterHandle, key: str, limited: bool) -> None:
        self.handle = handle
        self.key = key
        self.limited = limited
        self.requests = 0
        self.tokens = 0
        self.waiting = 0
        self.leases = 0  # calls to the limiter actor
        self.paused_until = 0.0
        self.info: dict[str, float] = {}  # the latest headers, sent with the next lease
        self._lock: anyio.Lock | None = None

    def free(self) -> bool:
        return not self.limited and time.monotonic() >= self.paused_until

    async def acquire(self, tokens: int) -> None:
        wait = self.paused_until - time.monotonic()
        if wait > 0:
            await anyio.sleep(wait)
        if not self.limited:
            return
        if self._lock is None:  # anyio primitives are made inside the actor's event loop
            self._lock = anyio.Lock()
        self.waiting += 1
        try:
            async with self._lock:  # one lease in flight per worker; FIFO
                if self.requests < 1 or self.tokens < tokens:
                    info, self.info = self.info, {}
                    granted = await self.handle.lease.remote(self.key, self.waiting, tokens, info)
                    self.leases += 1
                    self.requests += granted
                    self.tokens += granted * tokens
                self.requests -= 1
                self.tokens -= tokens
        finally:
            self.waiting -= 1

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, time.monotonic() + seconds)
        self.limited = True  # a 429: a limit applies, whatever was configured
        self.handle.pause.remote(self.key, seconds)

    def observe(self, info: dict[str, float]) -> None:
        if info:
            self.info = dict(info)
            if info.get("limit_requests") or info.get("limit_tokens"):
                self.limited = True


def limits_text(rpm: float | None, tpm: float | None) -> str:
    """`--rpm 600 --tpm none`: a limiter's limits as the user gives them."""
    return " ".join(f"--{k} {'none' if v is None else f'{v:g}'}" for k, v in (("rpm", rpm), ("tpm", tpm)))



class Attached:
    """The drivers using a long-lived actor: each attaches, renews every `ttl_s / 4`
    (from a thread of its own, runner side) and detaches at its end. A driver that stops
    renewing for `ttl_s` is dropped with what it opened (`_dropped`); with no driver
    attached for `idle_s`, the actor ends itself."""

    def __init__(self, ttl_s: float, idle_s: float) -> None:
        self.ttl_s = ttl_s
        self.idle_s = idle_s
        self.drivers: dict[str, float] = {}  # driver id -> when it last renewed
        self.idle_since = time.monotonic()  # since when no driver is attached
        self.closing = False
        self._reaper: asyncio.Task[None] | None = None

    def _join(self, driver: str) -> None:
        if self._reaper is None and self.ttl_s > 0:  # made inside the actor's event loop
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        self.drivers[driver] = time.monotonic()

    async def renew(self, driver: str) -> None:
        if driver in self.drivers:
            self.drivers[driver] = time.monotonic()

    async def detach(self, driver: str) -> bool:
        """Drop `driver` and what it opened; True when the actor is now closing."""
        self.drivers.pop(driver, None)
        self._dropped(driver)
        if not self.drivers:
            self.idle_since = time.monotonic()
        return self.closing

    def _dropped(self, driver: str) -> None:
        """What a driver opened goes with it."""

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(min(self.ttl_s, self.idle_s) / 4)
            now = time.monotonic()
            for driver, seen in list(self.drivers.items()):
                if now - seen > self.ttl_s:
                    del self.drivers[driver]
                    self._dropped(driver)
                    self.idle_since = now
            if self.drivers:
                continue
            if self.closing or now - self.idle_since > self.idle_s:
                self.closing = True
                ray = import_ray()
                ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
                return


class Buckets:
    """One endpoint group's RateLimiter, handed out in leases (made inside the actor's
    event loop: anyio primitives bind to it)."""

    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self.limiter = RateLimiter(rpm, tpm)
        self.lock = anyio.Lock()

    async def lease(self, n: int, tokens: int, info: dict[str, float]) -> int:
        """Up to `n` requests of `tokens` tokens each, charged now (a block never bigger
        than the request bucket holds); how many were granted."""
        lim = self.limiter
        lim.observe(info)
        if lim.requests is not None:
            n = max(1, min(n, int(lim.requests.capacity)))
        async with self.lock:
            while True:
                now = time.monotonic()
                wait = max(0.0, lim.paused_until - now)
                if lim.requests is not None:
                    wait = max(wait, lim.requests.wait_time(n, now))
                if lim.tokens is not None:
                    wait = max(wait, lim.tokens.wait_time(n * tokens, now))
                if wait <= 0:
                    break
                lim.stats.waited_s += wait
                await anyio.sleep(wait)
            if lim.requests is not None:
                lim.requests.take(n)
            if lim.tokens is not None:
                lim.tokens.take(n * tokens)
        return n


class LimiterActor(Attached):
    """Rate limits shared by every worker of an endpoint group through leases (an async
    actor: a lease waiting for its bucket does not block other calls), under a key.

    Two uses. Pooled (the default): one per driver node, reused by every run; a run opens
    a key per provider account and closes it at its end. Shared (`--ray-shared-limiter`,
    ray_shared.py): a named actor holding the one limit (`shared`) several drivers lease
    from; the last driver to detach kills it, and it never outlives its last user by
    more than about twice `ttl_s` (its `idle_s`)."""

    def __init__(self, ttl_s: float, idle_s: float, shared: tuple[float | None, float | None] | None = None) -> None:
        super().__init__(ttl_s, idle_s)
        self.shared = shared
        self.keys: dict[str, Buckets] = {}
        self.owner: dict[str, str] = {}  # key -> the driver that opened it

    async def attach(self, driver: str, rpm: float | None, tpm: float | None) -> str:
        """A shared limiter: "" when `driver` now shares it; "closing" when it is going
        away (make a new one); else what it holds that differs from the driver's limits."""
        if self.closing:
            return "closing"
        if (rpm, tpm) != self.shared:
            return f"holds {limits_text(*self.shared)}" if self.shared else "is not a shared limiter"
        if SHARED not in self.keys:
            self.keys[SHARED] = Buckets(rpm, tpm)
        self._join(driver)
        return ""

    async def detach(self, driver: str) -> bool:
        await super().detach(driver)
        if self.shared is not None and not self.drivers:
            self.closing = True  # the last user of a shared limiter: it goes
        return self.closing

    async def open(self, driver: str, key: str, rpm: float | None, tpm: float | None) -> None:
        """A pooled limiter: a limit under `key` for `driver`'s run."""
        self._join(driver)
        self.keys[key] = Buckets(rpm, tpm)
        self.owner[key] = driver

    def _dropped(self, driver: str) -> None:
        for key in [k for k, d in self.owner.items() if d == driver]:
            del self.keys[key], self.owner[key]

    async def lease(self, key: str, n: int, tokens: int, info: dict[str, float]) -> int:
        return await self.keys[key].lease(n, tokens, info)

    async def pause(self, key: str, seconds: float) -> None:
        buckets = self.keys.get(key)
        if buckets is not None:
            buckets.limiter.pause(seconds)


class _Group:
    """One driver's endpoint group inside a worker: its scheduler (retries, endpoint pool,
    leased limiter) and the batch streams waiting to report."""

    def __init__(self, driver: str, provider: Provider, scheduler: Scheduler, pool: EndpointPool,
                 limiter: LeasedLimiter, delay_s: float) -> None:
        self.driver = driver
        self.provider = provider
        self.scheduler = scheduler
        self.pool = pool
        self.limiter = limiter
        self.delay_s = delay_s
        self.slots = asyncio.Semaphore(pool.capacity())
        self.enough = 2 * pool.capacity()  # outcomes that make a message at once
        # the batch streams now running, each by its `arm` (report within FLUSH_S)
        self.streams: dict[Callable[[], None], None] = {}
        scheduler.on_attempt = self.notify

    def notify(self) -> None:
        """A request left: one stream reports the counters within FLUSH_S."""
        for arm in self.streams:
            arm()
            return

    def take_stats(self) -> dict[str, int] | None:
        """The scheduler's counters since the last call (None: nothing happened)."""
        stats = self.scheduler.stats
        if not any(vars(stats).values()):
            return None
        self.scheduler.stats = SchedulerStats()
        return asdict(stats)

    async def one(self, job: Job) -> Outcome:
        async with self.slots:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            try:
                return await self.scheduler.process(job)
            except Exception as exc:  # a bug must not leave the batch waiting for ever
                return Outcome(job.index, error=ProviderError("fatal", f"Ray worker: {type(exc).__name__}: {exc}"))


class GenerationWorker(Attached):
    """Sends the batches it is handed through the ordinary scheduler machinery, one
    scheduler per endpoint group a driver opened, and streams outcomes and counters back
    as they come."""

    def __init__(self, ttl_s: float, idle_s: float) -> None:
        super().__init__(ttl_s, idle_s)
        self.groups: dict[str, _Group] = {}
        self.opened = 0  # groups ever opened here: 0 on a fresh worker

    async def open(self, driver: str, gid: str, spec: ModelSpec, api_key: str | None, concurrency: int,
                   timeout_s: float, max_attempts: int, limiter: LimiterHandle, limit_key: str, limited: bool,
                   delay_s: float, max_response_bytes: int) -> tuple[str, str, bool]:
        """Open endpoint group `gid` for `driver`: (node id, node IP, whether this worker
        was reused: it had served a group before)."""
        self._join(driver)
        provider = make_provider(spec, api_key)
        provider.max_response_bytes = max_response_bytes
        pool = EndpointPool(spec.base_urls, concurrency)
        leased = LeasedLimiter(limiter, limit_key, limited)
        scheduler = Scheduler(provider, pool, leased, timeout_s=timeout_s, max_attempts=max_attempts)
        self.groups[gid] = _Group(driver, provider, scheduler, pool, leased, delay_s)
        reused, self.opened = self.opened > 0, self.opened + 1
        ray = import_ray()
        return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address(), reused

    def _dropped(self, driver: str) -> None:
        for gid in [g for g, group in self.groups.items() if group.driver == driver]:
            group = self.groups.pop(gid)
            asyncio.get_running_loop().create_task(group.provider.aclose())

    async def run_batch(self, gid: str, batch: bytes) -> AsyncIterator[bytes]:
        """Every job of the batch, at most the group's capacity at once; yields what
        finished since the previous message, with the counters of the requests that left
        meanwhile: once `enough` outcomes are in, or the batch's last, else FLUSH_S after
        the first thing to report (one message for many under load).

        The jobs come, and the messages go, pickled by this module (Ray's own pickling is
        cloudpickle, whose per-object hook cost the driver ~10% of its CPU on small
        requests); within one cluster, as Ray's own arguments are."""
        group = self.groups[gid]
        jobs: list[Job] = pickle.loads(batch)
        loop = asyncio.get_running_loop()
        done: list[Outcome] = []
        wake = asyncio.Event()
        left = len(jobs)  # jobs not yet reported
        armed = False

        def arm() -> None:
            nonlocal armed
            if not armed:
                armed = True
                loop.call_later(FLUSH_S, wake.set)

        async def one(job: Job) -> None:
            done.append(await group.one(job))
            if len(done) >= min(left, group.enough):
                wake.set()
            else:
                arm()

        tasks = [asyncio.ensure_future(one(job)) for job in jobs]
        group.streams[arm] = None
        try:
            while left:
                await wake.wait()
                wake.clear()
                armed = False
                out = done[:]
                del done[:]
                stats = group.take_stats()
                if out or stats:
                    left -= len(out)
                    yield pickle.dumps(Progress(out, stats), protocol=5)
        finally:
            group.streams.pop(arm, None)
            for task in tasks:
                task.cancel()

    def take_stats(self, gid: str) -> WorkerReport:
        """At a run's end: counters not yet sent, leases taken, endpoint health."""
        group = self.groups[gid]
        leases, group.limiter.leases = group.limiter.leases, 0
        return {"stats": group.take_stats() or {}, "leases": leases, "health": group.pool.health(),
                "dead": group.scheduler.dead}
