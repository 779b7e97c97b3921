"""Issue 25: 100-LongBench asks models as its release does (utils/model_utils.py,
pred.py): GPT with its system message at temperature 0.9 / top_p 0.9, open models the raw
prompt with no template and no cut. A prompt an open model cannot take is refused by the
server and is a failed, visible sample with a hint: the run is partial, never cut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from capture import CaptureProxy
from pred_py import LLAMA2_TOKENIZER

from asyncbench.benchmarks.longbench100.release import load_release
from asyncbench.config import RunConfig
from asyncbench.ledger import UNCUT_CONTEXT_HINT
from asyncbench.run.flow import run as run_config
from asyncbench.sim.testing import sim_subprocess

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not (DATA / "minilongbench").is_dir() or not LLAMA2_TOKENIZER.is_file(),
                                reason="../shared/data not available")
TASK = "kv_retrieval"  # scored without a judge


def run(tmp_path: Path, model: str, base_url: str, lengths: list[str]) -> dict[str, Any]:
    cfg = RunConfig.build(f"100-longbench:{TASK}", model,
                          {"base_urls": [base_url], "data_dir": str(DATA), "cache": str(tmp_path / "cache.duckdb"),
                           "out": str(tmp_path / "out"), "progress": False, "max_attempts": 1},
                          {"lengths": lengths, "rows": 2})
    summary: dict[str, Any] = anyio.run(run_config, cfg).to_json()
    return summary


def generation_bodies(proxy: CaptureProxy) -> list[tuple[str, dict[str, Any]]]:
    return [(p, b) for p, b in proxy.bodies() if p.endswith(("/generate", "/generate_stream", "/completions"))]


def test_an_api_model_gets_the_release_s_system_message_and_sampling(tmp_path: Path) -> None:
    with sim_subprocess([]) as url, CaptureProxy(url) as proxy:
        summary = run(tmp_path, "openai:gpt-4o-mini", proxy.url + "/v1", ["2k"])
        sent = generation_bodies(proxy)
    assert summary["complete"]
    budget = load_release(DATA).max_new_tokens(TASK)
    assert sent and all(path == "/v1/chat/completions" for path, _ in sent)
    for _, body in sent:
        system, user = body["messages"]
        assert system == {"role": "system", "content": "You are a helpful assistant"}
        assert user["role"] == "user"
        assert body["temperature"] == 0.9 and body["top_p"] == 0.9 and body["max_tokens"] == budget
        assert "stop" not in body
    assert summary["truncation"]["release_requests"]["system"] == "You are a helpful assistant"
    assert summary["truncation"]["n_truncated"] == 0


def test_an_open_model_gets_the_raw_prompt_uncut_and_a_too_long_one_fails_visibly(tmp_path: Path) -> None:
    sim = ["--model-id", "meta-llama/Llama-2-7b-chat-hf", "--max-context-tokens", "4096",
           "--tokenizer-file", str(LLAMA2_TOKENIZER)]
    with sim_subprocess(sim) as url, CaptureProxy(url) as proxy:
        summary = run(tmp_path, "tgi:llama", proxy.url, ["2k", "8k"])
        sent = generation_bodies(proxy)
    template = load_release(DATA).template(TASK)
    head = template.split("{", 1)[0]
    assert sent and all(path == "/generate_stream" for path, _ in sent)  # TGI's native route, streamed (--stream on)
    for _, body in sent:  # the release's prompt as it is: no [INST], no cut, greedy
        assert body["inputs"].startswith(head) and "[INST]" not in body["inputs"]
        assert body["parameters"]["do_sample"] is False and "stop" not in body["parameters"]
    assert summary["truncation"]["n_truncated"] == 0
    assert summary["truncation"]["release_requests"]["template"] == "none (raw prompt)"
    # the 8k prompts do not fit a 4,096-token model: refused by the server, failed, hinted
    assert not summary["complete"]
    failed = [f for f in summary["failures"] if "/8k/" in f["sample_id"]]
    assert failed and all(f["status"] == "failed" and "context too long" in f["error"] for f in failed)
    assert {f["sample_id"] for f in summary["failures"]} == {f["sample_id"] for f in failed}  # 2k all answered
    assert summary["samples"]["failed"] == len(failed) >= 2
    # the hint says what helps: --max-input-tokens cuts nothing here (issue 42), so it is not offered
    assert summary["hints"] == [UNCUT_CONTEXT_HINT] and summary["next_step"] == UNCUT_CONTEXT_HINT
    assert all(f["hint"] == UNCUT_CONTEXT_HINT for f in failed) and "--max-input-tokens N" not in UNCUT_CONTEXT_HINT


def test_claude_gets_the_release_s_system_prompt_and_sampling() -> None:
    from asyncbench.benchmarks.longbench100.benchmark import LongBench100
    from asyncbench.providers.anthropic import AnthropicProvider
    from asyncbench.types import Request

    release = LongBench100.RULES.release
    assert release is not None
    args = release.build("the prompt", "anthropic", False)
    request = Request(provider="anthropic", model="claude-3-5-sonnet", endpoint_id="x", max_tokens=64,
                      messages=args.messages, temperature=args.temperature, params=dict(args.params))
    body, _ = AnthropicProvider("claude-3-5-sonnet", None)._params(request)
    assert body["system"] == "You are a helpful assistant. Make sure your output does not contain new lines."
    assert body["messages"] == [{"role": "user", "content": "the prompt"}]
    assert body["temperature"] == 0.9 and body["top_p"] == 0.9 and "stop_sequences" not in body
    # Claude Sonnet 4.5 and the other current models refuse both (sampling_rules.py): temperature alone
    current, _ = AnthropicProvider("claude-sonnet-4-5", None)._params(request)
    assert current["temperature"] == 0.9 and "top_p" not in current and current["system"] == body["system"]
