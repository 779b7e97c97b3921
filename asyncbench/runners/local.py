"""LocalRunner: the scheduler in this process, one per `run` call, on the client's own
endpoint pool and limiter (so eval, judge and prior requests to the same client share
its limits)."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable
from typing import Any

from ..client import ModelClient
from ..scheduler import Budget, Job, Outcome, Scheduler, SchedulerStats
from ..types import Response
from .base import MapChunks, add_stats


class LocalRunner:
    name = "local"
    map_chunks: MapChunks | None = None

    def __init__(self, timeout_s: float, max_attempts: int) -> None:
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self._stats = SchedulerStats()
        self.aborted: str | None = None

    async def run(self, client: ModelClient, jobs: AsyncIterable[Job], *, budget: Budget,
                  on_outcome: Callable[[Outcome], None]) -> list[Outcome]:
        def cost_of(r: Response) -> float:
            return client.price.cost(r.usage, r.discount)

        scheduler = Scheduler(client.provider, client.pool, client.limiter, budget=budget,
                              timeout_s=self.timeout_s, max_attempts=self.max_attempts,
                              on_outcome=on_outcome, cost_of=cost_of)
        try:
            return await scheduler.run(jobs)
        finally:
            add_stats(self._stats, scheduler.stats)
            self.aborted = self.aborted or scheduler.dead

    def stats(self) -> SchedulerStats:
        return self._stats

    def endpoint_health(self, client: ModelClient) -> list[dict[str, Any]]:
        return client.pool.health()

    def describe(self) -> dict[str, Any]:
        return {"name": "local"}

    def bind(self, store: Any, run_id: str) -> None:
        pass

    def close(self) -> None:
        pass
