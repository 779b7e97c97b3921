"""Each provider against the simulator's real wire formats: one Request in, one Response
(or a classified ProviderError) out."""

from __future__ import annotations

import anyio
import pytest

from asyncbench.errors import ProviderError
from asyncbench.limits import RateLimiter, parse_ratelimit_headers
from asyncbench.providers import parse_model_spec
from asyncbench.providers.anthropic import AnthropicProvider
from asyncbench.providers.base import classify_status
from asyncbench.providers.openai import OpenAIProvider
from asyncbench.providers.openai_compat import OpenAICompatProvider
from asyncbench.providers.tgi import TGIProvider
from asyncbench.types import Request

PROMPT = "Passage 1: The sky is blue.\nPassage 2: Grass is green.\nQuestion: what colour is the sky?\nAnswer:"


def _req(provider: str, *, chat: bool = True, marker: bool = False) -> Request:
    text = ("<<SIM:CONTEXT_TOO_LONG>> " if marker else "") + PROMPT
    return Request(provider=provider, model="sim", endpoint_id="x", max_tokens=16,
                   messages=[{"role": "user", "content": text}] if chat else None, prompt=None if chat else text)


async def _send(provider, req: Request, url: str):
    try:
        return await provider.send(req, url, 10.0)
    finally:
        await provider.aclose()


@pytest.mark.parametrize("chat", [True, False])
def test_openai_sdk_and_plain_http_agree(start_sim, chat):
    sim = start_sim("--rpm", "6000")
    url = sim.base_url + "/v1"
    api = "chat" if chat else "completion"
    a = anyio.run(_send, OpenAIProvider("sim", "k", api=api), _req("openai", chat=chat), url)
    b = anyio.run(_send, OpenAICompatProvider("sim", "k", api=api), _req("openai-compat", chat=chat), url)
    assert a.text == b.text and a.text
    assert a.usage.prompt_tokens == b.usage.prompt_tokens > 0
    assert a.ratelimit["limit_requests"] == 6000 and b.ratelimit["limit_requests"] == 6000
    assert sim.stats()["routes"]["/v1/chat/completions" if chat else "/v1/completions"] == 2


def test_anthropic_messages(start_sim):
    sim = start_sim("--tpm", "1000000")
    r = anyio.run(_send, AnthropicProvider("sim", "k"), _req("anthropic"), sim.base_url)
    assert r.text and r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert r.ratelimit["limit_tokens"] == 1000000


def test_tgi_generate_messages_and_info(start_sim):
    sim = start_sim("--max-context-tokens", "4096")
    provider = TGIProvider("sim", None)

    async def go():
        try:
            info = await provider.info(sim.base_url)
            raw = await provider.send(_req("tgi", chat=False), sim.base_url, 10.0)
            chat = await provider.send(_req("tgi", chat=True), sim.base_url, 10.0)
            return info, raw, chat
        finally:
            await provider.aclose()

    info, raw, chat = anyio.run(go)
    assert info["max_input_tokens"] < 4096
    assert raw.text and raw.usage.completion_tokens > 0
    assert chat.text
    routes = sim.stats()["routes"]
    assert routes["/generate"] == 1 and routes["/v1/chat/completions"] == 1


@pytest.mark.parametrize("cls,url_suffix,provider", [
    (OpenAIProvider, "/v1", "openai"), (OpenAICompatProvider, "/v1", "openai-compat"),
    (AnthropicProvider, "", "anthropic"), (TGIProvider, "", "tgi")])
def test_context_too_long_is_fatal_everywhere(start_sim, cls, url_suffix, provider):
    sim = start_sim()
    p = cls("sim", "k")
    with pytest.raises(ProviderError) as err:
        anyio.run(_send, p, _req(provider, chat=provider != "tgi", marker=True), sim.base_url + url_suffix)
    assert err.value.kind == "fatal" and "context" in err.value.message.lower()


def test_rate_limited_429_carries_retry_after(start_sim):
    sim = start_sim("--rpm", "60", "--burst-s", "1")
    p = OpenAICompatProvider("sim", "k")

    async def go():
        try:
            await p.send(_req("openai-compat"), sim.base_url + "/v1", 10.0)
            with pytest.raises(ProviderError) as err:
                await p.send(_req("openai-compat"), sim.base_url + "/v1", 10.0)
            return err.value
        finally:
            await p.aclose()

    err = anyio.run(go)
    assert err.kind == "rate_limited" and err.status == 429 and 0 < err.retry_after <= 1.5


def test_connection_refused_is_transient():
    with pytest.raises(ProviderError) as err:
        anyio.run(_send, OpenAICompatProvider("m", None), _req("openai-compat"), "http://127.0.0.1:9/v1")
    assert err.value.kind == "transient"


def test_classification_of_statuses():
    assert classify_status(429, "slow down", retry_after=2).kind == "rate_limited"
    assert classify_status(429, "You exceeded your current quota", code="insufficient_quota").kind == "fatal"
    assert classify_status(503, "overloaded").kind == "transient"
    assert classify_status(529, "overloaded").kind == "transient"
    assert classify_status(401, "bad key").kind == "fatal"
    assert classify_status(400, "This model's maximum context length is 8192 tokens").kind == "fatal"
    assert classify_status(400, "prompt is too long").kind == "fatal"


def test_ratelimit_header_parsing():
    info = parse_ratelimit_headers({
        "x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "120ms", "x-ratelimit-limit-tokens": "30000",
        "x-ratelimit-reset-tokens": "6m0.5s", "retry-after-ms": "250", "retry-after": "1"})
    assert info == {"limit_requests": 500, "remaining_requests": 499, "reset_requests": 0.12,
                    "limit_tokens": 30000, "reset_tokens": 360.5, "retry_after": 0.25}
    ant = parse_ratelimit_headers({"anthropic-ratelimit-requests-limit": "50",
                                   "anthropic-ratelimit-tokens-remaining": "10", "retry-after": "3"})
    assert ant == {"limit_requests": 50, "remaining_tokens": 10, "retry_after": 3.0}


def test_limiter_paces_requests_and_learns_from_headers():
    async def go():
        lim = RateLimiter(rpm=600)  # 10/s, burst of ~10
        t0 = anyio.current_time()
        for _ in range(25):
            await lim.acquire(1)
        elapsed = anyio.current_time() - t0
        learned = RateLimiter()
        learned.observe({"limit_requests": 120, "remaining_requests": 0})
        t1 = anyio.current_time()
        await learned.acquire(1)
        return elapsed, anyio.current_time() - t1

    paced, waited = anyio.run(go)
    assert paced >= 1.2  # 25 requests at 10/s with a burst of ~10 need >= 1.5 s (minus slack)
    assert waited >= 0.3  # server said 0 remaining at 2/s: the first request waits ~0.5 s


def test_model_specs():
    assert parse_model_spec("openai:gpt-4o").base_urls == ["https://api.openai.com/v1"]
    spec = parse_model_spec("tgi:llama", ["http://b:8080/", "http://a:8080"])
    assert spec.endpoint_id == "http://a:8080,http://b:8080"
