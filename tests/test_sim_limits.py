"""Rate limits of the simulator: token-bucket arithmetic and 429s seen by real clients."""

from __future__ import annotations

import asyncio
from datetime import datetime

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from asyncbench.sim.limits import RateLimiter, TokenBucket, format_duration, retry_headers
from asyncbench.sim.server import SimConfig, run_sim_in_thread

# One client for the module: a fresh httpx client per call costs tens of ms (SSL setup).
HTTP = httpx.Client(timeout=10)


def teardown_module() -> None:
    HTTP.close()


def test_format_duration_matches_openai_style():
    assert format_duration(0.02) == "20ms"
    assert format_duration(0.0) == "0ms"
    assert format_duration(1.0) == "1s"
    assert format_duration(1.5) == "1.5s"
    assert format_duration(360.0) == "6m0s"
    assert retry_headers(0.35) == {"retry-after": "0.35", "retry-after-ms": "350"}
    assert retry_headers(0.0) == {"retry-after": "0.001", "retry-after-ms": "1"}


def test_bucket_refills_continuously():
    bucket = TokenBucket(rate=10.0, capacity=5.0)
    bucket.level = 0.0
    bucket.refill(bucket.stamp + 0.2)
    assert bucket.level == pytest.approx(2.0)
    assert bucket.wait_for(3) == pytest.approx(0.1)
    bucket.refill(bucket.stamp + 100)
    assert bucket.level == 5.0  # capped at capacity


def test_limiter_rpm_burst_and_retry_after():
    limiter = RateLimiter(rpm=600, burst_s=1.0)  # 10 per second, bucket of 10
    decisions = [limiter.admit(0) for _ in range(11)]
    assert all(d.admitted for d in decisions[:10])
    refused = decisions[10]
    assert not refused.admitted and refused.reason == "requests"
    assert 0.0 < refused.retry_after <= 0.1 + 1e-6
    assert refused.snapshot["remaining_requests"] == 0


def test_limiter_tpm_counts_max_tokens_and_allows_debt():
    limiter = RateLimiter(tpm=6000, burst_s=1.0)  # 100 tokens per second, bucket of 100
    big = limiter.admit(250)  # bigger than the bucket but below TPM: admitted when full
    assert big.admitted and limiter.tokens.level == pytest.approx(-150, abs=1)
    nxt = limiter.admit(10)
    assert not nxt.admitted and nxt.reason == "tokens" and nxt.retry_after == pytest.approx(1.6, abs=0.05)
    too_large = limiter.admit(6001)
    assert not too_large.admitted and too_large.reason == "too_large" and too_large.retry_after is None


def test_openai_429_with_headers_over_rpm():
    with run_sim_in_thread(SimConfig(rpm=120)) as sim:  # 2 per second, bucket of 2
        async def go():
            client = AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)
            ok = await client.chat.completions.with_raw_response.create(
                model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=5)
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}], max_tokens=5)
            with pytest.raises(openai.RateLimitError) as info:
                await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}], max_tokens=5)
            return ok.headers, info.value

        headers, err = asyncio.run(go())
        assert headers["x-ratelimit-limit-requests"] == "120"
        assert headers["x-ratelimit-remaining-requests"] == "1"
        assert headers["x-ratelimit-reset-requests"].endswith("ms")
        assert err.status_code == 429
        assert err.body["code"] == "rate_limit_exceeded" and err.body["type"] == "requests"
        retry = float(err.response.headers["retry-after"])
        assert 0.0 < retry <= 0.5
        assert int(err.response.headers["retry-after-ms"]) == pytest.approx(retry * 1000, abs=1)
        assert err.response.headers["x-ratelimit-remaining-requests"] == "0"
        stats = sim.stats()
        assert (stats["requests"], stats["ok"], stats["rate_limited"]) == (3, 2, 1)


def test_tpm_enforced_on_prompt_plus_max_tokens():
    with run_sim_in_thread(SimConfig(tpm=6000)) as sim:  # bucket of 100 tokens
        body = {"model": "m", "messages": [{"role": "user", "content": "x" * 200}], "max_tokens": 40}  # 50 + 40
        first = HTTP.post(sim.base_url + "/v1/chat/completions", json=body)
        second = HTTP.post(sim.base_url + "/v1/chat/completions", json=body)
        assert first.status_code == 200
        assert int(first.headers["x-ratelimit-remaining-tokens"]) in (10, 11)  # 100 - 90 + refill
        assert second.status_code == 429
        assert second.json()["error"]["type"] == "tokens"
        # 90 tokens needed, ~10 left, refilling at 100/s: about 0.8 s
        assert 0.0 < float(second.headers["retry-after"]) <= 0.81
        huge = HTTP.post(sim.base_url + "/v1/chat/completions", json={**body, "max_tokens": 7000})
        assert huge.status_code == 429 and "Request too large" in huge.json()["error"]["message"]
        assert "retry-after" not in huge.headers


def test_anthropic_and_tgi_rate_limit_shapes():
    with run_sim_in_thread(SimConfig(rpm=60)) as sim:  # bucket of 1
        headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
        body = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        ok = HTTP.post(sim.base_url + "/v1/messages", json=body, headers=headers)
        assert ok.status_code == 200
        assert ok.headers["anthropic-ratelimit-requests-limit"] == "60"
        assert ok.headers["anthropic-ratelimit-requests-remaining"] == "0"
        datetime.fromisoformat(ok.headers["anthropic-ratelimit-requests-reset"].replace("Z", "+00:00"))
        refused = HTTP.post(sim.base_url + "/v1/messages", json=body, headers=headers)
        assert refused.status_code == 429
        assert refused.json()["type"] == "error" and refused.json()["error"]["type"] == "rate_limit_error"
        assert float(refused.headers["retry-after"]) > 0
        tgi = HTTP.post(sim.base_url + "/generate", json={"inputs": "x"})
        assert tgi.status_code == 429 and tgi.json() == {"error": "Model is overloaded", "error_type": "overloaded"}


def test_reset_refills_limits():
    with run_sim_in_thread(SimConfig(rpm=60)) as sim:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        assert HTTP.post(sim.base_url + "/v1/chat/completions", json=body).status_code == 200
        assert HTTP.post(sim.base_url + "/v1/chat/completions", json=body).status_code == 429
        HTTP.post(sim.base_url + "/stats/reset").raise_for_status()
        assert HTTP.post(sim.base_url + "/v1/chat/completions", json=body).status_code == 200
