"""The Ray backend: requests and scoring spread over Ray workers, one DuckDB writer.

Who does what:
- The driver (the `asyncbench run` process) owns the cache: it looks answers up, hands
  the misses out, receives results as they complete and writes them. It stays the only
  DuckDB writer, so a lost worker or node loses only that worker's in-flight requests.
- Generation workers are async actors spread over the cluster's nodes, each running the
  ordinary scheduler machinery (retries, endpoint pool with health checks,
  least-outstanding routing), with `--concurrency` divided between them so each endpoint
  still sees at most what the user asked for. Jobs go out in batches, one actor call per
  batch (Ray puts a large batch in the object store once), and come back as a stream of
  the outcomes finished since the last message (a batch's worth, two pool capacities,
  or what finished within 50 ms). A worker holds at most HOLD (3) pool capacities of jobs
  and gets the next batch when one is left, so a slow worker never keeps a backlog and
  the first request leaves while the rest of the data is being read.
- Workers, and the limiter host on the driver's node, are long-lived actors reused by
  every run of the same code on a running cluster (ray_pool.py): a run opens its
  endpoint groups in them and closes them at its end, so only the first run pays for
  starting Ray worker processes.
- The limiter host holds one RPM/TPM limit per provider account of the run, or, with
  `--ray-shared-limiter NAME`, a named detached limiter that several drivers lease from
  (ray_shared.py).
  Workers lease requests and tokens from it in blocks (one call per block, none at all
  while no limit applies), so ten workers never send ten times the RPM. Rate-limit
  headers ride along with the next lease; a 429's Retry-After is passed on at once.
- Counters (requests sent, retries, 429s) come back with the outcomes, as they happen:
  a lost worker's requests are counted like the others, and the run's counts are what
  the servers received.
- If a worker dies (its node lost), the driver starts a replacement and gives it the
  jobs of that worker that had no answer yet; answered ones are never sent again.
- Scoring: chunks of predictions go to Ray tasks (`map_chunks`), one CPU each, spread
  over the nodes.
- Nothing waits on Ray without a deadline: connecting, starting actors, each batch and
  each scoring call end in one line naming the cluster's address.

The actors are in ray_actors.py, connecting (`ray.init` with a deadline, loopback kept
as loopback) in ray_connect.py; this module is the driver's side.

`--max-cost` is applied at dispatch from each request's cost estimate (prompt +
max_tokens at list price), which can only err on the safe side.
"""

from __future__ import annotations

import math
import pickle
import uuid
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream

from ..client import ModelClient, account_key
from ..errors import ProviderError, UserError
from ..providers import ModelSpec
from ..providers.bounded import DEFAULT_MAX_RESPONSE_BYTES
from ..scheduler import Budget, EndpointHealth, Job, Outcome, SchedulerStats
from ..types import Response
from .base import JSON, Counting, OnEvent, RunnerReport, add_stats
from .ray_actors import IDLE_S, SHARED, TTL_S, GenerationWorker, LimiterActor, LimiterHandle, Progress, WorkerReport
from .ray_connect import cluster_address, connect, first_line, import_ray
from .ray_pool import NAMESPACE, Attachable, Attachments, limiter_name, worker_name
from .ray_shared import SharedLimiters

T = TypeVar("T")
A = TypeVar("A", bound=Attachable)  # a Ray actor handle

# Replacement workers started for one worker slot before its remaining jobs are failed.
MAX_REPLACEMENTS = 3
# Connecting to the cluster and starting actors: a dead or unreachable GCS must not hang.
CONNECT_TIMEOUT_S = 60.0
# How long a pump holds a batch for more jobs while its worker is busy anyway.
COALESCE_S = 0.02
# Jobs one worker holds at most, in pool capacities: it gets the next batch when one
# capacity is left, so a batch is up to HOLD - 1 capacities (an actor call costs both
# sides about a millisecond: fewer, fuller batches), and a lost worker's jobs handed
# again are at most HOLD capacities. Measured on 20,000 small requests (bench/ray_backend.md):
# 3 against 2 took 9% less driver CPU.
HOLD = 3
# One scoring call (all its tasks) at most.
TASK_TIMEOUT_S = 3600.0


