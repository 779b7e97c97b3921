"""The simulator against the official OpenAI and Anthropic SDKs, and TGI over plain HTTP."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from asyncbench.sim.server import SimConfig, run_sim_in_thread

# One client for the module: a fresh httpx client per call costs tens of ms (SSL setup).
HTTP = httpx.Client(timeout=10)


def teardown_module() -> None:
    HTTP.close()


@pytest.fixture(scope="module")
def sim():
    with run_sim_in_thread(SimConfig(model_id="sim-model")) as handle:
        yield handle


@pytest.fixture(autouse=True)
def _reset(sim):
    HTTP.post(sim.base_url + "/stats/reset").raise_for_status()


def _stats(sim) -> dict:
    return HTTP.get(sim.base_url + "/stats", params={"log": "1"}).json()


def test_openai_chat_roundtrip(sim):
    async def go():
        client = AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)
        prompt = "The river Thames flows through London.\n\nQuestion: Which river flows through London?\nAnswer:"
        return await client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": prompt}], max_tokens=32
        ), prompt

    resp, prompt = asyncio.run(go())
    assert resp.model == "gpt-test"
    assert resp.id.startswith("chatcmpl-")
    assert resp.choices[0].message.content == "The river Thames flows through London."
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage.prompt_tokens == -(-len(prompt) // 4)
    assert resp.usage.completion_tokens == -(-len(resp.choices[0].message.content) // 4)
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    assert resp.usage.prompt_tokens_details.cached_tokens == 0
    stats = _stats(sim)
    assert stats["requests"] == 1 and stats["ok"] == 1
    assert stats["routes"] == {"/v1/chat/completions": 1}
    assert stats["prompt_tokens"] == resp.usage.prompt_tokens


def test_openai_completions_roundtrip_and_length_finish(sim):
    async def go():
        client = AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)
        prompt = "Summarize.\n\n" + "A long sentence about rivers and valleys. " * 50 + "\n\nSummary:"
        return await client.completions.create(model="davinci-test", prompt=prompt, max_tokens=3)

    resp = asyncio.run(go())
    assert resp.choices[0].text == "A long sente"  # truncated to max_tokens * 4 chars
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage.completion_tokens == 3


def test_openai_cached_tokens_on_repeat(sim):
    prompt = "Question: x?\n" + "word " * 1000  # 5,013 chars -> 1,254 tokens

    async def go():
        client = AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)
        first = await client.completions.create(model="m", prompt=prompt, max_tokens=4)
        second = await client.completions.create(model="m", prompt=prompt, max_tokens=4)
        return first, second

    first, second = asyncio.run(go())
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert second.usage.prompt_tokens_details.cached_tokens == 1152  # 128-token aligned
    log = _stats(sim)["log"]
    assert len(log) == 2 and log[0] == log[1]


def test_anthropic_roundtrip(sim):
    async def go():
        client = AsyncAnthropic(base_url=sim.base_url, api_key="sk-ant-test", max_retries=0)
        raw = await client.messages.with_raw_response.create(
            model="claude-test",
            max_tokens=64,
            system="You are a helpful assistant.",
            messages=[{"role": "user", "content": [{"type": "text", "text": 'Answer ("Yes." or "No."):'}]}],
        )
        return await raw.parse()

    msg = asyncio.run(go())
    assert msg.type == "message" and msg.role == "assistant"
    assert msg.content[0].type == "text" and msg.content[0].text in ("Yes.", "No.")
    assert msg.stop_reason == "end_turn"
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens == 1
    assert msg.usage.cache_read_input_tokens == 0
    assert _stats(sim)["routes"] == {"/v1/messages": 1}


def test_anthropic_requires_key_and_version(sim):
    body = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    no_key = HTTP.post(sim.base_url + "/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})
    assert no_key.status_code == 401
    assert no_key.json()["error"]["type"] == "authentication_error"
    no_version = HTTP.post(sim.base_url + "/v1/messages", json=body, headers={"x-api-key": "k"})
    assert no_version.status_code == 400
    answer = no_version.json()
    assert answer.pop("request_id").startswith("req_")
    assert answer == {"type": "error", "error": {"type": "invalid_request_error",
                                                 "message": "anthropic-version: header is required"}}
    no_max = HTTP.post(sim.base_url + "/v1/messages", json={"model": "c", "messages": body["messages"]},
                        headers={"x-api-key": "k", "anthropic-version": "2023-06-01"})
    assert no_max.status_code == 400 and "max_tokens" in no_max.json()["error"]["message"]
    assert _stats(sim)["bad_requests"] == 3


def test_tgi_generate_info_health(sim):
    info = HTTP.get(sim.base_url + "/info").json()
    assert info["model_id"] == "sim-model"
    assert info["max_total_tokens"] == 131072 and info["max_input_tokens"] == 131071
    assert HTTP.get(sim.base_url + "/health").status_code == 200

    prompt = "Please complete the code given below. \nimport os\nx = 1\nprint(x)\nNext line of code:\n"
    resp = HTTP.post(sim.base_url + "/generate", json={
        "inputs": prompt, "parameters": {"max_new_tokens": 20, "temperature": 0.1, "do_sample": False, "details": True}})
    assert resp.status_code == 200
    data = resp.json()
    assert data["generated_text"] in ("import os", "x = 1", "print(x)")
    assert data["details"]["finish_reason"] == "eos_token"
    assert data["details"]["generated_tokens"] == -(-len(data["generated_text"]) // 4)
    assert "".join(t["text"] for t in data["details"]["tokens"]) == data["generated_text"]

    plain = HTTP.post(sim.base_url + "/generate", json={"inputs": prompt, "parameters": {"return_full_text": True}})
    assert plain.json() == {"generated_text": prompt + data["generated_text"]}

    bad = HTTP.post(sim.base_url + "/generate", json={"parameters": {}})
    assert bad.status_code == 422 and bad.json()["error_type"] == "validation"


def test_stop_sequences_and_stream_options_alone_rejected(sim):
    body = {"model": "m", "messages": [{"role": "user", "content": "Intro.\n\nalpha beta gamma"}], "max_tokens": 50,
            "stop": [" gamma"]}
    resp = HTTP.post(sim.base_url + "/v1/chat/completions", json=body).json()
    assert resp["choices"][0]["message"]["content"] == "alpha beta"
    # as OpenAI: stream_options only with stream (the stream itself: tests/test_streaming.py)
    alone = HTTP.post(sim.base_url + "/v1/chat/completions", json={**body, "stream_options": {"include_usage": True}})
    assert alone.status_code == 400 and alone.json()["error"]["type"] == "invalid_request_error"
    assert "only allowed when 'stream' is enabled" in alone.json()["error"]["message"]
    garbage = HTTP.post(sim.base_url + "/v1/chat/completions", content=b"{not json")
    assert garbage.status_code == 400
    assert HTTP.get(sim.base_url + "/nope").status_code == 404
    models = HTTP.get(sim.base_url + "/v1/models").json()
    assert models["data"][0]["id"] == "sim-model"
