"""The Ray backend: requests and scoring spread over Ray workers, one DuckDB writer.

Who does what:
- The driver (the `asyncbench run` process) owns the cache: it looks answers up, hands
  the misses out, receives results as they complete and writes them. It stays the only
  DuckDB writer, so a worker crash loses only that worker's in-flight requests.
- Generation workers are async actors, each running the ordinary scheduler (retries,
  endpoint pool with health checks, least-outstanding routing) on its shard of the jobs,
  with `--concurrency` divided between them so the per-endpoint concurrency stays what
  the user asked for. Results stream back in small batches (a Ray streaming generator)
  as they complete, not at the end of the shard.
- One limiter actor per endpoint group holds the RPM/TPM buckets. Every worker takes
  from it before each request and reports rate-limit headers and Retry-After to it, so
  ten workers never send ten times the RPM.
- If a worker dies mid-shard, the driver starts a replacement and gives it the shard's
  jobs that have no result yet; completed ones are never sent again.
- Scoring: chunks of predictions go to Ray tasks (`map_chunks`), one CPU each.

`--max-cost` is applied at dispatch from each request's cost estimate (prompt +
max_tokens at list price), which can only err on the safe side.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import asdict
from typing import Any

import anyio

from ..client import ModelClient
from ..errors import ProviderError, UserError
from ..limits import RateLimiter
from ..providers import ModelSpec, make_provider
from ..scheduler import Budget, EndpointPool, Job, Outcome, Scheduler, SchedulerStats
from ..types import Response
from .base import add_stats

# Outcomes per message from a worker: small enough to stream, large enough to be cheap.
OUTCOME_BATCH = 64
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
    """Runs the scheduler on shards of jobs and streams outcomes back as they complete."""

    def __init__(self, spec: ModelSpec, api_key: str | None, concurrency: int, timeout_s: float,
                 max_attempts: int, limiter: Any) -> None:
        self.spec = spec
        self.provider = make_provider(spec, api_key)
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.limiter = RemoteLimiter(limiter)
        self.pool: EndpointPool | None = None

    async def run_shard(self, jobs: list[Job]) -> AsyncIterator[list[Outcome] | dict[str, Any]]:
        """Yields lists of outcomes as they complete, then one dict of stats and health."""
        if self.pool is None:
            self.pool = EndpointPool(self.spec.base_urls, self.concurrency)
        queue: asyncio.Queue[Outcome] = asyncio.Queue()
        scheduler = Scheduler(self.provider, self.pool, self.limiter, timeout_s=self.timeout_s,
                              max_attempts=self.max_attempts, on_outcome=queue.put_nowait)
        task = asyncio.ensure_future(scheduler.run(jobs))
        while not (task.done() and queue.empty()):
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                continue
            batch = [getter.result()]
            while not queue.empty() and len(batch) < OUTCOME_BATCH:
                batch.append(queue.get_nowait())
            yield batch
        await task  # re-raise a scheduler failure
        yield {"stats": asdict(scheduler.stats), "health": self.pool.health()}


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
                 max_attempts: int) -> None:
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
    def group(self, spec: ModelSpec, api_key: str | None, rpm: float | None, tpm: float | None) -> _WorkerGroup:
        """The limiter actor and workers of one endpoint group, made once (on its first
        request to send) and reused for every purpose (eval, judge, prior)."""
        key = _group_key(spec)
        if key not in self._groups:
            limiter = self._limiter_cls.remote(rpm, tpm)
            self._groups[key] = _WorkerGroup(self, spec, api_key, limiter)
        return self._groups[key]

    async def run(self, client: ModelClient, jobs: AsyncIterable[Job], *, budget: Budget,
                  on_outcome: Callable[[Outcome], None]) -> list[Outcome]:
        job_list = [j async for j in jobs]
        if not job_list:  # everything cached: no actors needed
            return []
        lim = client.limiter
        group = self.group(client.spec, client.api_key, lim.configured_rpm, lim.configured_tpm)

        def cost_of(r: Response) -> float:
            return client.price.cost(r.usage)

        dispatch = _Dispatch(group, budget, on_outcome, cost_of)
        try:
            return await dispatch.run(job_list)
        finally:
            add_stats(self._stats, dispatch.stats)

    def stats(self) -> SchedulerStats:
        return self._stats

    def endpoint_health(self, client: ModelClient) -> list[dict[str, Any]]:
        group = self._groups.get(_group_key(client.spec))
        return group.endpoint_health() if group is not None else []

    def describe(self) -> dict[str, Any]:
        return {"name": "ray", "address": self.address or "local", "workers": self.n_workers,
                "workers_replaced": sum(g.replaced for g in self._groups.values())}

    # -- scoring --------------------------------------------------------------------
    def map_chunks(self, fn: Callable[..., Any], calls: list[tuple[Any, ...]]) -> list[Any]:
        """`[fn(*args) for args in calls]`, each call a Ray task on one CPU."""
        fn_ref = self.ray.put(fn)
        results: list[Any] = self.ray.get([self._apply.remote(fn_ref, *args) for args in calls])
        return results

    def close(self) -> None:
        for group in self._groups.values():
            for w in group.workers:
                self.ray.kill(w)
            self.ray.kill(group.limiter)
        self._groups.clear()
        if self._started:
            self.ray.shutdown()


class _WorkerGroup:
    """The workers of one model client and their shared limiter."""

    def __init__(self, backend: RayRunner, spec: ModelSpec, api_key: str | None, limiter: Any) -> None:
        self.backend = backend
        self.spec = spec
        self.api_key = api_key
        self.limiter = limiter
        # per-endpoint concurrency is a global setting: each worker gets its share
        self.per_worker = max(1, math.ceil(backend.concurrency / backend.n_workers))
        self.workers = [self._new_worker() for _ in range(backend.n_workers)]
        self.health: dict[int, list[dict[str, Any]]] = {}
        self.replaced = 0

    def _new_worker(self) -> Any:
        b = self.backend
        return b._worker_cls.options(scheduling_strategy="SPREAD").remote(
            self.spec, self.api_key, self.per_worker, b.timeout_s, b.max_attempts, self.limiter)

    def replace(self, k: int) -> Any:
        self.backend.ray.kill(self.workers[k])
        self.workers[k] = self._new_worker()
        self.replaced += 1
        return self.workers[k]

    def endpoint_health(self) -> list[dict[str, Any]]:
        """Served/failed per endpoint summed over the workers' last reports."""
        merged: dict[str, dict[str, Any]] = {}
        for reports in self.health.values():
            for e in reports:
                m = merged.setdefault(e["url"], {"url": e["url"], "served": 0, "failed": 0, "healthy": True})
                m["served"] += e["served"]
                m["failed"] += e["failed"]
                m["healthy"] = m["healthy"] and e["healthy"]
        return list(merged.values())