def _group_key(spec: ModelSpec) -> tuple[str, str]:
    """Endpoint groups are keyed by what they are (model and endpoint identity), so the
    same model as judge shares the evaluated model's limiter and workers."""
    return (spec.label, spec.endpoint_id)


def _apply(fn: Callable[..., T], *args: object) -> T:
    return fn(*args)


class RayRunner:
    """Ray workers for generation and scoring; see the module docstring."""

    name = "ray"

    def __init__(self, address: str | None, workers: int, concurrency: int, timeout_s: float,
                 max_attempts: int, worker_delays: Sequence[float] = (),
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, shared_limiter: str | None = None,
                 shared_ttl_s: float = TTL_S, idle_s: float = IDLE_S, pool_tag: str = "") -> None:
        """`worker_delays`: an artificial per-request delay for each worker, to measure and
        test how work spreads when one worker is slower than the others.
        `connect_timeout_s`: connecting and starting actors, at most.
        `shared_limiter`: a NAME under which drivers share one limiter per endpoint group
        (ray_shared.py); its actor expires `shared_ttl_s` after a driver's last renewal.
        `idle_s`: how long the pooled workers this run makes wait for another run;
        `pool_tag`: a pool of their own (by name), for a test of that wait."""
        if workers < 1:
            raise UserError(f"--ray-workers must be at least 1 (got {workers})")
        self.ray = ray = import_ray()
        self.address = address = cluster_address(address)
        self.where = address or "local"
        self._stats = SchedulerStats()
        self.aborted: str | None = None
        self.n_workers = workers
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.worker_delays = tuple(worker_delays)
        self.connect_timeout_s = connect_timeout_s
        # one batch can take as long as its slowest job's retries (scheduler.max_retry_s)
        self.batch_timeout_s = 900.0 + 2 * timeout_s
        self.driver = uuid.uuid4().hex
        self.idle_s = idle_s
        self.pool_tag = pool_tag
        self.attached = Attachments(ray, self.driver, TTL_S)
        self._shared = SharedLimiters(ray, shared_limiter, self.where, self.driver, shared_ttl_s) \
            if shared_limiter is not None else None
        self._started = not ray.is_initialized()
        self._release = connect(ray, address, connect_timeout_s) if self._started else None
        self._limiter_cls = ray.remote(num_cpus=0, max_concurrency=100_000)(LimiterActor)
        self._worker_cls = ray.remote(num_cpus=0, max_concurrency=100_000)(GenerationWorker)
        self._apply = ray.remote(num_cpus=1, scheduling_strategy="SPREAD")(_apply)
        self._groups: dict[tuple[str, str], _WorkerGroup] = {}
        # the limiter of each provider account (client.account_key) and its key there
        self._limiters: dict[str, tuple[LimiterHandle, str]] = {}

    def pooled(self, cls: Any, name: str, node: str) -> Any:
        """The long-lived actor `name` on `node`, made if no run has made it yet."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return cls.options(name=name, namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
                           scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
                           ).remote(TTL_S, self.idle_s)

    async def _limiter(self, account: str, spec: ModelSpec, api_key: str | None, rpm: float | None,
                       tpm: float | None) -> tuple[LimiterHandle, str]:
        """This run's limit for a provider account: a key in the limiter host on the
        driver's node (it lives as long as the run needs it), or the shared limiter."""
        if account not in self._limiters:
            if self._shared is not None:  # one limiter for every driver that names it
                shared = await self._shared.attach(self._limiter_cls, spec, api_key, rpm, tpm, self.connect_timeout_s)
                return self._limiters.setdefault(account, (shared, SHARED))
            node = self.ray.get_runtime_context().get_node_id()
            key = f"{self.driver}/{len(self._limiters)}"
            name = limiter_name(node, self.pool_tag)
            opened, _ = await self.opened(self.pooled(self._limiter_cls, name, node),
                                          lambda: self.pooled(self._limiter_cls, name, node),
                                          lambda h: h.open.remote(self.driver, key, rpm, tpm), "the limiter actor")
            self._limiters[account] = (opened, key)
        return self._limiters[account]

    async def opened(self, actor: A, again: Callable[[], A], call: Callable[[A], Awaitable[T]],
                     what: str) -> tuple[A, T]:
        """`call(actor)`'s answer, within the connect timeout, and the actor attached to.
        A pooled actor that was ending itself (idle) just then is made again (`again`),
        once."""
        try:
            return actor, await self._first_call(actor, call, what)
        except self.ray.exceptions.RayActorError:
            self.ray.kill(actor, no_restart=True)
        actor = again()
        return actor, await self._first_call(actor, call, what)

    async def _first_call(self, actor: A, call: Callable[[A], Awaitable[T]], what: str) -> T:
        try:
            with anyio.fail_after(self.connect_timeout_s):
                answer = await call(actor)
        except TimeoutError:
            raise UserError(f"Ray at {self.where}: {what} did not start within {self.connect_timeout_s:g} s "
                            "(are the cluster's nodes up?)") from None
        self.attached.add(actor)
        return answer

    def _alive_nodes(self) -> list[str]:
        """Node ids to spread workers over (the driver's own first)."""
        own = self.ray.get_runtime_context().get_node_id()
        others = [n["NodeID"] for n in self.ray.nodes() if n.get("Alive") and n["NodeID"] != own]
        return [own, *sorted(others)]

    # -- generation -----------------------------------------------------------------
    async def group(self, spec: ModelSpec, api_key: str | None, rpm: float | None, tpm: float | None,
                    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> _WorkerGroup:
        """The limiter actor and workers of one endpoint group, made once (on its first
        request to send) and reused for every purpose (eval, judge, prior)."""
        key = _group_key(spec)
        if key not in self._groups:
            # models on one key (an eval set) lease from one limiter: the provider's limit is the key's
            account = account_key(spec.provider, spec.base_urls, api_key)
            limiter, limit_key = await self._limiter(account, spec, api_key, rpm, tpm)
            group = _WorkerGroup(self, f"{self.driver}/g{len(self._groups)}", spec, api_key, limiter, limit_key,
                                 bool(rpm or tpm), max_response_bytes)
            await group.start()
            self._groups[key] = group
        return self._groups[key]

    async def run(self, client: ModelClient, jobs: AsyncIterable[Job], on_event: OnEvent, *,
                  budget: Budget) -> RunnerReport:
        stream = aiter(jobs)
        first = await anext(stream, None)
        if first is None:  # everything cached: no actors started
            return self._report(client, SchedulerStats())
        lim = client.limiter
        group = await self.group(client.spec, client.api_key, lim.configured_rpm, lim.configured_tpm,
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
        """This run's report: its counts, the client's endpoints, run.json's "backend"
        (placement: requests and workers per node) and jobs per worker."""
        per_worker = [sum(g.served[k] for g in self._groups.values()) for k in range(self.n_workers)]
        return RunnerReport(stats, self.endpoint_health(client), self.aborted, self.describe(), per_worker)

    def stats(self) -> SchedulerStats:
        return self._stats

    def endpoint_health(self, client: ModelClient) -> list[EndpointHealth]:
        group = self._groups.get(_group_key(client.spec))
        return group.endpoint_health() if group is not None else []

    def placement(self) -> dict[str, JSON]:
        """Where the work went, for run.json: jobs answered per worker slot and per node,
        workers replaced, jobs handed again to a replacement after their worker was lost
        (an upper bound on requests sent twice), and the actor calls made for them
        (batches of jobs, limiter leases)."""
        groups = list(self._groups.values())
        by_node: Counter[str] = Counter()
        sent_by_node: Counter[str] = Counter()
        workers_on: Counter[str] = Counter()
        ips: dict[str, str] = {}
        lost: set[str] = set()
        for g in groups:
            by_node.update(g.served_by_node)
            sent_by_node.update(g.sent_by_node)
            workers_on.update(g.ran_on)
            ips.update(g.node_ip)
            lost |= g.lost_nodes
        nodes: list[JSON] = [{"node": node[:12], "ip": ips.get(node, ""), "requests": by_node[node],
                              "sent": sent_by_node[node], "workers": workers_on[node], "lost": node in lost}
                             for node in sorted(set(by_node) | set(workers_on) | set(sent_by_node))]
        return {"workers_replaced": sum(g.replaced for g in groups),
                "workers_reused": sum(g.reused for g in groups),
                "requests_resent": sum(g.resent for g in groups),
                "batches": sum(g.batches for g in groups), "limiter_leases": sum(g.leases for g in groups),
                "jobs_per_worker": [sum(g.served[k] for g in groups) for k in range(self.n_workers)],
                "nodes": nodes}

    def describe(self) -> dict[str, JSON]:
        shared = self._shared.name if self._shared is not None else None
        return {"name": "ray", "address": self.where, "workers": self.n_workers, "shared_limiter": shared,
                **self.placement()}

    # -- scoring --------------------------------------------------------------------
    def map_chunks(self, fn: Callable[..., object], calls: list[tuple[object, ...]]) -> list[object]:
        """`[fn(*args) for args in calls]`, each call a Ray task on one CPU, spread over
        the nodes; at most TASK_TIMEOUT_S for the lot."""
        ray = self.ray
        fn_ref = ray.put(fn)
        refs = [self._apply.remote(fn_ref, *args) for args in calls]
        try:
            results: list[object] = ray.get(refs, timeout=TASK_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            for ref in refs:
                ray.cancel(ref, force=True)
            raise ProviderError("fatal", f"scoring on Ray at {self.where} took over {TASK_TIMEOUT_S:g} s") from None
        except ray.exceptions.RayError as exc:
            raise ProviderError("fatal", f"scoring on Ray at {self.where} failed: {first_line(exc)}") from None
        return results

    async def aclose(self) -> None:
        """Detach from the pooled actors (closing this run's groups and limits there: they
        stay for the next run) and from a shared limiter; replacements made anywhere
        (not pooled) are killed."""
        self.attached.release(self.connect_timeout_s)
        for group in self._groups.values():
            for w in group.unpooled:
                self.ray.kill(w)
        self._groups.clear()
        self._limiters.clear()
        if self._shared is not None:  # the last driver sharing a limiter kills it
            self._shared.release(self.connect_timeout_s)
        if self._release is not None:
            self.ray.shutdown()
            self._release.set()
            self._release = None


class _WorkerGroup:
    """The workers of one model client (the group `gid` opened in each), the limit they
    lease from, and where they ran."""

    def __init__(self, backend: RayRunner, gid: str, spec: ModelSpec, api_key: str | None, limiter: LimiterHandle,
                 limit_key: str, limited: bool, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        self.backend = backend
        self.gid = gid
        self.max_response_bytes = max_response_bytes
        self.spec = spec
        self.api_key = api_key
        self.limiter = limiter
        self.limit_key = limit_key
        self.limited = limited
        # per-endpoint concurrency is a global setting: each worker gets its share
        self.per_worker = max(1, math.ceil(backend.concurrency / backend.n_workers))
        # requests one worker has in flight at most (its pool's capacity)
        self.capacity = self.per_worker * max(1, len(spec.base_urls))
        nodes = backend._alive_nodes()
        self.workers = [self._new_worker(k, _nth(nodes, k)) for k in range(backend.n_workers)]
        self.unpooled: list[object] = []  # replacements made anywhere, killed at the end
        self.node_of = [""] * len(self.workers)  # "" until the worker has opened the group
        self.opening = [anyio.Lock() for _ in self.workers]  # one open per worker, whoever asks
        self.node_ip: dict[str, str] = {}
        self.ran_on: Counter[str] = Counter()  # workers that opened the group, per node
        self.lost_nodes: set[str] = set()
        self.health: dict[int, list[EndpointHealth]] = {}
        self.replaced = 0
        self.reused = 0  # workers found running (made by an earlier run)
        self.resent = 0
        self.batches = 0  # actor calls carrying jobs
        self.leases = 0  # limiter calls the workers made
        self.replaced_in_slot = [0] * len(self.workers)
        self.served = [0] * len(self.workers)  # jobs answered through each worker slot
        self.served_by_node: Counter[str] = Counter()
        self.sent_by_node: Counter[str] = Counter()  # requests sent (retries included)
        self.dead: str | None = None

    def _new_worker(self, k: int, node: str | None) -> Any:
        """Worker slot k on `node`: the pooled one (made now if no run has made it yet);
        with no node to name (a lost one's replacement when no other is known), a worker
        of this run's own, anywhere."""
        b = self.backend
        if node is not None:
            return b.pooled(b._worker_cls, worker_name(node, k, b.pool_tag), node)
        worker = b._worker_cls.options(scheduling_strategy="SPREAD").remote(TTL_S, b.idle_s)
        self.unpooled.append(worker)
        return worker

    async def open(self, k: int) -> None:
        """Open this group in worker k (bounded; a pooled worker ending itself just now
        is made again), and note its node."""
        async with self.opening[k]:
            if not self.node_of[k]:  # not opened by another batch meanwhile
                await self._open(k)

    async def _open(self, k: int) -> None:
        b = self.backend
        delay = b.worker_delays[k] if k < len(b.worker_delays) else 0.0
        self.workers[k], (node, ip, reused) = await b.opened(
            self.workers[k], lambda: self._new_worker(k, _nth(b._alive_nodes(), k)), lambda w: w.open.remote(
                b.driver, self.gid, self.spec, self.api_key, self.per_worker, b.timeout_s, b.max_attempts,
                self.limiter, self.limit_key, self.limited, delay, self.max_response_bytes),
            "a generation worker")
        self.node_of[k], self.node_ip[node] = node, ip
        self.ran_on[node] += 1
        self.reused += reused

    async def start(self) -> None:
        async with anyio.create_task_group() as tg:
            for k in range(len(self.workers)):
                tg.start_soon(self.open, k)

    def replace_dead(self, k: int, dead: object) -> bool:
        """A replacement for worker k, which died (once, however many of its batches saw
        it die); False when the slot has had too many."""
        if self.workers[k] is dead:
            if self.replaced_in_slot[k] >= MAX_REPLACEMENTS:
                return False
            self.backend.ray.kill(dead, no_restart=True)
            self.lost_nodes.add(self.node_of[k])
            # on another node than the lost one (which Ray may think alive for a while)
            others = [node for node in self.backend._alive_nodes() if node not in self.lost_nodes]
            self.workers[k] = self._new_worker(k, _nth(others, k) if others else None)
            self.node_of[k] = ""
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
    """One `run` over the workers of one group. A feeder reads the job stream (only as
    far as the workers have room: the first request leaves before the stream is read to
    its end); each worker's pump hands it a batch when its outstanding jobs drop to one
    pool's capacity, of what is waiting, up to HOLD capacities outstanding, so a slow
    worker gets fewer jobs. A batch whose worker died goes, minus its answered jobs, to
    a replacement; a job with an outcome is never sent again."""

    def __init__(self, group: _WorkerGroup, budget: Budget, on_event: OnEvent,
                 cost_of: Callable[[Response], float]) -> None:
        self.group = group
        self.budget = budget
        self.on_event = on_event
        self.cost_of = cost_of
        self.stats = SchedulerStats()
        self.outstanding = [0] * len(group.workers)
        self.freed = [anyio.Event() for _ in group.workers]

    async def run(self, first: Job, rest: AsyncIterator[Job]) -> None:
        """Every job through the workers; outcomes go to `on_event` as they come (none is
        kept here: a run's memory does not grow with its size)."""
        send, receive = anyio.create_memory_object_stream[Job](max_buffer_size=self.group.capacity)
        async with anyio.create_task_group() as tg:
            for k in range(len(self.group.workers)):
                tg.start_soon(self._pump, k, receive.clone(), tg)
            receive.close()
            async with send:
                async for job in _chain(first, rest):
                    if not self.budget.reserve(job.est_cost):
                        self.stats.budget_skipped += 1
                        self._record(Outcome(job.index, skipped=True), None)
                        continue
                    await send.send(job)
        await self._collect_stats()

    async def _pump(self, k: int, inbox: MemoryObjectReceiveStream[Job], tg: anyio.abc.TaskGroup) -> None:
        cap = self.group.capacity
        async with inbox:
            while True:
                while self.outstanding[k] > cap:
                    self.freed[k] = event = anyio.Event()
                    await event.wait()
                try:
                    batch = [await inbox.receive()]
                except anyio.EndOfStream:
                    return
                # a busy worker can wait a moment for a fuller batch (jobs that trickle in
                # would otherwise go one call each); an idle one gets the job at once
                with anyio.move_on_after(COALESCE_S if self.outstanding[k] else 0):
                    while len(batch) + self.outstanding[k] < HOLD * cap:
                        try:
                            batch.append(await inbox.receive())
                        except anyio.EndOfStream:
                            break
                self.outstanding[k] += len(batch)
                tg.start_soon(self._send, k, batch)

    def _free(self, k: int, n: int) -> None:
        self.outstanding[k] -= n
        self.freed[k].set()

    async def _send(self, k: int, batch: list[Job]) -> None:
        """One batch through worker k (and its replacements), outcomes recorded as they
        stream back."""
        group, ray = self.group, self.group.backend.ray
        lost = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)
        left = {job.index: job for job in batch}
        while left:
            worker = group.workers[k]
            try:
                if not group.node_of[k]:
                    await group.open(k)
                node = group.node_of[k]  # this batch's, even once a replacement is opening
                with anyio.fail_after(group.backend.batch_timeout_s):
                    stream = worker.run_batch.options(num_returns="streaming").remote(
                        group.gid, pickle.dumps(list(left.values()), protocol=5))
                    group.batches += 1
                    async for ref in stream:
                        progress: Progress = pickle.loads(await ref)
                        self._count(node, progress.stats)
                        for outcome in progress.outcomes:
                            self._record(outcome, left.pop(outcome.index))
                        group.served[k] += len(progress.outcomes)
                        group.served_by_node[node] += len(progress.outcomes)
                        self._free(k, len(progress.outcomes))
                if left:  # the stream ended short: never expected, but never hang on it
                    raise ray.exceptions.RayActorError()
            except lost as exc:
                if group.replace_dead(k, worker):
                    group.resent += len(left)
                    continue
                self._fail(k, left, f"Ray worker lost {MAX_REPLACEMENTS + 1} times: {type(exc).__name__}")
            except TimeoutError:
                self._fail(k, left, f"no answer from the Ray worker on {group.backend.where} "
                                    f"within {group.backend.batch_timeout_s:g} s")

    def _fail(self, k: int, left: dict[int, Job], why: str) -> None:
        for job in list(left.values()):
            self._record(Outcome(job.index, error=ProviderError("transient", why)), job)
        self._free(k, len(left))
        left.clear()

    def _record(self, outcome: Outcome, job: Job | None) -> None:
        if job is not None and self.budget.max_cost is not None:  # only --max-cost reads it
            actual = self.cost_of(outcome.response) if outcome.response is not None else 0.0
            self.budget.settle(job.est_cost, actual)
        self.on_event(outcome)

    def _count(self, node: str, stats: dict[str, int] | None) -> None:
        """Counters from a worker on `node` (with its outcomes, or at the end): the run's,
        live, and the node's requests."""
        if stats:
            self.group.sent_by_node[node] += stats.get("requests_sent", 0)
            add_stats(self.stats, SchedulerStats(**stats))

    async def _collect_stats(self) -> None:
        """What the workers did not send with outcomes: the last counters, limiter leases,
        endpoint health, whether they gave up."""
        for k, worker in enumerate(self.group.workers):
            try:
                with anyio.fail_after(self.group.backend.connect_timeout_s):
                    report: WorkerReport = await worker.take_stats.remote(self.group.gid)
            except Exception:  # a worker lost (or stuck) at the very end: its last counters are lost
                continue
            self.group.health[k] = report["health"]
            self.group.leases += report["leases"]
            self.group.dead = self.group.dead or report["dead"]
            self._count(self.group.node_of[k], report["stats"])


def _nth(nodes: list[str], k: int) -> str:
    """Worker slot k's node: round-robin over `nodes`."""
    return nodes[k % len(nodes)]


async def _chain(first: Job, rest: AsyncIterator[Job]) -> AsyncIterator[Job]:
    yield first
    async for job in rest:
        yield job
