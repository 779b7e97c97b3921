"""The Runner seam: how a client's requests reach its endpoints.

The engine hands a runner the jobs of one model client (a stream: sending starts while
later jobs are still being read and looked up) and hears what happens as events: each
outcome as it completes, and, from the batch runner, every batch record it must keep.
The engine writes them all (it is the store's only writer). When the jobs are done the
runner returns a typed `RunnerReport`: counts, endpoint health, why it stopped sending,
what run.json records about it. It never says whether it works in this process, on Ray
workers or through a provider's batch API: the idea of httpx's `AsyncBaseTransport`
(`handle_async_request`, `aclose`).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

import anyio

from ..client import ModelClient
from ..scheduler import Budget, EndpointHealth, Job, Outcome, SchedulerStats

if TYPE_CHECKING:
    from ..store.batch_journal import Submission

# A value as JSON holds it (run.json, the batch journal).
JSON: TypeAlias = "str | int | float | bool | list[JSON] | dict[str, JSON] | None"

# map_chunks(fn, [args, ...]) -> [fn(*args), ...], possibly on other machines.
MapChunks = Callable[[Callable[..., object], list[tuple[object, ...]]], list[object]]


@dataclass(frozen=True)
class SendOrder:
    """Said before the first job is read: this runner sends jobs one by one as they come
    (not collected into a batch), so holding a shared-prefix group's others until its
    first is answered lets them hit the provider's prompt cache (prompt_cache.py)."""

    by_prefix: bool


@dataclass(frozen=True)
class Counting:
    """Said as a run starts: its live counters (requests, retries, 429s...), which the
    engine reads for the progress bar and books when the run ends, finished or not."""

    stats: SchedulerStats


@dataclass(frozen=True)
class BatchStep:
    """One step of a batch submission, for the batch journal (store/batch_journal.py):
    on disk (fsynced) before the event handler returns, i.e. before the next step."""

    step: Literal["intent", "uploaded", "created", "void"]
    intent: str
    fields: dict[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchRecord:
    """A batch that exists at the provider, for the store's batch table. `intent`: this
    process's submission, whose journal says "recorded" once the store holds it."""

    batch_id: str
    run_id: str
    provider: str
    model: str
    endpoint: str
    base_url: str
    keys: list[str]
    submitted_at: float
    intent: str | None = None


@dataclass(frozen=True)
class BatchState:
    """A batch's new state and counts; `collected`: its answers were handed on (as
    outcomes, which the engine journals first) and it is never polled again."""

    batch_id: str
    state: str
    counts: dict[str, int]
    collected: bool = False


@dataclass(frozen=True)
class JournalsResolved:
    """Submissions of gone processes, now resolved: their journal files go once the
    store holds what they recovered."""

    submissions: list[Submission]


@dataclass
class BatchLookup:
    """A question to the store, answered by the engine's writer after every record
    handed on before it is written: the run, the journal's unresolved submissions,
    the batch ids the store knows and its open batches holding any of `keys`."""

    provider: str
    endpoint: str
    keys: list[str]
    run_id: str = ""
    unresolved: list[Submission] = field(default_factory=list)
    known: set[str] = field(default_factory=set)
    open: list[tuple[str, str, float, list[str]]] = field(default_factory=list)
    answered: anyio.Event = field(default_factory=anyio.Event)


BatchEvent: TypeAlias = "BatchStep | BatchRecord | BatchState | JournalsResolved | BatchLookup"
RunnerEvent: TypeAlias = "Outcome | SendOrder | Counting | BatchEvent"
OnEvent = Callable[[RunnerEvent], None]


@dataclass(frozen=True)
class RunnerReport:
    """What one `run` leaves: the request counts of that run, the client's endpoint
    health, why the runner stopped sending (if it did, in this run or before), what
    run.json records about the runner (its "backend" key) and jobs per node (Ray)."""

    stats: SchedulerStats
    endpoints: list[EndpointHealth]
    aborted: str | None
    backend: dict[str, JSON]
    per_node: list[int] = field(default_factory=list)


class Runner(Protocol):
    @property
    def map_chunks(self) -> MapChunks | None:
        """CPU-heavy scoring spread by this runner; None: this machine's cores."""
        ...

    async def run(self, client: ModelClient, jobs: AsyncIterable[Job], on_event: OnEvent, *,
                  budget: Budget) -> RunnerReport:
        """Process every job; each outcome (and batch record) goes to `on_event` as it comes."""
        ...

    async def aclose(self) -> None: ...


def add_stats(total: SchedulerStats, part: SchedulerStats) -> None:
    """Accumulate one scheduler's counters into a runner's total."""
    for name, value in vars(part).items():
        setattr(total, name, getattr(total, name) + value)
