"""A server's answers cannot hold a run or its memory (issue 24, servers 5 and 6), on every
transport: our HTTP/1.1 client (`openai-compat:`), and httpx2 under the official `openai` and
`anthropic` SDKs. The hostile server (asyncbench/sim/hostile.py) listens on 127.0.0.1
with real sockets; each behaviour is a path prefix. Times are in
bench/hostile_servers.md, not asserted here."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from asyncbench.limits import MAX_RETRY_AFTER_S, RateLimiter, parse_ratelimit_headers, parse_retry_after
from asyncbench.providers.anthropic import AnthropicProvider
from asyncbench.providers.base import ProviderBase
from asyncbench.providers.openai import OpenAIProvider
from asyncbench.providers.openai_compat import OpenAICompatProvider
from asyncbench.scheduler import EndpointPool, Job, Outcome, Scheduler
from asyncbench.sim.hostile import HostileServer
from asyncbench.types import Request

TIMEOUT_S = 2.0
CAP = 1024 * 1024  # --max-response-bytes in these tests


class Hostile:
    """The hostile server on its own event loop in a thread (so `sent` can be read)."""

    def __init__(self) -> None:
        self.server = HostileServer()
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.listener = self.loop.run_until_complete(asyncio.start_server(self.server.handle, "127.0.0.1", 0))
            self.port = self.listener.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        ready.wait(10)

    def close(self) -> None:
        async def stop() -> None:
            self.listener.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def hostile() -> Iterator[Hostile]:
    server = Hostile()
    yield server
    server.close()


TRANSPORTS = {
    "openai-compat (http1)": (lambda: OpenAICompatProvider("m", None), "/v1"),
    "openai SDK (httpx2)": (lambda: OpenAIProvider("gpt-4o-mini", None), "/v1"),
    "anthropic SDK (httpx2)": (lambda: AnthropicProvider("claude-haiku-4-5", None), ""),
}


def run_jobs(provider: ProviderBase, base_url: str, n: int = 3) -> tuple[Scheduler, list[Outcome]]:
    provider.max_response_bytes = CAP

    async def go() -> tuple[Scheduler, list[Outcome]]:
        # as LocalRunner builds it: a provider whose own deadline is total gets no second one
        scheduler = Scheduler(provider, EndpointPool([base_url], 4), RateLimiter(), timeout_s=TIMEOUT_S,
                              max_attempts=3, ends_in_time=provider.ends_in_time)
        request = Request(provider=provider.name, model=provider.model, endpoint_id=base_url,
                          messages=[{"role": "user", "content": "hello"}], max_tokens=8)
        try:
            return scheduler, await scheduler.run([Job(i, request, tokens=10) for i in range(n)])
        finally:
            await provider.aclose()

    return anyio.run(go)


def _transport(name: str, hostile: Hostile, behaviour: str) -> tuple[ProviderBase, str]:
    make, suffix = TRANSPORTS[name]
    return make(), f"http://127.0.0.1:{hostile.port}/{behaviour}{suffix}"


@pytest.mark.slow
@pytest.mark.parametrize("transport", list(TRANSPORTS))
@pytest.mark.parametrize("behaviour", ["retry-after-huge", "retry-after-unparsable", "retry-after-date", "always-429"])
def test_an_endpoint_that_only_rate_limits_ends_the_run(behaviour: str, transport: str, hostile: Hostile) -> None:
    provider, url = _transport(transport, hostile, behaviour)
    scheduler, outcomes = run_jobs(provider, url)
    assert all(o.response is None and o.error is not None for o in outcomes)
    assert scheduler.dead is not None and "refused every request with 429" in scheduler.dead, scheduler.dead
    assert scheduler.stats.rate_limited >= 1
    # no pause it took reaches past --timeout from now, whatever the header said
    assert isinstance(scheduler.limiter, RateLimiter)
    assert scheduler.limiter.paused_until - time.monotonic() <= TIMEOUT_S


@pytest.mark.parametrize("transport", list(TRANSPORTS))
@pytest.mark.parametrize("behaviour", ["endless-body", "gzip-bomb", "huge-json"])
def test_a_body_over_the_cap_is_refused_while_streaming(behaviour: str, transport: str, hostile: Hostile) -> None:
    provider, url = _transport(transport, hostile, behaviour)
    before = hostile.server.sent[behaviour]
    _, outcomes = run_jobs(provider, url, n=2)
    for o in outcomes:
        assert o.error is not None and o.error.kind == "fatal", o.error
        assert "over --max-response-bytes 1,048,576 bytes" in o.error.message, o.error.message
    # the client hung up near the cap: the server got out a few socket buffers more at
    # most, not the 100 MB (or endless) it meant to send
    assert hostile.server.sent[behaviour] - before < 2 * 24 * CAP


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_a_slow_drip_cannot_extend_the_request_deadline(transport: str, hostile: Hostile) -> None:
    provider, url = _transport(transport, hostile, "slow-drip")
    scheduler, outcomes = run_jobs(provider, url, n=2)
    for o in outcomes:
        assert o.error is not None and o.response is None
    first = next(o for o in outcomes if o.attempts)
    assert first.error is not None and "within --timeout 2s" in first.error.message, first.error.message
    assert scheduler.dead is not None and "failed every request" in scheduler.dead


@pytest.mark.parametrize("value,expected", [
    ("1e9", MAX_RETRY_AFTER_S), ("999999999999999999999", MAX_RETRY_AFTER_S), ("7", 7.0), ("0.5", 0.5),
    ("soon", None), ("5 minutes", None), ("inf", None), ("-3", None), ("", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
])
def test_retry_after_is_capped_and_unparsable_values_are_absent(value: str, expected: float | None) -> None:
    assert parse_retry_after(value) == expected
    got: dict[str, Any] = parse_ratelimit_headers({"retry-after": value})
    assert got.get("retry_after") == expected


def test_retry_after_as_an_http_date_counts_from_now() -> None:
    from email.utils import formatdate

    wait = parse_retry_after(formatdate(time.time() + 20, usegmt=True))
    assert wait is not None and 17 <= wait <= 20
    assert parse_ratelimit_headers({"retry-after-ms": "1e12"})["retry_after"] == MAX_RETRY_AFTER_S
    assert "retry_after" not in parse_ratelimit_headers({"retry-after-ms": "nan"})