class _Dispatch:
    """One `run` over the workers of one group: dispatch, stream outcomes back, replace dead workers."""

    def __init__(self, group: _WorkerGroup, budget: Budget, on_outcome: Callable[[Outcome], None],
                 cost_of: Callable[[Any], float]) -> None:
        self.group = group
        self.budget = budget
        self.on_outcome = on_outcome
        self.cost_of = cost_of
        self.stats = SchedulerStats()
        self.outcomes: dict[int, Outcome] = {}

    async def run(self, job_list: list[Job]) -> list[Outcome]:
        dispatched: list[Job] = []
        for job in job_list:
            if self.budget.reserve(job.est_cost):
                dispatched.append(job)
            else:
                self.stats.budget_skipped += 1
                self._record(Outcome(job.index, skipped=True), None)
        n = len(self.group.workers)
        async with anyio.create_task_group() as tg:
            for k in range(n):
                shard = dispatched[k::n]
                if shard:
                    tg.start_soon(self._drive, k, shard)
        return [self.outcomes[j.index] for j in job_list]

    def _record(self, outcome: Outcome, job: Job | None) -> None:
        if job is not None:
            actual = self.cost_of(outcome.response) if outcome.response is not None else 0.0
            self.budget.settle(job.est_cost, actual)
        self.outcomes[outcome.index] = outcome
        self.on_outcome(outcome)

    async def _drive(self, k: int, shard: list[Job]) -> None:
        """Send one shard to worker k and take its results as they come; on the worker's
        death, hand what has no result yet to a replacement."""
        ray = self.group.backend.ray
        pending = {j.index: j for j in shard}
        worker = self.group.workers[k]
        replacements = 0
        while pending:
            stream = worker.run_shard.options(num_returns="streaming").remote(list(pending.values()))
            try:
                async for ref in stream:
                    item = await ref
                    if isinstance(item, dict):
                        self._merge_stats(item["stats"])
                        self.group.health[k] = item["health"]
                        continue
                    for outcome in item:
                        job = pending.pop(outcome.index, None)
                        if job is not None:
                            self._record(outcome, job)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                replacements += 1
                if replacements > MAX_REPLACEMENTS:
                    err = ProviderError("transient", f"Ray worker lost {replacements} times: {type(exc).__name__}")
                    for job in list(pending.values()):
                        self._record(Outcome(job.index, error=err), job)
                    pending.clear()
                    break
                worker = self.group.replace(k)

    def _merge_stats(self, stats: dict[str, int]) -> None:
        for name, value in stats.items():
            setattr(self.stats, name, getattr(self.stats, name) + value)
