"""The Ray backend: requests and scoring spread over Ray workers, one DuckDB writer.

Who does what:
- The driver (the `asyncbench run` process) owns the cache: it looks answers up, hands
  the misses out, receives results as they complete and writes them. It stays the only
  DuckDB writer, so a worker crash loses only that worker's in-flight requests.
- Generation workers are async actors, each running the ordinary scheduler machinery
  (retries, endpoint pool with health checks, least-outstanding routing), with
  `--concurrency` divided between them so the per-endpoint concurrency stays what the
  user asked for. Work is pulled: each worker has that many slots, and a slot takes the
  next job from the driver when its previous one is done, so a slow worker never keeps
  a backlog; jobs are read from the stream as slots free up, so the first request
  leaves while the rest of the data is still being read. Actors start once per run,
  and only when a request must be sent.
- One limiter actor per endpoint group holds the RPM/TPM buckets. Every worker takes
  from it before each request and reports rate-limit headers and Retry-After to it, so
  ten workers never send ten times the RPM.
- If a worker dies, the driver starts a replacement and gives it the jobs that were in
  flight on the dead one; completed ones are never sent again.
- Scoring: chunks of predictions go to Ray tasks (`map_chunks`), one CPU each.

`--max-cost` is applied at dispatch from each request's cost estimate (prompt +
max_tokens at list price), which can only err on the safe side.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from dataclasses import asdict
from typing import Any

import anyio
import anyio.abc

from ..client import ModelClient
from ..errors import ProviderError, UserError
from ..limits import RateLimiter
from ..providers import ModelSpec, make_provider
from ..providers.bounded import DEFAULT_MAX_RESPONSE_BYTES
from ..scheduler import Budget, EndpointHealth, EndpointPool, Job, Outcome, Scheduler, SchedulerStats
from ..types import Response
from .base import Counting, OnEvent, RunnerReport, add_stats

# Replacement workers started for one shard before its remaining jobs are failed.
MAX_REPLACEMENTS = 3


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError("--backend ray needs Ray: pip install 'asyncbench[ray]'") from None
    return ray


class RemoteLimiter:
    """The scheduler's limiter interface, backed by the limiter actor shared by all
    workers. `pause` and `observe` are fire-and-forget: the scheduler calls them
    synchronously and the actor applies them in order."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def acquire(self, tokens: int) -> None:
        await self.handle.acquire.remote(tokens)

    def pause(self, seconds: float) -> None:
        self.handle.pause.remote(seconds)

    def observe(self, info: dict[str, float]) -> None:
        if info:
            self.handle.observe.remote(dict(info))


class LimiterActor:
    """One RateLimiter for an endpoint group, shared by every worker (an async actor:
    waiting acquirers do not block each other's calls)."""

    def __init__(self, rpm: float | None, tpm: float | None) -> None:
        self.rpm, self.tpm = rpm, tpm
        self.limiter: RateLimiter | None = None

    def _get(self) -> RateLimiter:
        if self.limiter is None:  # anyio primitives are made inside the actor's event loop
            self.limiter = RateLimiter(self.rpm, self.tpm)
        return self.limiter

    async def acquire(self, tokens: int) -> None:
        await self._get().acquire(tokens)

    async def pause(self, seconds: float) -> None:
        self._get().pause(seconds)

    async def observe(self, info: dict[str, float]) -> None:
        self._get().observe(info)


