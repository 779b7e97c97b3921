"""What reaches the model is what LongBench's pred.py sends (issue 14): the official cut at
the budget of model2maxlen.json, raw prompts without a chat template for the six few-shot
and code datasets, samsum's newline stop — checked on the wire against a server that
records every request body."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from local_server import LocalServer

from asyncbench.benchmarks.base import LoadOptions
from asyncbench.benchmarks.longbench.benchmark import MiniLongBench
from asyncbench.benchmarks.longbench.table import NO_CHAT_TEMPLATE
from asyncbench.prompt_rules.cut import truncate_middle
from asyncbench.tokenizers import get_tokenizer

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not (DATA / "minilongbench").is_dir(), reason="../shared/data is not beside the checkout")


class Capture(LocalServer):
    """An OpenAI-compatible server that answers "ok" and keeps every request body."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[tuple[str, dict[str, Any]]] = []

    async def handle(self, request: web.Request) -> web.Response:
        if request.method != "POST":  # no /v1/models: a server that says nothing about itself
            return web.json_response({"error": "not found"}, status=404)
        body = await request.json()
        self.bodies.append((request.path, body))
        usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
        if request.path.endswith("/chat/completions"):
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": "ok"},
                                      "finish_reason": "stop"}
        else:
            choice = {"index": 0, "text": "ok", "finish_reason": "stop"}
        return web.json_response({"id": "x", "object": "x", "model": body["model"], "choices": [choice],
                                  "usage": usage})


def test_minilongbench_requests_are_pred_py_s(tmp_path: Path) -> None:
    with Capture() as server:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        done = subprocess.run(
            [sys.executable, "-m", "asyncbench.cli", "run", "minilongbench", "--model", "openai-compat:llama2-7b-chat-4k",
             "--base-url", f"http://127.0.0.1:{server.port}/v1", "--tokenizer", "cl100k_base", "--data-dir", str(DATA),
             "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"), "--no-progress"],
            env=dict(env, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert run["truncation"]["budget"] == {"max_input_tokens": 3500, "max_total_tokens": None,
                                           "source": "model2maxlen.json (llama2-7b-chat-4k)"}
    assert run["truncation"]["tokenizer"] == "cl100k_base" and not run["truncation"]["tokenizer_stand_in"]
    assert run["truncation"]["official"]["why"] == "the model is named llama2-7b-chat-4k"
    # a server that is not vLLM: samsum is sent without a stop, its answers cut at the client
    assert run["truncation"]["newline_stop"]["client_cut"] and run["truncation"]["newline_stop"]["params"] == {}

    tok = get_tokenizer("cl100k_base")
    samples = MiniLongBench(data_dir=DATA).load(LoadOptions(data_dir=DATA))
    expected = []
    for s in samples:  # pred.py: the official cut (no shaving), then build_chat's text, all raw
        text = truncate_middle(s.prompt or "", tok, 3500)[0]
        expected.append(("/v1/completions", text if s.task in NO_CHAT_TEMPLATE else f"[INST]{text}[/INST]", None))
    sent = []
    for path, body in server.bodies:
        if path.endswith("/chat/completions"):
            (message,) = body["messages"]  # one user message, nothing around it
            assert message["role"] == "user"
            sent.append((path, message["content"], body.get("stop")))
        else:
            sent.append((path, body["prompt"], body.get("stop")))
    assert len(sent) == len(samples) == 237
    assert sorted(sent) == sorted(expected)
    assert run["truncation"]["no_template_sent_as_chat"] == []


@pytest.mark.slow
def test_tgi_with_4096_total_tokens_completes_every_minilongbench_sample(tmp_path: Path) -> None:
    """TGI rejects inputs + max_new_tokens > max_total_tokens (422): every prompt is cut
    with the server's own tokenizer (/tokenize) to leave room for its answer."""
    from asyncbench.sim.testing import sim_subprocess

    with sim_subprocess(["--max-context-tokens", "4096"]) as url:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        done = subprocess.run(
            [sys.executable, "-m", "asyncbench.cli", "run", "minilongbench", "--model", "tgi:m", "--base-url", url,
             "--data-dir", str(DATA), "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"),
             "--no-progress"],
            env=dict(env, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=600, cwd=tmp_path)
        import httpx

        stats = httpx.get(f"{url}/stats").json()
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert run["complete"] and run["samples"]["failed"] == 0 and run["samples"]["answered"] == 237
    assert stats["context_length_errors"] == 0 and stats["requests"] == 237
    trunc = run["truncation"]
    assert trunc["tokenizer"] == "tgi /tokenize" and not trunc["tokenizer_stand_in"]
    assert trunc["budget"] == {"max_input_tokens": 4096 - 500, "max_total_tokens": 4096, "source": "tgi /info (1 endpoint)"}
    assert trunc["n_truncated"] > 100


def test_vllm_like_server_reports_its_context_and_tokenizer(tmp_path: Path) -> None:
    """An OpenAI-compatible server with vLLM's /v1/models `max_model_len` and /tokenize +
    /detokenize: the context and the model's own tokens decide every cut."""
    from asyncbench.sim.testing import sim_subprocess

    with sim_subprocess(["--max-context-tokens", "4096"]) as url:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        done = subprocess.run(
            [sys.executable, "-m", "asyncbench.cli", "run", "minilongbench", "--model", "openai-compat:m",
             "--base-url", url + "/v1", "--data-dir", str(DATA), "--cache", str(tmp_path / "c.duckdb"),
             "--out", str(tmp_path / "o"), "--no-progress"],
            env=dict(env, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=600, cwd=tmp_path)
        import httpx

        stats = httpx.get(f"{url}/stats").json()
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert run["complete"] and stats["context_length_errors"] == 0
    trunc = run["truncation"]
    assert trunc["tokenizer"] == "vllm /tokenize" and not trunc["tokenizer_stand_in"]
    assert trunc["budget"]["max_total_tokens"] == 4096 and trunc["budget"]["source"].startswith("/v1/models")
