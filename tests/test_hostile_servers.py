"""A server's answers cannot hold a run or its memory (issue 24, servers 5 and 6), nor
switch its back-off off, crash it or send its prompts elsewhere (issue 35), on every
transport: our HTTP/1.1 client (`openai-compat:`), and httpx2 under the official `openai` and
`anthropic` SDKs. The hostile server (asyncbench/sim/hostile.py) listens on 127.0.0.1
with real sockets; each behaviour is a path prefix. Times are in
bench/hostile_servers.md, not asserted here."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncbench.errors import ProviderError
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
            # the other origin `redirect-cross-origin` points at
            self.other = self.loop.run_until_complete(asyncio.start_server(self.server.handle_other, "127.0.0.1", 0))
            self.server.other_port = self.other.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        ready.wait(10)

    def close(self) -> None:
        async def stop() -> None:
            self.listener.close()
            self.other.close()
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


def run_jobs(provider: ProviderBase, base_url: str, n: int = 3,
             timeout_s: float = TIMEOUT_S) -> tuple[Scheduler, list[Outcome]]:
    """`n` jobs through the scheduler as a run sends them (4 at a time, 3 attempts each)."""
    provider.max_response_bytes = CAP

    async def go() -> tuple[Scheduler, list[Outcome]]:
        # as LocalRunner builds it: a provider whose own deadline is total gets no second one
        scheduler = Scheduler(provider, EndpointPool([base_url], 4), RateLimiter(), timeout_s=timeout_s,
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
    # the cap ends these, not the deadline: one that a loaded machine cannot reach first
    # (the server's 16 MB gzip pieces once outlasted a 2 s deadline at load 15)
    _, outcomes = run_jobs(provider, url, n=2, timeout_s=60.0)
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
    ("soon", None), ("5 minutes", None), ("inf", None), ("-3", None), ("", None),
    # asking for no wait is no Retry-After: the scheduler's own back-off applies (issue 35)
    ("0", None), ("0.0", None), ("Wed, 21 Oct 2015 07:28:00 GMT", None),
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
    for asks_nothing in ("0", "-5"):
        assert "retry_after" not in parse_ratelimit_headers({"retry-after-ms": asks_nothing})


# -- issue 35: hostile peers, round three ----------------------------------------------------
# A bound far above what these runs take (a few seconds) and far below what the behaviours
# did before (for ever, or 5.5-8 x --timeout per attempt): a loaded machine cannot fail it.
ENDS_WITHIN_S = 15 * TIMEOUT_S


@pytest.mark.parametrize("transport", list(TRANSPORTS))
@pytest.mark.parametrize("behaviour,says", [
    ("chunk-negative", "chunk"), ("one-byte-chunks", "over 1"), ("continue-flood", "interim")])
def test_a_hostile_framing_ends_in_a_classified_failure(behaviour: str, says: str, transport: str,
                                                         hostile: Hostile) -> None:
    """A chunk size of -5 spun our parser for ever; a million one-byte chunks took 3 CPU-s
    to parse; 100 Continue heads without end held a call past its deadline. Each is now
    an error naming what the server did, in far less than the time these took."""
    provider, url = _transport(transport, hostile, behaviour)
    t0 = time.monotonic()
    _, outcomes = run_jobs(provider, url, n=2)
    assert time.monotonic() - t0 < ENDS_WITHIN_S
    for o in outcomes:
        assert o.response is None and isinstance(o.error, ProviderError), o
    errors = [o.error for o in outcomes if o.attempts]
    assert errors
    if behaviour == "continue-flood" and "SDK" in transport:
        # httpcore skips interim heads out of our sight: the attempt's deadline ends it
        assert all("within --timeout" in e.message or "timed out" in e.message for e in errors), errors
    else:
        assert all(says in e.message for e in errors), [e.message for e in errors]
    if behaviour != "chunk-negative":  # refused, not retried: the server would do it again
        assert all(e.kind == "fatal" for e in errors) or ("SDK" in transport and behaviour == "continue-flood")


@pytest.mark.parametrize("transport", list(TRANSPORTS))
@pytest.mark.parametrize("behaviour", ["retry-after-zero", "retry-after-past"])
def test_a_retry_after_asking_for_no_wait_cannot_switch_the_back_off_off(behaviour: str, transport: str,
                                                                          hostile: Hostile) -> None:
    """20 samples against a server that answers every request 429 with `Retry-After: 0` (or
    a date in the past) sent 1,170 requests in a 20 s run; the wait is now at least the
    scheduler's own back-off, as with no header at all. With 4 workers for the one
    `--timeout` the run lasts, no back-off meant a request every ~25 ms each (~300 here)."""
    provider, url = _transport(transport, hostile, behaviour)
    before = hostile.server.requests[behaviour]
    scheduler, outcomes = run_jobs(provider, url, n=20)
    sent = hostile.server.requests[behaviour] - before
    assert all(o.response is None for o in outcomes)
    assert scheduler.dead is not None and "refused every request with 429" in scheduler.dead
    assert sent <= 40, sent


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_a_redirect_to_another_origin_is_refused_before_the_prompt_goes_there(transport: str,
                                                                              hostile: Hostile) -> None:
    """A 307 to another origin: the SDKs' client followed it with the prompt (and took the
    other server's answer as this endpoint's); our HTTP/1.1 client took the 307's body as
    an answer. Now each is a fatal error naming the redirect, and the other origin
    receives nothing."""
    provider, url = _transport(transport, hostile, "redirect-cross-origin")
    before = hostile.server.requests["other-origin"]
    _, outcomes = run_jobs(provider, url, n=2)
    assert hostile.server.requests["other-origin"] == before
    for o in outcomes:
        assert o.response is None and o.error is not None and o.error.kind == "fatal", o.error
        assert "redirect" in o.error.message and f":{hostile.server.other_port}" in o.error.message, o.error.message


CLI_MODELS = {
    "openai-compat (http1)": ("openai-compat:m", "/v1"),
    "openai SDK (httpx2)": ("openai:gpt-4o-mini", "/v1"),
    "anthropic SDK (httpx2)": ("anthropic:claude-haiku-4-5", ""),
}


@pytest.mark.parametrize("transport", list(CLI_MODELS))
def test_deeply_nested_json_fails_its_samples_with_the_reason_not_the_run(transport: str, hostile: Hostile,
                                                                        tmp_path: Path) -> None:
    """A 200 whose gzip body (2 KB on the wire) nests 200,000 arrays beside valid choices
    ended a real run with exit 1 and a RecursionError traceback, on every transport. The
    run now ends as a partial one (exit 3) whose samples failed with the reason."""
    model, suffix = CLI_MODELS[transport]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i}", "prompt": f"q{i}", "answers": ["a"]}) + "\n" for i in range(2)))
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", model,
         "--base-url", f"http://127.0.0.1:{hostile.port}/deep-json{suffix}", "--timeout", "10",
         "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "out"), "--no-progress"],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr, done.stderr[-2000:]
    failures = json.loads((tmp_path / "out" / "run.json").read_text())["failures"]
    assert len(failures) == 2 and all("nested deeper than any answer" in f["error"] for f in failures), failures
