"""The Runner seam: how a client's requests reach its endpoints.

The engine hands a runner the jobs of one model client (a stream: sending starts while
later jobs are still being read and looked up) and hears each outcome as it completes.
It never asks whether the runner works in this process, on Ray workers or, later,
through a provider's batch API — the idea of httpx's `AsyncBaseTransport`.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..client import ModelClient
from ..scheduler import Budget, Job, Outcome, SchedulerStats

if TYPE_CHECKING:
    from ..store import Store

# map_chunks(fn, [args, ...]) -> [fn(*args), ...], possibly on other machines.
MapChunks = Callable[[Callable[..., Any], list[tuple[Any, ...]]], list[Any]]


class Runner(Protocol):
    name: str

    @property
    def map_chunks(self) -> MapChunks | None:
        """CPU-heavy scoring spread by this runner; None: this machine's cores."""
        ...

    async def run(self, client: ModelClient, jobs: AsyncIterable[Job], *, budget: Budget,
                  on_outcome: Callable[[Outcome], None]) -> list[Outcome]:
        """Process every job; outcomes in job order (and via `on_outcome` as they come)."""
        ...

    def stats(self) -> SchedulerStats:
        """Requests, retries, 429s... summed over every `run` of this runner."""
        ...

    def endpoint_health(self, client: ModelClient) -> list[dict[str, Any]]:
        """Served/failed per endpoint of this client."""
        ...

    @property
    def aborted(self) -> str | None:
        """Why the runner stopped sending (endpoints that failed every request), if it did."""
        ...

    def describe(self) -> dict[str, Any]:
        """What run.json records about the runner."""
        ...

    def bind(self, store: Store, run_id: str) -> None:
        """The run's store and id, once it is open (the batch runner records its batches)."""
        ...

    def close(self) -> None: ...


def add_stats(total: SchedulerStats, part: SchedulerStats) -> None:
    """Accumulate one scheduler's counters into a runner's total."""
    for name, value in vars(part).items():
        setattr(total, name, getattr(total, name) + value)
