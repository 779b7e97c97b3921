"""Unit tests of the bottom layers, beside the end-to-end ones: Scheduler, EndpointPool,
Budget, RateLimiter and Store. Providers here are tiny in-process implementations of the
Provider protocol (the protocol, not a stand-in for our code); stores are real DuckDB files."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest

from asyncbench.errors import ProviderError
from asyncbench.limits import RateLimiter, parse_ratelimit_headers
from asyncbench.scheduler import Budget, EndpointPool, Job, Scheduler
from asyncbench.store import Store
from asyncbench.types import Request, Response, Usage


class ScriptedProvider:
    """Answers per URL: a list of ("ok" | "transient" | "fatal" | "rate_limited" | "bad") per call."""

    name = "scripted"

    def __init__(self, script: dict[str, list[str]] | None = None, default: str = "ok") -> None:
        self.script = script or {}
        self.default = default
        self.calls: list[str] = []

    async def send(self, request: Request, base_url: str, timeout: float) -> Response:
        self.calls.append(base_url)
        todo = self.script.get(base_url) or []
        what = todo.pop(0) if todo else self.default
        await anyio.sleep(0)
        if what == "ok":
            return Response(f"answer to {request.prompt}", Usage(10, 2), 1.0, "stop", base_url)
        if what == "bad":  # an answer whose text is no text
            return Response(5, Usage(10, 2), 1.0, "stop", base_url)  # type: ignore[arg-type]
        raise ProviderError(what, f"{what} from {base_url}", retry_after=0.01 if what == "rate_limited" else None)

    async def aclose(self) -> None:
        pass


def jobs(n: int, cost: float = 0.0) -> list[Job]:
    return [Job(i, Request("p", "m", "e", prompt=f"q{i}", max_tokens=4), tokens=10, est_cost=cost) for i in range(n)]


def run(scheduler: Scheduler, items: list[Job]) -> list:  # type: ignore[type-arg]
    return anyio.run(scheduler.run, items)


def fast(s: Scheduler) -> Scheduler:
    s._wait = lambda exc, attempts: 0.0  # type: ignore[method-assign]  # no back-off sleeps in unit tests
    return s


def test_scheduler_answers_in_order_and_counts() -> None:
    p = ScriptedProvider({"http://a": ["transient", "ok"]})
    s = fast(Scheduler(p, EndpointPool(["http://a"], 4), RateLimiter(), max_attempts=3))
    out = run(s, jobs(5))
    assert [o.index for o in out] == [0, 1, 2, 3, 4]
    assert all(o.response is not None for o in out)
    assert s.stats.requests_sent == 6 and s.stats.retries == 1 and s.stats.transient_errors == 1


def test_fatal_errors_are_not_retried_and_attempts_are_bounded() -> None:
    p = ScriptedProvider(default="fatal")
    s = fast(Scheduler(p, EndpointPool(["http://a"], 2), RateLimiter(), max_attempts=5))
    out = run(s, jobs(2))
    assert all(o.error is not None and o.error.kind == "fatal" and o.attempts == 1 for o in out)
    p = ScriptedProvider(default="transient")
    s = fast(Scheduler(p, EndpointPool(["http://a"], 2), RateLimiter(), max_attempts=3))
    out = run(s, jobs(1))
    assert out[0].attempts == 3 and out[0].error is not None


def test_a_malformed_answer_is_retried_not_stored() -> None:
    p = ScriptedProvider({"http://a": ["bad", "ok"]})
    s = fast(Scheduler(p, EndpointPool(["http://a"], 1), RateLimiter(), max_attempts=3))
    out = run(s, jobs(1))
    assert out[0].response is not None and out[0].response.usage.prompt_tokens == 10 and out[0].attempts == 2


def test_dead_endpoints_end_the_run() -> None:
    p = ScriptedProvider(default="transient")
    s = fast(Scheduler(p, EndpointPool(["http://a"], 1), RateLimiter(), max_attempts=2))
    out = run(s, jobs(30))
    assert s.dead is not None and "http://a" in s.dead
    assert len(p.calls) < 30 * 2  # the rest failed without being sent
    assert all(o.error is not None for o in out)


def test_budget_stops_issuing_before_the_cap() -> None:
    b = Budget(1.0)
    assert b.reserve(0.4) and b.reserve(0.4)
    assert not b.reserve(0.4) and b.exhausted
    assert not b.reserve(0.01)  # one clear stopping point
    unlimited = Budget(None)
    assert all(unlimited.reserve(100.0) for _ in range(10))
    s = fast(Scheduler(ScriptedProvider(), EndpointPool(["http://a"], 1), RateLimiter(), budget=Budget(0.25),
                       cost_of=lambda r: 0.1))
    out = run(s, jobs(5, cost=0.1))
    assert sum(o.response is not None for o in out) == 2 and sum(o.skipped for o in out) == 3


def test_pool_routes_to_the_least_busy_and_takes_a_failing_replica_out() -> None:
    async def go() -> None:
        pool = EndpointPool(["http://a", "http://b"], concurrency=2, fail_threshold=2)
        first, second = await pool.acquire(), await pool.acquire()
        assert (first.url, second.url) == ("http://a", "http://b")  # least outstanding first
        pool.release(first, False)
        pool.release(second, True)
        again = await pool.acquire()  # a: as idle as b, and has served less
        assert again.url == "http://a"
        pool.release(again, False)  # its second failure in a row: taken out
        health = {e["url"]: e["healthy"] for e in pool.health()}
        assert health == {"http://a": False, "http://b": True}
        for _ in range(3):  # while it is out, everything goes to the other one
            ep = await pool.acquire()
            assert ep.url == "http://b"
            pool.release(ep, True)

    anyio.run(go)


def test_a_single_endpoint_is_never_taken_out() -> None:
    async def go() -> None:
        pool = EndpointPool(["http://a"], concurrency=4, fail_threshold=1)
        for _ in range(10):
            ep = await pool.acquire()
            pool.release(ep, False)
        assert pool.health()[0]["healthy"]
        with anyio.fail_after(1):
            pool.release(await pool.acquire(), True)

    anyio.run(go)


def test_rate_limiter_spaces_requests_and_learns_from_headers() -> None:
    async def go() -> float:
        limiter = RateLimiter(rpm=600)  # 10/s, a one-second burst
        t0 = time.monotonic()
        for _ in range(15):
            await limiter.acquire(1)
        return time.monotonic() - t0

    elapsed = anyio.run(go)
    assert elapsed >= 0.4  # 10 from the burst, 5 more at 10/s
    learned = RateLimiter()
    learned.observe(parse_ratelimit_headers({"x-ratelimit-limit-requests": "120", "x-ratelimit-remaining-requests": "7"}))
    # the bucket starts from what the server says is left, never above its own burst
    assert learned.requests is not None and learned.requests.per_minute == 120
    assert learned.requests.level <= min(7, learned.requests.capacity)
    learned.pause(5)
    assert learned.paused_until > time.monotonic() + 4


def test_store_keeps_answers_across_opens_and_never_serves_failures(tmp_path: Path) -> None:
    path = tmp_path / "c.duckdb"
    row = {"key": "k1", "provider": "p", "model": "m", "endpoint": "e", "request_json": "{}", "text": "hello",
           "finish_reason": "stop", "prompt_tokens": 3, "completion_tokens": 1, "cached_prompt_tokens": 0,
           "latency_ms": 2.0, "cost_usd": 0.5, "served_by": "http://a", "created_at": 1.0}
    with Store(path) as store:
        store.cache.put_responses([row])
        store.cache.put_responses([{**row, "text": "second write of the same key is ignored"}])
        store.cache.put_failures([{"key": "k2", "run_id": "r", "sample_id": "s", "kind": "transient", "status": 500,
                             "message": "boom", "attempts": 3}])
    with Store(path) as store:
        found = store.cache.lookup(["k1", "k2", "k3"])
        assert set(found) == {"k1"} and found["k1"].text == "hello" and found["k1"].prompt_tokens == 3
        stats = store.cache.stats()
        assert stats["responses"] == 1 and stats["failures"] == 1 and stats["cost_usd"] == pytest.approx(0.5)
        store.runs.start_run("r", "jsonl:x", "p:m", {"a": 1})
        store.runs.finish_run("r", "partial", {"n": 1})
        assert json.loads(store.runs.config_json("r") or "") == {"a": 1} and store.runs.runs()[0].status == "partial"
