"""The closed choices (api kind, backend, batch fallback, prompt-cache mode) are one typed
value each, checked where a config is made: a misspelt one is one clear error naming the
accepted values, never a silent default. Issue 26 found `api="completions"` accepted by
the Python API while the providers compared with "completion", so it sent chat."""

from __future__ import annotations

from pathlib import Path

import pytest
from capture import CaptureProxy

import asyncbench
from asyncbench.config import RunConfig
from asyncbench.errors import UserError
from tests.test_engine import write_jsonl


def _paths(proxy: CaptureProxy) -> set[str]:
    return {path for path, _ in proxy.bodies() if path.endswith("completions")}


def test_the_python_api_refuses_a_misspelt_api_kind_instead_of_sending_chat(tmp_path: Path, start_sim) -> None:
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 2)
    with CaptureProxy(sim.base_url) as proxy:
        with pytest.raises(UserError) as err:
            asyncbench.evaluate(f"jsonl:{data}", "openai-compat:m", base_urls=[proxy.url + "/v1"],
                                api="completions", cache=tmp_path / "c.duckdb", out=tmp_path / "o")
        assert _paths(proxy) == set()  # nothing sent, chat least of all
    message = str(err.value)
    assert "\n" not in message and "'completions'" in message and "chat, completion" in message


def test_api_completion_reaches_the_completions_endpoint(tmp_path: Path, start_sim) -> None:
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 2)
    with CaptureProxy(sim.base_url) as proxy:
        result = asyncbench.evaluate(f"jsonl:{data}", "openai-compat:m", base_urls=[proxy.url + "/v1"],
                                     api="completion", cache=tmp_path / "c.duckdb", out=tmp_path / "o")
        assert _paths(proxy) == {"/v1/completions"}
    assert result.complete


@pytest.mark.parametrize(("option", "value", "accepted"), [
    ("api", "completions", "chat, completion"),
    ("backend", "Ray", "local, ray"),
    ("batch_fallback", "retry", "batch, live"),
    ("prompt_cache", "on", "auto, off"),
])
def test_every_closed_choice_is_checked_where_the_config_is_made(option: str, value: str, accepted: str) -> None:
    with pytest.raises(UserError) as err:
        RunConfig.build("minilongbench", "sim", {option: value}).validate()
    message = str(err.value)
    assert f"--{option.replace('_', '-')}" in message and repr(value) in message and accepted in message
