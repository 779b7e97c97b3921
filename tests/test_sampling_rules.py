"""Anthropic's current models refuse `temperature` and `top_p` together (issue 42): the rule
(asyncbench/sampling_rules.py, with its sources), the simulator refusing it with the real
API's 400, and our provider never sending both to those models."""

from __future__ import annotations

import anyio
import httpx
import pytest

from asyncbench.providers.anthropic import AnthropicProvider
from asyncbench.sampling_rules import ANTHROPIC_BOTH_SAMPLERS, one_sampler_only
from asyncbench.types import Request, Response

HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
ONE = ["claude-opus-4-1", "claude-opus-4-1-20250805", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929",
       "claude-haiku-4-5", "claude-haiku-4-5-20251001", "claude-opus-4-5-20251101", "claude-sonnet-4-6",
       "claude-opus-5", "anthropic/claude-sonnet-4-5"]
BOTH = ["claude-3-5-haiku-20241022", "claude-3-7-sonnet-20250219", "claude-3-opus-20240229",
        "claude-sonnet-4-20250514", "claude-opus-4-20250514", "claude-opus-4-0", "sim", "gpt-4o"]


def test_which_models_take_one_sampler() -> None:
    assert all(one_sampler_only(m) for m in ONE)
    assert not any(one_sampler_only(m) for m in BOTH)


def _body(model: str, **sampling: float) -> dict[str, object]:
    return {"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], **sampling}


def test_the_simulator_refuses_both_as_the_api_does(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim()
    url = sim.base_url + "/v1/messages"
    refused = httpx.post(url, json=_body("claude-sonnet-4-5-20250929", temperature=0.9, top_p=0.9), headers=HEADERS)
    assert refused.status_code == 400
    body = refused.json()
    assert body.pop("request_id").startswith("req_")
    assert body == {"type": "error", "error": {"type": "invalid_request_error", "message": ANTHROPIC_BOTH_SAMPLERS}}
    assert ANTHROPIC_BOTH_SAMPLERS == ("`temperature` and `top_p` cannot both be specified for this model. "
                                       "Please use only one.")
    for model, sampling in (("claude-sonnet-4-5", {"temperature": 0.9}), ("claude-haiku-4-5", {"top_p": 0.9}),
                            ("claude-3-5-haiku-20241022", {"temperature": 0.9, "top_p": 0.9})):
        assert httpx.post(url, json=_body(model, **sampling), headers=HEADERS).status_code == 200, model


def _request(model: str) -> Request:
    return Request(provider="anthropic", model=model, endpoint_id="x", max_tokens=8, temperature=0.9,
                   params={"top_p": 0.9}, messages=[{"role": "user", "content": "Question: what? Answer:"}])


@pytest.mark.parametrize("model", ["claude-haiku-4-5", "claude-opus-4-1", "claude-3-5-haiku-20241022"])
def test_the_provider_sends_temperature_alone_where_both_are_refused(start_sim, model: str) -> None:  # type: ignore[no-untyped-def]
    """100-LongBench's release asks Claude at temperature 0.9 and top_p 0.9: the current
    models get temperature alone (answered, not a 400); older ones both, as the release."""
    provider = AnthropicProvider(model, "k")
    body, _ = provider._params(_request(model))
    assert body["temperature"] == 0.9 and ("top_p" in body) is not one_sampler_only(model)
    sim = start_sim()

    async def send() -> object:
        try:
            return await provider.send(_request(model), sim.base_url, 10.0)
        finally:
            await provider.aclose()

    answer = anyio.run(send)  # a 400 would raise ProviderError
    assert isinstance(answer, Response) and answer.finish_reason == "end_turn"
    assert sim.stats()["bad_requests"] == 0


def test_run_json_records_the_sampling_sent(tmp_path, start_sim, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """100-LongBench's dry run on claude-haiku-4-5 says top_p is not sent (and why); on
    Claude 3.5 Haiku it records the release's 0.9."""
    from pathlib import Path

    from asyncbench.config import RunConfig
    from asyncbench.run.flow import run

    data = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    if not (data / "longbench100").is_dir():
        pytest.skip("../shared/data is not beside the checkout")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    sim = start_sim()  # a dry run sends nothing; the URL keeps it off the real API all the same
    seen = {}
    for model in ("claude-haiku-4-5", "claude-3-5-haiku-20241022"):
        cfg = RunConfig.build("100-longbench:kv_retrieval", f"anthropic:{model}",
                              {"data_dir": str(data), "base_urls": [sim.base_url], "dry_run": True, "progress": False,
                               "cache": str(tmp_path / "c.duckdb")},
                              {"lengths": ["2k"], "rows": 1})
        seen[model] = anyio.run(run, cfg)["truncation"]["release_requests"]
    assert seen["claude-haiku-4-5"]["top_p"] is None and "refuses" in seen["claude-haiku-4-5"]["top_p_not_sent"]
    assert seen["claude-3-5-haiku-20241022"]["top_p"] == 0.9 and seen["claude-haiku-4-5"]["temperature"] == 0.9
