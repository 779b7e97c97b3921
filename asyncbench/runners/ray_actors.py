"""What the Ray backend runs inside the cluster: generation workers (async actors
running the ordinary scheduler on the batches the driver hands them, outcomes streamed
back) and the limiter actor they lease rate-limit tokens from in blocks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import asdict
from typing import Protocol, TypedDict

import anyio

from ..errors import ProviderError
from ..limits import RateLimiter
from ..providers import ModelSpec, make_provider
from ..providers.bounded import DEFAULT_MAX_RESPONSE_BYTES
from ..scheduler import EndpointHealth, EndpointPool, Job, Outcome, Scheduler, SchedulerStats
from .ray_connect import import_ray


class WorkerReport(TypedDict):
    """What a worker's `take_stats` hands the driver: its scheduler's counters since the
    last call, the limiter leases it took, its endpoints' health, whether it gave up."""

    stats: dict[str, int]
    leases: int
    health: list[EndpointHealth]
    dead: str | None



class _Lease(Protocol):
    def remote(self, waiting: int, tokens: int, info: dict[str, float], /) -> Awaitable[int]: ...


class _Pause(Protocol):
    def remote(self, seconds: float, /) -> object: ...


class LimiterHandle(Protocol):
    """The Ray actor handle of the shared limiter (LimiterActor below): its two
    methods, called with `.remote`; a lease's ObjectRef is awaited for the grant."""

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

    def __init__(self, handle: LimiterHandle, limited: bool) -> None:
        self.handle = handle
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
                    granted = await self.handle.lease.remote(self.waiting, tokens, info)
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
        self.handle.pause.remote(seconds)

    def observe(self, info: dict[str, float]) -> None:
        if info:
            self.info = dict(info)
            if info.get("limit_requests") or info.get("limit_tokens"):
                self.limited = True


def limits_text(rpm: float | None, tpm: float | None) -> str:
    """`--rpm 600 --tpm none`: a limiter's limits as the user gives them."""
    return " ".join(f"--{k} {'none' if v is None else f'{v:g}'}" for k, v in (("rpm", rpm), ("tpm", tpm)))


class LimiterActor:
    """One RateLimiter for an endpoint group, shared by every worker through leases (an
    async actor: a lease waiting for its bucket does not block other calls).

    Shared by several drivers (`--ray-shared-limiter`), it is a named detached actor that
    outlives any one run, so it counts its users: each driver `attach`es (and renews every
    `ttl_s / 4` from a thread of its own), and `detach`es at its end; the last one to
    detach kills it. A driver that dies without detaching stops renewing: its attachment
    expires after `ttl_s`, and an actor with no attachment left for `ttl_s` kills itself.
    So it never outlives its last user by more than about twice `ttl_s`."""

    def __init__(self, rpm: float | None, tpm: float | None, ttl_s: float = 0.0) -> None:
        self.rpm, self.tpm = rpm, tpm
        self.limiter: RateLimiter | None = None
        self._lock: anyio.Lock | None = None
        self.ttl_s = ttl_s
        self.drivers: dict[str, float] = {}  # driver id -> when it last renewed
        self.idle_since = time.monotonic()  # since when no driver is attached
        self.closing = False
        self._reaper: asyncio.Task[None] | None = None

    async def attach(self, driver: str, rpm: float | None, tpm: float | None) -> str:
        """"" when `driver` now shares this limiter; "closing" when it is going away (make
        a new one); else what this limiter holds that differs from the driver's limits."""
        if self._reaper is None and self.ttl_s > 0:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        if self.closing:
            return "closing"
        if (rpm, tpm) != (self.rpm, self.tpm):
            return f"holds {limits_text(self.rpm, self.tpm)}"
        self.drivers[driver] = time.monotonic()
        return ""

    async def renew(self, driver: str) -> None:
        if driver in self.drivers:
            self.drivers[driver] = time.monotonic()

    async def detach(self, driver: str) -> bool:
        """True when `driver` was the last user: it is closed (the caller kills it)."""
        self.drivers.pop(driver, None)
        if not self.drivers:
            self.closing = True
        return self.closing

    async def _reap(self) -> None:
        """Expire drivers that stopped renewing; kill this actor once none is left."""
        while True:
            await asyncio.sleep(self.ttl_s / 4)
            now = time.monotonic()
            for driver, seen in list(self.drivers.items()):
                if now - seen > self.ttl_s:
                    del self.drivers[driver]
                    self.idle_since = now
            if self.drivers:
                continue
            if self.closing or now - self.idle_since > self.ttl_s:
                self.closing = True
                ray = import_ray()
                ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
                return

    def _get(self) -> RateLimiter:
        if self.limiter is None:  # anyio primitives are made inside the actor's event loop
            self.limiter = RateLimiter(self.rpm, self.tpm)
            self._lock = anyio.Lock()
        return self.limiter

    async def lease(self, n: int, tokens: int, info: dict[str, float]) -> int:
        """Up to `n` requests of `tokens` tokens each, charged now (a block never bigger
        than the request bucket holds); how many were granted."""
        lim = self._get()
        lim.observe(info)
        if lim.requests is not None:
            n = max(1, min(n, int(lim.requests.capacity)))
        assert self._lock is not None
        async with self._lock:
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

    async def pause(self, seconds: float) -> None:
        self._get().pause(seconds)


