"""Injected faults and context-length errors, as clients observe them."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from asyncbench.errors import UserError
from asyncbench.sim.server import CONTEXT_MARKER, SimConfig, run_sim_in_thread

# One client for the module: a fresh httpx client per call costs tens of ms (SSL setup).
HTTP = httpx.Client(timeout=10)


def teardown_module() -> None:
    HTTP.close()


def _chat(i: int) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": f"Question: item {i}?"}], "max_tokens": 8}


def test_error_rate_gives_5xx_bodies_and_retries_recover():
    with run_sim_in_thread(SimConfig(error_rate=0.5, seed=7)) as sim:
        responses = {i: HTTP.post(sim.base_url + "/v1/chat/completions", json=_chat(i)) for i in range(40)}
        failed = {i: r for i, r in responses.items() if r.status_code != 200}
        assert 8 <= len(failed) <= 32
        assert {r.status_code for r in failed.values()} <= {500, 502, 503}
        assert all(r.json()["error"]["type"] == "server_error" for r in failed.values())
        # A retry of the same prompt draws afresh, so retrying eventually succeeds.
        for _ in range(30):
            if HTTP.post(sim.base_url + "/v1/chat/completions", json=_chat(min(failed))).status_code == 200:
                break
        else:
            pytest.fail("retries of a failed prompt never succeeded")
        stats = sim.stats()
        assert stats["errors_5xx"] + stats["ok"] == stats["requests"]


def test_faults_are_deterministic_given_seed():
    def outcomes(seed: int) -> list[int]:
        with run_sim_in_thread(SimConfig(error_rate=0.3, seed=seed)) as sim:
            return [HTTP.post(sim.base_url + "/v1/chat/completions", json=_chat(i)).status_code for i in range(30)]

    assert outcomes(1) == outcomes(1)
    assert outcomes(1) != outcomes(2)


def test_drop_closes_connection_without_response():
    with run_sim_in_thread(SimConfig(drop_rate=1.0)) as sim:
        async def go():
            client = AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)
            with pytest.raises(openai.APIConnectionError):
                await client.chat.completions.create(**_chat(1))

        asyncio.run(go())
        with pytest.raises(httpx.RemoteProtocolError):
            HTTP.post(sim.base_url + "/v1/chat/completions", json=_chat(2))
        stats = sim.stats()
        assert stats["dropped"] == 2 and stats["ok"] == 0 and stats["requests"] == 2


def test_stall_makes_client_time_out_and_server_still_stops():
    with run_sim_in_thread(SimConfig(stall_rate=1.0, stall_s=60)) as sim:
        async def go():
            client = AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0, timeout=0.3)
            with pytest.raises(openai.APITimeoutError):
                await client.chat.completions.create(**_chat(1))

        asyncio.run(go())
        assert sim.stats()["stalled"] == 1 and sim.stats()["ok"] == 0
    assert not sim._thread.is_alive()


def test_short_stall_then_answers():
    with run_sim_in_thread(SimConfig(stall_rate=1.0, stall_s=0.05)) as sim:
        resp = HTTP.post(sim.base_url + "/v1/chat/completions", json=_chat(1), timeout=5)
        assert resp.status_code == 200
        assert sim.stats()["stalled"] == 1 and sim.stats()["ok"] == 1


def test_malformed_body_fails_to_parse():
    with run_sim_in_thread(SimConfig(malformed_rate=1.0)) as sim:
        async def go():
            client = AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)
            with pytest.raises(Exception) as info:
                await client.chat.completions.create(**_chat(1))
            return info.value

        err = asyncio.run(go())
        assert isinstance(err, (openai.APIResponseValidationError, json.JSONDecodeError, ValueError))
        raw = HTTP.post(sim.base_url + "/v1/chat/completions", json=_chat(2))
        assert raw.status_code == 200 and raw.headers["content-type"].startswith("application/json")
        with pytest.raises(json.JSONDecodeError):
            json.loads(raw.content)
        stats = sim.stats()
        assert stats["malformed"] == 2 and stats["ok"] == 0 and stats["completion_tokens"] == 0


def test_latency_per_token_and_jitter(monkeypatch):
    """The delay handed to asyncio.sleep is base + per-token * output tokens + jitter, less
    the time the simulator already spent on the request (latency counts from arrival)."""
    delays: list[float] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(seconds: float, *args, **kwargs):
        delays.append(seconds)
        return await real_sleep(0)

    monkeypatch.setattr("asyncbench.sim.server.asyncio.sleep", recording_sleep)
    # the sleeps are recorded, not slept: delays of seconds cost nothing, and dwarf the
    # simulator's own time on a request (tens of ms on a machine at load 15)
    with run_sim_in_thread(SimConfig(latency_ms=1500, per_token_ms=200)) as sim:
        resp = HTTP.post(sim.base_url + "/v1/chat/completions", json=_chat(1)).json()
        target = (1500 + 200 * resp["usage"]["completion_tokens"]) / 1000
        assert len(delays) == 1 and target - 0.15 < delays[0] <= target
    delays.clear()
    with run_sim_in_thread(SimConfig(latency_ms=1000, jitter_ms=500, seed=3)) as sim:
        for i in range(20):
            assert HTTP.post(sim.base_url + "/v1/chat/completions", json=_chat(i)).status_code == 200
    timed = [d for d in delays if d]  # aiohttp's own shutdown also calls sleep(0)
    # 1000 +/- 500 ms less the simulator's own time on each request: never above 1.5 s,
    # and spread by the jitter
    assert len(timed) == 20 and all(0.0 <= d <= 1.5 for d in timed) and max(timed) - min(timed) > 0.2


def test_context_length_errors_in_each_api_shape():
    with run_sim_in_thread(SimConfig(max_context_tokens=100)) as sim:
        long_body = {"model": "m", "messages": [{"role": "user", "content": "x" * 360}], "max_tokens": 20}  # 90 + 20
        resp = HTTP.post(sim.base_url + "/v1/chat/completions", json=long_body)
        assert resp.status_code == 400
        error = resp.json()["error"]
        assert error["code"] == "context_length_exceeded" and error["type"] == "invalid_request_error"
        assert error["message"].startswith("This model's maximum context length is 100 tokens")
        fits = HTTP.post(sim.base_url + "/v1/chat/completions", json={**long_body, "max_tokens": 10})
        assert fits.status_code == 200

        async def sdk():
            client = AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)
            with pytest.raises(openai.BadRequestError) as info:
                await client.completions.create(model="m", prompt=f"short {CONTEXT_MARKER}", max_tokens=5)
            return info.value

        assert asyncio.run(sdk()).code == "context_length_exceeded"

        anthropic = HTTP.post(sim.base_url + "/v1/messages", headers={"x-api-key": "k", "anthropic-version": "v"},
                               json={"model": "c", "max_tokens": 20, "messages": long_body["messages"]})
        assert anthropic.status_code == 400
        assert anthropic.json()["error"]["type"] == "invalid_request_error"
        assert anthropic.json()["error"]["message"].startswith("prompt is too long")
        tgi = HTTP.post(sim.base_url + "/generate", json={"inputs": "x" * 360, "parameters": {"max_new_tokens": 20}})
        assert tgi.status_code == 422 and tgi.json()["error_type"] == "validation"
        assert tgi.json()["error"].startswith("Input validation error")
        assert sim.stats()["context_length_errors"] == 4


def test_config_validation():
    with pytest.raises(UserError, match="error_rate"):
        SimConfig(error_rate=1.5)
    with pytest.raises(UserError, match="add up"):
        SimConfig(error_rate=0.6, drop_rate=0.6)
