"""The batch runner through its seam (runners/base.py): `BatchRunner.run(client, jobs,
on_event)` against the simulator's batch APIs (sim/batch.py), with the engine's side of
the seam played by `Engine` below: it records every event and answers the runner's
`BatchLookup`s from the batch records it was handed (as run/generate.CacheFirst answers
them from the store). What is asserted is what the runner says (its events, in order)
and what the provider was asked (the simulator's /stats), not a CLI run's end state:
submit, poll, collect; a recorded batch re-attached; a dead process's submission found
at the provider by its intent; a batch that expires (sent again in a new batch, or live),
one that fails, one that is gone; attempts that run out.

Real parts: a simulator subprocess on 127.0.0.1, the OpenAI provider (the openai SDK),
real ModelClients; nothing is mocked."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import pytest

from asyncbench.client import ModelClient, make_client
from asyncbench.pricing import PriceTable
from asyncbench.providers import parse_model_spec
from asyncbench.runners.base import (
    BatchLookup,
    BatchRecord,
    BatchState,
    BatchStep,
    Counting,
    JournalsResolved,
    RunnerEvent,
    RunnerReport,
)
from asyncbench.runners.batch import BatchRunner
from asyncbench.runners.local import LocalRunner
from asyncbench.scheduler import Budget, Job, Outcome
from asyncbench.store.batch_journal import Submission
from asyncbench.types import Response

MODEL = "openai:gpt-4o-mini"
E = TypeVar("E")


class SimLike(Protocol):
    base_url: str

    def stats(self, log: bool = False) -> dict[str, Any]: ...


Made = Callable[..., tuple[ModelClient, SimLike]]


@dataclass
class Engine:
    """The engine's side of the seam: every event in order; lookups answered from the
    batch records handed on (and those it is told exist), the collected ones closed."""

    run_id: str = "run-1"
    unresolved: list[Submission] = field(default_factory=list)
    recorded: dict[str, BatchRecord] = field(default_factory=dict)
    events: list[RunnerEvent] = field(default_factory=list)

    def __call__(self, event: RunnerEvent) -> None:
        self.events.append(event)
        if isinstance(event, BatchRecord):
            self.recorded[event.batch_id] = event
        elif isinstance(event, BatchState) and event.collected:
            self.recorded.pop(event.batch_id, None)
        elif isinstance(event, BatchLookup):
            event.run_id = self.run_id
            event.unresolved = list(self.unresolved)
            event.known = set(self.recorded)
            event.open = [(b.batch_id, b.base_url, b.submitted_at, [k for k in b.keys if k in event.keys])
                          for b in self.recorded.values() if set(b.keys) & set(event.keys)]
            event.answered.set()

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    def outcomes(self) -> dict[int, Outcome]:
        got = [e for e in self.events if isinstance(e, Outcome)]
        by_index = {o.index: o for o in got}
        assert len(by_index) == len(got), "an outcome handed on twice"
        return by_index

    def steps(self) -> list[str]:
        return [e.step for e in self.events if isinstance(e, BatchStep)]


pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(start_sim: Callable[..., SimLike],
                 monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Made]:
    """`client(*sim_flags)`: a simulator with those flags and an OpenAI client of it
    (closed in the test's event loop, the one its connections belong to)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-sim")
    made: list[ModelClient] = []

    def make(*flags: str) -> tuple[ModelClient, SimLike]:
        sim = start_sim("--batch-turnaround-s", "0.2", *flags)
        url = sim.base_url + "/v1"
        c = make_client(parse_model_spec(MODEL, [url]), PriceTable(None), concurrency=8)
        made.append(c)
        return c, sim

    yield make
    for c in made:
        await c.aclose()


def jobs(client: ModelClient, n: int, first: int = 0) -> list[Job]:
    return [Job(first + i, client.request(prompt=f"Question {first + i}: what is {first + i} + 1?", max_tokens=8),
                tokens=40, est_cost=0.001) for i in range(n)]


async def _each(items: list[Job]) -> AsyncIterator[Job]:
    for item in items:
        yield item


async def run(runner: BatchRunner | LocalRunner, client: ModelClient, todo: list[Job], engine: Engine,
              budget: Budget | None = None) -> RunnerReport:
    return await runner.run(client, _each(todo), engine, budget=budget or Budget(None))


def batch_runner(*, max_attempts: int = 3, wait: bool = True, fallback: str = "batch") -> BatchRunner:
    """Polled every 50-200 ms (the simulator's batches take 0.2 s)."""
    return BatchRunner(10.0, max_attempts, wait=wait, fallback=fallback, progress=False, poll_s=0.05, max_poll_s=0.2)


def answer(o: Outcome) -> Response:
    assert o.response is not None, o.error
    return o.response


async def test_submit_poll_collect_hands_on_the_live_answers_at_the_batch_price(client: Made) -> None:
    c, sim = client()
    todo = jobs(c, 3)
    engine = Engine()
    report = await run(batch_runner(), c, todo, engine)

    # the journal's steps before the record; the record before any state; collected last
    assert isinstance(engine.events[0], Counting) and isinstance(engine.events[1], BatchLookup)
    assert engine.steps() == ["intent", "uploaded", "created"]
    intent = engine.of(BatchStep)[0]
    assert isinstance(intent, BatchStep) and intent.fields["keys"] == [j.request.key() for j in todo]
    (record,) = engine.of(BatchRecord)
    assert isinstance(record, BatchRecord)
    assert record.intent == intent.intent and record.keys == intent.fields["keys"] and record.run_id == "run-1"
    states = engine.of(BatchState)
    assert states[-1] == BatchState(record.batch_id, "completed", {"total": 3, "completed": 3, "failed": 0}, True)
    assert not any(s.collected for s in states[:-1])
    last_outcome = max(i for i, e in enumerate(engine.events) if isinstance(e, Outcome))
    assert last_outcome < engine.events.index(states[-1])  # answers handed on before "collected"

    outcomes = engine.outcomes()
    assert sorted(outcomes) == [0, 1, 2]
    assert all(o.response is not None and o.error is None and o.attempts == 1 for o in outcomes.values())
    assert {answer(o).discount for o in outcomes.values()} == {c.price.batch} != {1.0}
    assert report.stats.requests_sent == 3 and report.aborted is None
    assert report.backend["batches_submitted"] == [record.batch_id] and report.backend["pending_requests"] == 0
    stats = sim.stats()
    assert (stats["batches_submitted"], stats["batch_requests"], stats["requests"]) == (1, 3, 0)

    # a batch answer is the live answer to the same request
    live = Engine()
    await run(LocalRunner(10.0, 1), c, todo, live)
    assert {i: answer(o).text for i, o in live.outcomes().items()} == {i: answer(o).text for i, o in outcomes.items()}
    assert not live.of(BatchStep) and not live.of(BatchRecord)


async def test_no_wait_leaves_the_batch_pending_and_the_next_run_reattaches_to_it(client: Made) -> None:
    c, sim = client()
    todo = jobs(c, 4)
    engine = Engine()
    first = await run(batch_runner(wait=False), c, todo, engine)
    (record,) = engine.of(BatchRecord)
    assert isinstance(record, BatchRecord)
    pending = engine.outcomes()
    assert sorted(pending) == [0, 1, 2, 3]
    assert all(o.response is None and o.error is not None and o.error.kind == "transient"
               and "pending in a batch" in o.error.message for o in pending.values())
    assert first.backend["pending_requests"] == 4 and first.backend["batches_submitted"] == [record.batch_id]

    # the next invocation: the store holds the batch (not collected); nothing is submitted
    again = Engine(recorded={record.batch_id: record})
    second = await run(batch_runner(), c, todo, again)
    assert again.steps() == [] and not again.of(BatchRecord)
    assert second.backend["batches_reattached"] == [record.batch_id] and second.backend["batches_submitted"] == []
    done = again.outcomes()
    assert sorted(done) == [0, 1, 2, 3] and all(o.response is not None for o in done.values())
    assert again.of(BatchState)[-1].collected
    stats = sim.stats()
    assert (stats["batches_submitted"], stats["batch_requests"], stats["requests"]) == (1, 4, 0)


async def test_a_dead_processes_submission_is_found_by_its_intent_not_submitted_again(client: Made) -> None:
    """A process killed after creating a batch but before the store held its id: the
    journal has the intent only; the runner finds the batch at the provider by it."""
    c, sim = client()
    todo = jobs(c, 3)
    keys = [j.request.key() for j in todo]
    url = c.spec.base_urls[0]

    batch_id = await c.provider.batch_submit(url, [c.provider.batch_entry(j.request, k) for j, k in zip(todo, keys)],
                                             {"asyncbench_run": "run-1", "asyncbench_intent": "intent-dead"})
    found = Submission("intent-dead", "run-1", "openai", "gpt-4o-mini", c.spec.endpoint_id, url, keys, at=0.0)
    never = Submission("intent-never", "run-1", "openai", "gpt-4o-mini", c.spec.endpoint_id, url, keys[:1], at=0.0)
    engine = Engine(unresolved=[found, never])
    report = await run(batch_runner(), c, todo, engine)

    (record,) = engine.of(BatchRecord)
    assert isinstance(record, BatchRecord)
    assert (record.batch_id, record.keys, record.intent) == (batch_id, keys, None)
    (resolved,) = engine.of(JournalsResolved)
    assert resolved.submissions == [found, never] and found.done and never.done
    assert engine.steps() == []  # its requests were in the batch found: nothing submitted
    assert report.backend["batches_reattached"] == [batch_id]
    assert all(o.response is not None for o in engine.outcomes().values()) and len(engine.outcomes()) == 3
    assert sim.stats()["batches_submitted"] == 1


async def test_an_expired_batchs_unanswered_requests_go_in_a_new_batch(client: Made) -> None:
    c, sim = client("--batch-expire", "1")
    todo = jobs(c, 4)
    engine = Engine()
    report = await run(batch_runner(), c, todo, engine)
    first, second = engine.of(BatchRecord)
    assert isinstance(first, BatchRecord) and isinstance(second, BatchRecord)
    assert first.keys == [j.request.key() for j in todo]
    assert second.keys == first.keys[2:]  # the simulator's expired batch ran its first half
    assert [(s.batch_id, s.state) for s in engine.of(BatchState) if s.collected] == \
        [(first.batch_id, "expired"), (second.batch_id, "completed")]
    outcomes = engine.outcomes()
    assert [outcomes[i].attempts for i in range(4)] == [1, 1, 2, 2]
    assert all(o.response is not None and o.response.discount == c.price.batch for o in outcomes.values())
    assert report.backend["batches_submitted"] == [first.batch_id, second.batch_id]
    stats = sim.stats()
    assert (stats["batches_submitted"], stats["batch_requests"], stats["requests"]) == (2, 6, 0)
    assert report.stats.requests_sent == 4  # what the batches ran, not the two the first expired


async def test_with_the_live_fallback_an_expired_batchs_rest_is_sent_live(client: Made) -> None:
    c, sim = client("--batch-expire", "1")
    todo = jobs(c, 4)
    engine = Engine()
    report = await run(batch_runner(fallback="live"), c, todo, engine)
    assert len(engine.of(BatchRecord)) == 1
    outcomes = engine.outcomes()
    assert [answer(outcomes[i]).discount for i in range(4)] == [c.price.batch, c.price.batch, 1.0, 1.0]
    assert report.backend["batches_submitted"] == [engine.of(BatchRecord)[0].batch_id]
    stats = sim.stats()
    assert (stats["batches_submitted"], stats["requests"]) == (1, 2)  # the two expired ones, live
    assert report.stats.requests_sent == 4  # two the batch ran, two sent live


async def test_requests_out_of_attempts_fail_with_the_batchs_error(client: Made) -> None:
    c, _ = client("--batch-expire", "2")
    todo = jobs(c, 4)
    engine = Engine()
    await run(batch_runner(max_attempts=2), c, todo, engine)
    assert len(engine.of(BatchRecord)) == 2  # not a third: attempts ran out
    outcomes = engine.outcomes()
    # batch 1 answers 0, 1 of 4; batch 2 (2, 3) expires after answering 2
    assert [outcomes[i].response is not None for i in range(4)] == [True, True, True, False]
    err = outcomes[3].error
    assert err is not None and err.kind == "transient" and "expired" in err.message and outcomes[3].attempts == 2


async def test_a_failed_batch_fails_its_requests_at_once(client: Made,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch whose file the provider refuses (validation: over its size limit) fails:
    its requests are outcomes with the provider's reason, not sent again."""
    c, sim = client("--batch-max-bytes", "300")
    monkeypatch.setenv("ASYNCBENCH_BATCH_MAX_BYTES", "1000000")  # the runner thinks it fits
    todo = jobs(c, 3)
    engine = Engine()
    await run(batch_runner(), c, todo, engine)
    (record,) = engine.of(BatchRecord)
    assert isinstance(record, BatchRecord)
    assert engine.of(BatchState)[-1] == BatchState(record.batch_id, "failed", {"total": 0, "completed": 0, "failed": 0},
                                                   True)
    outcomes = engine.outcomes()
    assert sorted(outcomes) == [0, 1, 2]
    for o in outcomes.values():
        assert o.response is None and o.error is not None and o.error.kind == "fatal"
        assert "failed" in o.error.message and "file_too_large" in o.error.message
    assert sim.stats()["batches_submitted"] == 1


async def test_a_recorded_batch_the_provider_no_longer_has_is_lost_and_its_requests_go_again(
        client: Made) -> None:
    c, sim = client()
    todo = jobs(c, 2)
    keys = [j.request.key() for j in todo]
    gone = BatchRecord("batch_gone", "run-1", "openai", "gpt-4o-mini", c.spec.endpoint_id, c.spec.base_urls[0], keys,
                       0.0)
    engine = Engine(recorded={gone.batch_id: gone})
    report = await run(batch_runner(), c, todo, engine)
    assert engine.of(BatchState)[0] == BatchState("batch_gone", "lost", {}, True)
    (record,) = engine.of(BatchRecord)
    assert isinstance(record, BatchRecord) and record.keys == keys and record.batch_id != "batch_gone"
    outcomes = engine.outcomes()
    assert all(o.response is not None and o.attempts == 2 for o in outcomes.values())
    assert report.backend["batches_reattached"] == ["batch_gone"]
    assert sim.stats()["batches_submitted"] == 1


async def test_max_cost_reserves_at_the_batch_price_and_skips_what_does_not_fit(client: Made) -> None:
    c, sim = client()
    todo = jobs(c, 3)
    each = todo[0].est_cost * c.price.batch
    budget = Budget(each * 2.5)  # room for two at the batch price (1.25 at list price)
    engine = Engine()
    await run(batch_runner(), c, todo, engine, budget)
    (record,) = engine.of(BatchRecord)
    assert len(record.keys) == 2
    outcomes = engine.outcomes()
    assert [outcomes[i].skipped for i in range(3)] == [False, False, True]
    assert budget.reserved == pytest.approx(0.0) and budget.spent > 0
    assert sim.stats()["batch_requests"] == 2


async def test_a_client_without_a_batch_api_is_sent_live(client: Made,
                                                   start_sim: Callable[..., SimLike]) -> None:
    sim = start_sim()
    url = sim.base_url + "/v1"
    c = make_client(parse_model_spec("openai-compat:sim", [url]), PriceTable(None), concurrency=8)
    try:
        engine = Engine()
        report = await run(batch_runner(), c, jobs(c, 2), engine)
    finally:
        await c.aclose()
    assert not engine.of(BatchLookup) and not engine.steps()
    assert report.backend.get("name") != "batch"
    assert all(o.response is not None and o.response.discount == 1.0 for o in engine.outcomes().values())
    stats = sim.stats()
    assert (stats["requests"], stats["batches_submitted"]) == (2, 0)