class GenerationWorker:
    """Sends the batches it is handed through the ordinary scheduler machinery (retries,
    endpoint pool with health checks, the leased limiter), and streams the outcomes back
    as they finish."""

    def __init__(self, spec: ModelSpec, api_key: str | None, concurrency: int, timeout_s: float,
                 max_attempts: int, limiter: LimiterHandle, limited: bool, delay_s: float = 0.0,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        self.spec = spec
        self.concurrency = concurrency
        self.delay_s = delay_s
        self.pool: EndpointPool | None = None
        self.scheduler: Scheduler | None = None
        self.slots: asyncio.Semaphore | None = None
        provider = make_provider(spec, api_key)
        provider.max_response_bytes = max_response_bytes
        self._args = (provider, timeout_s, max_attempts, LeasedLimiter(limiter, limited))

    def ready(self) -> tuple[str, str]:
        """(node id, node IP) of the node this worker runs on."""
        ctx = import_ray().get_runtime_context()
        return ctx.get_node_id(), import_ray().util.get_node_ip_address()

    def _scheduler(self) -> Scheduler:
        if self.scheduler is None:  # anyio primitives are made inside the actor's event loop
            provider, timeout_s, max_attempts, limiter = self._args
            self.pool = EndpointPool(self.spec.base_urls, self.concurrency)
            self.scheduler = Scheduler(provider, self.pool, limiter, timeout_s=timeout_s, max_attempts=max_attempts)
            self.slots = asyncio.Semaphore(self.pool.capacity())
        return self.scheduler

    async def _one(self, scheduler: Scheduler, job: Job) -> Outcome:
        assert self.slots is not None
        async with self.slots:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            try:
                return await scheduler.process(job)
            except Exception as exc:  # a bug must not leave the batch waiting for ever
                return Outcome(job.index, error=ProviderError("fatal", f"Ray worker: {type(exc).__name__}: {exc}"))

    async def run_batch(self, jobs: list[Job]) -> AsyncIterator[list[Outcome]]:
        """Every job of the batch, at most the pool's capacity at once; yields the outcomes
        finished since the previous yield (one message for several under load)."""
        scheduler = self._scheduler()
        done: list[Outcome] = []
        wake = asyncio.Event()

        async def one(job: Job) -> None:
            done.append(await self._one(scheduler, job))
            wake.set()

        tasks = [asyncio.ensure_future(one(job)) for job in jobs]
        left = len(jobs)
        try:
            while left:
                await wake.wait()
                wake.clear()
                out = done[:]
                del done[:]
                left -= len(out)
                yield out
        finally:
            for task in tasks:
                task.cancel()

    def take_stats(self) -> WorkerReport:
        """Counters since the last call (the scheduler's, and leases taken), and endpoint
        health."""
        scheduler = self._scheduler()
        stats, scheduler.stats = asdict(scheduler.stats), SchedulerStats()
        limiter = self._args[3]
        leases, limiter.leases = limiter.leases, 0
        return {"stats": stats, "leases": leases, "health": self.pool.health() if self.pool else [],
                "dead": scheduler.dead}
