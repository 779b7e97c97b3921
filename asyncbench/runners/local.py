"""LocalRunner: the scheduler in this process, one per `run` call, on the client's own
endpoint pool and limiter (so eval, judge and prior requests to the same client share
its limits)."""

from __future__ import annotations

from collections.abc import AsyncIterable

from ..client import ModelClient
from ..scheduler import Budget, Job, Scheduler
from ..types import Response
from .base import Counting, MapChunks, OnEvent, RunnerReport, SendOrder

# what run.json's "backend" names this runner
LOCAL = "local"


class LocalRunner:
    map_chunks: MapChunks | None = None

    def __init__(self, timeout_s: float, max_attempts: int, *, by_prefix: bool = True) -> None:
        """`by_prefix`: say that jobs may be held back by shared prefix (the batch runner's
        live path, which today sends in the order given, does not)."""
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.by_prefix = by_prefix
        self.aborted: str | None = None

    async def run(self, client: ModelClient, jobs: AsyncIterable[Job], on_event: OnEvent, *,
                  budget: Budget) -> RunnerReport:
        def cost_of(r: Response) -> float:
            return client.price.cost(r.usage, r.discount)

        on_event(SendOrder(self.by_prefix))
        scheduler = Scheduler(client.provider, client.pool, client.limiter, budget=budget,
                              timeout_s=self.timeout_s, max_attempts=self.max_attempts,
                              on_outcome=on_event, cost_of=cost_of, ends_in_time=client.provider.ends_in_time,
                              key_hint=client.key_hint)
        on_event(Counting(scheduler.stats))
        try:
            await scheduler.run(jobs)
        finally:
            self.aborted = self.aborted or scheduler.dead
        return self.report(client, scheduler)

    def report(self, client: ModelClient, scheduler: Scheduler) -> RunnerReport:
        return RunnerReport(scheduler.stats, client.pool.health(), self.aborted, {"name": LOCAL})

    async def aclose(self) -> None:
        pass