class GenerationWorker:
    """Sends the jobs it is handed through the ordinary scheduler machinery (retries,
    endpoint pool with health checks, the shared limiter), one call per job: the driver
    hands a worker a new job when one of its slots frees, so work goes to whichever
    worker is free (a slow worker never holds a backlog)."""

    def __init__(self, spec: ModelSpec, api_key: str | None, concurrency: int, timeout_s: float,
                 max_attempts: int, limiter: Any, delay_s: float = 0.0,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        self.spec = spec
        self.concurrency = concurrency
        self.delay_s = delay_s
        self.pool: EndpointPool | None = None
        self.scheduler: Scheduler | None = None
        provider = make_provider(spec, api_key)
        provider.max_response_bytes = max_response_bytes
        self._args = (provider, timeout_s, max_attempts, RemoteLimiter(limiter))

    def _scheduler(self) -> Scheduler:
        if self.scheduler is None:  # anyio primitives are made inside the actor's event loop
            provider, timeout_s, max_attempts, limiter = self._args
            self.pool = EndpointPool(self.spec.base_urls, self.concurrency)
            self.scheduler = Scheduler(provider, self.pool, limiter, timeout_s=timeout_s, max_attempts=max_attempts)
        return self.scheduler

    async def run_one(self, job: Job) -> Outcome:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return await self._scheduler().process(job)

    def take_stats(self) -> dict[str, Any]:
        """Counters since the last call, and endpoint health."""
        scheduler = self._scheduler()
        stats, scheduler.stats = asdict(scheduler.stats), SchedulerStats()
        return {"stats": stats, "health": self.pool.health() if self.pool else [], "dead": scheduler.dead}


def _group_key(spec: ModelSpec) -> tuple[str, str]:
    """Endpoint groups are keyed by what they are (model and endpoint identity), so the
    same model as judge shares the evaluated model's limiter and workers."""
    return (spec.label, spec.endpoint_id)


def _apply(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


class RayRunner:
    """Ray workers for generation and scoring; see the module docstring."""

    name = "ray"

    def __init__(self, address: str | None, workers: int, concurrency: int, timeout_s: float,
                 max_attempts: int, worker_delays: Sequence[float] = ()) -> None:
        """`worker_delays`: an artificial per-request delay for each worker, to measure and
        test how work spreads when one worker is slower than the others."""
        if workers < 1:
            raise UserError(f"--ray-workers must be at least 1 (got {workers})")
        self.ray = ray = import_ray()
        self.address = address
        self._stats = SchedulerStats()
        self.aborted: str | None = None
        self.n_workers = workers
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.worker_delays = tuple(worker_delays)
        self._started = not ray.is_initialized()
        if self._started:
            quiet: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False,
                                     "include_dashboard": False}
            try:
                if address:
                    ray.init(address=address, **quiet)
                else:  # a private local instance, on loopback only
                    ray.init(_node_ip_address="127.0.0.1", **quiet)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise UserError(f"cannot connect to Ray at {address or 'a new local instance'}: "
                                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}; "
                                "check --ray-address (auto | HOST:PORT | ray://HOST:10001)") from None
        self._limiter_cls = ray.remote(num_cpus=0, max_concurrency=100_000)(LimiterActor)
        self._worker_cls = ray.remote(num_cpus=0, max_concurrency=100_000)(GenerationWorker)
        self._apply = ray.remote(num_cpus=1)(_apply)
        self._groups: dict[tuple[str, str], _WorkerGroup] = {}

    # -- generation -----------------------------------------------------------------
    def group(self, spec: ModelSpec, api_key: str | None, rpm: float | None, tpm: float | None,
              max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> _WorkerGroup:
        """The limiter actor and workers of one endpoint group, made once (on its first
        request to send) and reused for every purpose (eval, judge, prior)."""
        key = _group_key(spec)
        if key not in self._groups:
            limiter = self._limiter_cls.remote(rpm, tpm)
            self._groups[key] = _WorkerGroup(self, spec, api_key, limiter, max_response_bytes)
        return self._groups[key]

    async def run(self, client: ModelClient, jobs: AsyncIterable[Job], on_event: OnEvent, *,
                  budget: Budget) -> RunnerReport:
        stream = aiter(jobs)
        first = await anext(stream, None)
        if first is None:  # everything cached: no actors started
            return self._report(client, SchedulerStats())
        lim = client.limiter
        group = self.group(client.spec, client.api_key, lim.configured_rpm, lim.configured_tpm,
                           client.provider.max_response_bytes)

        def cost_of(r: Response) -> float:
            return client.price.cost(r.usage)

        dispatch = _Dispatch(group, budget, on_event, cost_of)
        on_event(Counting(dispatch.stats))
        try:
            await dispatch.run(first, stream)
        finally:
            add_stats(self._stats, dispatch.stats)
            self.aborted = self.aborted or group.dead
        return self._report(client, dispatch.stats)

    def _report(self, client: ModelClient, stats: SchedulerStats) -> RunnerReport:
        backend = self.describe()
        return RunnerReport(stats, self.endpoint_health(client), self.aborted, backend,
                            list(backend["jobs_per_worker"]))

    def stats(self) -> SchedulerStats:
        return self._stats

    def endpoint_health(self, client: ModelClient) -> list[EndpointHealth]:
        group = self._groups.get(_group_key(client.spec))
        return group.endpoint_health() if group is not None else []

    def describe(self) -> dict[str, Any]:
        return {"name": "ray", "address": self.address or "local", "workers": self.n_workers,
                "workers_replaced": sum(g.replaced for g in self._groups.values()),
                "jobs_per_worker": [sum(g.served[k] for g in self._groups.values()) for k in range(self.n_workers)]}

    # -- scoring --------------------------------------------------------------------
    def map_chunks(self, fn: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
        """`[fn(*args) for args in calls]`, each call a Ray task on one CPU."""
        fn_ref = self.ray.put(fn)
        results: list[Any] = self.ray.get([self._apply.remote(fn_ref, *args) for args in calls])
        return results

    async def aclose(self) -> None:
        for group in self._groups.values():
            for w in group.workers:
                self.ray.kill(w)
            self.ray.kill(group.limiter)
        self._groups.clear()
        if self._started:
            self.ray.shutdown()


class _WorkerGroup:
    """The workers of one model client and their shared limiter."""

    def __init__(self, backend: RayRunner, spec: ModelSpec, api_key: str | None, limiter: Any,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        self.backend = backend
        self.max_response_bytes = max_response_bytes
        self.spec = spec
        self.api_key = api_key
        self.limiter = limiter
        # per-endpoint concurrency is a global setting: each worker gets its share
        self.per_worker = max(1, math.ceil(backend.concurrency / backend.n_workers))
        self.workers = [self._new_worker(k) for k in range(backend.n_workers)]
        self.health: dict[int, list[dict[str, Any]]] = {}
        self.replaced = 0
        self.replaced_in_slot = [0] * len(self.workers)
        self.served = [0] * len(self.workers)  # jobs answered through each worker slot
        self.dead: str | None = None

    def _new_worker(self, k: int) -> Any:
        b = self.backend
        delay = b.worker_delays[k] if k < len(b.worker_delays) else 0.0
        return b._worker_cls.options(scheduling_strategy="SPREAD").remote(
            self.spec, self.api_key, self.per_worker, b.timeout_s, b.max_attempts, self.limiter, delay,
            self.max_response_bytes)

    def replace_dead(self, k: int, dead: Any) -> bool:
        """A replacement for worker k, which died (once, however many of its slots saw
        it die); False when the slot has had too many."""
        if self.workers[k] is dead:
            if self.replaced_in_slot[k] >= MAX_REPLACEMENTS:
                return False
            self.backend.ray.kill(dead)
            self.workers[k] = self._new_worker(k)
            self.replaced += 1
            self.replaced_in_slot[k] += 1
        return True

    def endpoint_health(self) -> list[EndpointHealth]:
        """Served/failed per endpoint summed over the workers' last reports."""
        merged: dict[str, EndpointHealth] = {}
        for reports in self.health.values():
            for e in reports:
                m = merged.setdefault(e["url"], {"url": e["url"], "served": 0, "failed": 0, "healthy": True})
                m["served"] += e["served"]
                m["failed"] += e["failed"]
                m["healthy"] = m["healthy"] and e["healthy"]
        return list(merged.values())


class _Dispatch:
    """One `run` over the workers of one group. Jobs are read from the stream as slots
    free up (the first request leaves before the stream is fully read); each worker has
    `per_worker` slots, and each slot takes the next job when its previous one is done,
    so a slow worker gets fewer jobs. A job whose worker died goes to a replacement;
    a job with an outcome is never sent again."""

    def __init__(self, group: _WorkerGroup, budget: Budget, on_outcome: Callable[[Outcome], None],
                 cost_of: Callable[[Response], float]) -> None:
        self.group = group
        self.budget = budget
        self.on_outcome = on_outcome
        self.cost_of = cost_of
        self.stats = SchedulerStats()
        self.outcomes: dict[int, Outcome] = {}
        self.order: list[int] = []

    async def run(self, first: Job, rest: AsyncIterator[Job]) -> list[Outcome]:
        n = len(self.group.workers)
        send, receive = anyio.create_memory_object_stream[Job](max_buffer_size=0)
        async with anyio.create_task_group() as tg:
            for k in range(n):
                for _ in range(self.group.per_worker):
                    tg.start_soon(self._slot, k, receive.clone())
            receive.close()
            async with send:
                async for job in _chain(first, rest):
                    self.order.append(job.index)
                    if not self.budget.reserve(job.est_cost):
                        self.stats.budget_skipped += 1
                        self._record(Outcome(job.index, skipped=True), None)
                        continue
                    await send.send(job)
        await self._collect_stats()
        return [self.outcomes[i] for i in self.order]

    async def _slot(self, k: int, inbox: anyio.abc.ObjectReceiveStream[Job]) -> None:
        ray = self.group.backend.ray
        async with inbox:
            async for job in inbox:
                while True:
                    worker = self.group.workers[k]
                    try:
                        outcome = await worker.run_one.remote(job)
                    except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                        if not self.group.replace_dead(k, worker):
                            err = ProviderError("transient", f"Ray worker lost {MAX_REPLACEMENTS + 1} times: "
                                                             f"{type(exc).__name__}")
                            self._record(Outcome(job.index, error=err), job)
                            break
                        continue
                    self.group.served[k] += 1
                    self._record(outcome, job)
                    break

    def _record(self, outcome: Outcome, job: Job | None) -> None:
        if job is not None:
            actual = self.cost_of(outcome.response) if outcome.response is not None else 0.0
            self.budget.settle(job.est_cost, actual)
        self.outcomes[outcome.index] = outcome
        self.on_outcome(outcome)

    async def _collect_stats(self) -> None:
        for k, worker in enumerate(self.group.workers):
            try:
                report = await worker.take_stats.remote()
            except Exception:  # a worker lost at the very end: its counters are lost
                continue
            self.group.health[k] = report["health"]
            self.group.dead = self.group.dead or report["dead"]
            for name, value in report["stats"].items():
                setattr(self.stats, name, getattr(self.stats, name) + value)


async def _chain(first: Job, rest: AsyncIterator[Job]) -> AsyncIterator[Job]:
    yield first
    async for job in rest:
        yield job
