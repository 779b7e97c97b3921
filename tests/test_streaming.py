"""Streamed answers (issue 38 item 1): for each provider kind, against the simulator
streaming as each real server does, the streamed answer assembles to the unstreamed one
(text, usage, finish reason; the cache key does not see the difference), and it is timed
(TTFT, inter-token gaps). A stream that stalls ends under the call's deadline, one that
never says its usage or breaks is a classified error (the hostile server on 127.0.0.1).
The same against a real llama.cpp server: tests/test_llama_server.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asyncbench.errors import ProviderError
from asyncbench.providers.anthropic import AnthropicProvider
from asyncbench.providers.base import ProviderBase
from asyncbench.providers.bounded import AnswerTooCostly
from asyncbench.providers.openai import OpenAIProvider
from asyncbench.providers.openai_compat import OpenAICompatProvider
from asyncbench.providers.sse import SSEDecoder
from asyncbench.providers.tgi import TGIProvider
from asyncbench.sim.server import SimConfig, run_sim_in_thread
from asyncbench.types import Request, Response
from tests.test_hostile_servers import Hostile  # the same server, on its own loop

REPO = Path(__file__).resolve().parents[1]
PROMPT = "The quick brown fox jumps over the lazy dog. " * 40

# (provider class, model, base URL suffix, chat?) : every provider kind and route that streams
KINDS = {
    "openai-compat chat": (OpenAICompatProvider, "sim", "/v1", True),
    "openai-compat completion": (OpenAICompatProvider, "sim", "/v1", False),
    "openai chat": (OpenAIProvider, "gpt-4o-mini", "/v1", True),
    "openai completion": (OpenAIProvider, "gpt-3.5-turbo-instruct", "/v1", False),
    "anthropic": (AnthropicProvider, "claude-sonnet-4-5", "", True),
    "tgi generate": (TGIProvider, "m", "", False),
    "tgi chat": (TGIProvider, "m", "", True),
}


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    with run_sim_in_thread(SimConfig(per_token_ms=0.5, prefill_ms_per_ktok=2.0)) as handle:
        yield handle


def _request(cls: type[ProviderBase], model: str, chat: bool, prompt: str = PROMPT, max_tokens: int = 48,
             stop: list[str] | None = None) -> Request:
    params = {"stop": stop} if stop else {}
    if chat:
        return Request(cls.name, model, "e", messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
                       params=params)
    return Request(cls.name, model, "e", prompt=prompt, max_tokens=max_tokens, params=params)


def _send(cls: type[ProviderBase], model: str, url: str, request: Request, stream: bool,
          timeout: float = 30.0) -> Response:
    async def go() -> Response:
        provider = cls(model, "sk-test", api="completion" if request.prompt is not None and cls is not TGIProvider
                       else "chat")
        provider.stream = stream
        try:
            return await provider.send(request, url, timeout)
        finally:
            await provider.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_streamed_answer_is_the_unstreamed_one_and_is_timed(sim: Any, kind: str) -> None:
    cls, model, suffix, chat = KINDS[kind]
    url = sim.base_url + suffix
    for stop in (None, ["lazy"]):
        request = _request(cls, model, chat, stop=stop)
        key = request.key()
        whole = _send(cls, model, url, request, stream=False)
        streamed = _send(cls, model, url, request, stream=True)
        assert request.key() == key  # how it was asked is not part of the key
        assert streamed.text == whole.text and streamed.text
        assert streamed.usage == whole.usage and streamed.usage.completion_tokens > 1
        assert streamed.finish_reason == whole.finish_reason
        assert whole.timing is not None and whole.timing.ttft_ms is None and not whole.timing.itl_ms
        timing = streamed.timing
        assert timing is not None and timing.ttft_ms is not None
        assert 0 < timing.ttft_ms <= streamed.latency_ms
        # the simulator sends one event per token: a gap between each token and the last
        assert len(timing.itl_ms) == streamed.usage.completion_tokens - 1
        assert all(g >= 0 for g in timing.itl_ms)
        assert abs(timing.sent_at - time.time()) < 60


def test_time_to_first_token_grows_with_the_prompt() -> None:
    """The simulator's prefill: 200 ms per 1,000 uncached prompt tokens before the first
    token (a lower bound: a sleep never ends early), decode after it."""
    with run_sim_in_thread(SimConfig(prefill_ms_per_ktok=200.0, per_token_ms=1.0)) as handle:
        short = _send(OpenAICompatProvider, "sim", handle.base_url + "/v1",
                      _request(OpenAICompatProvider, "sim", True, prompt="a" * 400), stream=True)
        long = _send(OpenAICompatProvider, "sim", handle.base_url + "/v1",
                     _request(OpenAICompatProvider, "sim", True, prompt="b" * 16_000), stream=True)
    assert short.timing is not None and long.timing is not None
    assert short.timing.ttft_ms is not None and long.timing.ttft_ms is not None
    assert long.usage.prompt_tokens == 4000 and long.timing.ttft_ms >= 800.0
    assert short.timing.ttft_ms < long.timing.ttft_ms


# -- hostile streams -------------------------------------------------------------------

@pytest.fixture(scope="module")
def hostile() -> Iterator[Hostile]:
    server = Hostile()
    yield server
    server.close()


HOSTILE_KINDS = ["openai-compat chat", "openai-compat completion", "openai chat", "anthropic", "tgi generate",
                 "tgi chat"]


def _hostile(hostile: Hostile, behaviour: str, kind: str, timeout: float = 30.0) -> ProviderError:
    cls, model, suffix, chat = KINDS[kind]
    url = f"http://127.0.0.1:{hostile.port}/{behaviour}{suffix}"
    with pytest.raises(ProviderError) as caught:
        _send(cls, model, url, _request(cls, model, chat), stream=True, timeout=timeout)
    return caught.value


@pytest.mark.parametrize("kind", HOSTILE_KINDS)
def test_a_stalled_stream_ends_under_the_deadline(hostile: Hostile, kind: str) -> None:
    started = time.monotonic()
    err = _hostile(hostile, "stream-stall", kind, timeout=1.5)
    took = time.monotonic() - started
    assert err.kind == "transient", err.message
    assert "timed out" in err.message or "within --timeout" in err.message
    assert took < 30  # ended by the deadline (1.5 s), not by the server


@pytest.mark.parametrize("kind", HOSTILE_KINDS)
def test_a_stream_without_usage_is_a_fatal_error_that_says_what_to_do(hostile: Hostile, kind: str) -> None:
    err = _hostile(hostile, "stream-no-usage", kind)
    assert err.kind == "fatal", err.message
    assert "without usage" in err.message and "--stream off" in err.message


@pytest.mark.parametrize("kind", HOSTILE_KINDS)
def test_a_malformed_stream_event_is_a_failed_attempt(hostile: Hostile, kind: str) -> None:
    err = _hostile(hostile, "stream-malformed", kind)
    assert err.kind == "transient", err.message
    assert "malformed stream event" in err.message


# -- the event-stream decoder ----------------------------------------------------------

def test_event_stream_decoding_follows_the_standard() -> None:
    wire = (b": keep-alive\r\nevent: message_delta\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"
            b"data:no-space\n\nid: 7\nretry: 10\ndata: x\r\rdata: open")
    for cut in range(len(wire) + 1):  # every split of the bytes between two reads
        dec = SSEDecoder(1024, "u")
        events = dec.feed(wire[:cut]) + dec.feed(wire[cut:])
        assert events == [("message_delta", b'{"a":\n1}'), ("message", b"no-space"), ("message", b"x")], cut


def test_an_endless_event_is_refused() -> None:
    dec = SSEDecoder(1000, "u")
    dec.feed(b"data: " + b"x" * 500)
    with pytest.raises(AnswerTooCostly):
        dec.feed(b"x" * 600)


def test_more_events_than_tokens_asked_are_refused(sim: Any) -> None:
    from asyncbench.providers.openai_wire import OpenAIStream

    reply = OpenAIStream("u", max_tokens=4, max_bytes=1 << 20, chat=True)
    event = b'data: {"choices": [{"delta": {"content": "a"}, "finish_reason": null}]}\n\n'
    with pytest.raises(AnswerTooCostly):
        reply.feed(event * 10_000)


# -- a whole run: same cache rows and scores streamed or not ------------------------------

def _run(tmp: Path, name: str, stream: str) -> dict[str, Any]:
    data = tmp / "d.jsonl"
    if not data.exists():
        data.write_text("".join(json.dumps({"id": str(i), "prompt": f"{PROMPT} question {i}", "answers": ["fox"]})
                                + "\n" for i in range(6)))
    out = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "sim",
                          "--cache", str(tmp / f"{name}.duckdb"), "--out", str(tmp / name), "--no-progress",
                          "--stream", stream], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr[-3000:]
    summary: dict[str, Any] = json.loads((tmp / name / "run.json").read_text())
    return summary


def _rows(path: Path) -> list[tuple[Any, ...]]:
    """The stored answers (key, text, token counts, finish reason), by key."""
    from asyncbench.store import Store

    with Store(path) as store:
        return [(r["key"], r["text"], r["prompt_tokens"], r["completion_tokens"], r["cached_prompt_tokens"],
                 r["finish_reason"]) for r in store.cache.rows()]


def test_a_run_streamed_stores_and_scores_what_it_does_unstreamed(tmp_path: Path) -> None:
    streamed, whole = _run(tmp_path, "on", "on"), _run(tmp_path, "off", "off")
    assert streamed["run_id"] == whole["run_id"]
    assert streamed["scores"] == whole["scores"]
    stored = _rows(tmp_path / "on.duckdb")
    assert len(stored) == 6 and stored == _rows(tmp_path / "off.duckdb")
    assert streamed["tokens"] == whole["tokens"]


@pytest.mark.parametrize("kind", ["openai chat", "anthropic"])
def test_an_sdk_stream_may_take_what_its_tokens_need_and_no_more(sim: Any, kind: str) -> None:
    """A stream repeats its envelope per token, so its bytes grow with the tokens asked:
    the SDKs' transport caps a streamed answer at stream_caps(max_tokens) (as our HTTP/1.1
    client does), not at the whole-body cap, which still holds for an unstreamed answer.
    The cap travels as a header that the transport takes off before the request leaves."""
    cls, model, suffix, chat = KINDS[kind]
    request = _request(cls, model, chat, max_tokens=200)

    async def go(stream: bool, cap: int) -> Response:
        provider = cls(model, "sk-test", api="chat")
        provider.stream, provider.max_response_bytes = stream, cap
        try:
            return await provider.send(request, sim.base_url + suffix, 30.0)
        finally:
            await provider.aclose()

    whole = asyncio.run(go(False, 1 << 20))
    streamed_bytes = 150 * whole.usage.completion_tokens  # at least this much of envelope per token
    small = streamed_bytes // 4
    assert len(whole.text.encode()) + 400 < small  # the unstreamed body fits the small cap...
    assert asyncio.run(go(False, small)).text == whole.text
    assert asyncio.run(go(True, small)).text == whole.text  # ...and so does the longer stream
    with pytest.raises(ProviderError, match="too large|over|cap|bytes"):
        asyncio.run(go(False, 64))  # the whole-body cap still holds


def test_the_body_cap_header_never_leaves_the_transport() -> None:
    import httpx2

    from asyncbench.providers.sdk_transport import BoundedTransport, stream_headers

    seen: list[httpx2.Headers] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers)
        return httpx2.Response(200, content=b"x" * 5000)

    async def go(headers: dict[str, str]) -> int:
        async with httpx2.AsyncClient(transport=BoundedTransport(httpx2.MockTransport(answer), 1000)) as client:
            return len((await client.get("http://127.0.0.1:9/v1/x", headers=headers)).content)

    assert asyncio.run(go(stream_headers(8000))) == 5000  # its own cap, above the transport's
    with pytest.raises(Exception, match="1,000|1000|large"):
        asyncio.run(go({}))  # the transport's cap
    assert seen and all("x-asyncbench-body-cap" not in h for h in seen)
