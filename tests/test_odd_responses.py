"""Responses of the wrong shape are transient errors — retried, counted, never a crash —
and nothing malformed reaches the store (issue 18). A real server on 127.0.0.1 answers
each prompt's first request in an odd shape and its retry properly."""

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

REPO = Path(__file__).resolve().parents[1]

ODD: dict[str, Any] = {
    "tgi details a list": {"generated_text": "x", "details": ["finish_reason", "length"]},
    "tgi generated_tokens many": {"generated_text": "x", "details": {"generated_tokens": "many"}},
    "tgi text a number": {"generated_text": 5, "details": {"generated_tokens": 1}},
    "chat content a list": {"choices": [{"message": {"content": ["a", "b"]}, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1}},
    "chat usage negative": {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": -4, "completion_tokens": 1}},
    "chat no choices": {"usage": {}},
    "json a list": [1, 2, 3],
}


class OddServer(LocalServer):
    def __init__(self, odd: Any, header_tokens: str | None = None) -> None:
        super().__init__()
        self.odd, self.header_tokens = odd, header_tokens
        self.seen: dict[str, int] = {}

    async def handle(self, request: web.Request) -> web.Response:
        if request.path.endswith("/info"):
            return web.json_response({"model_id": "m", "max_input_tokens": 4000, "max_total_tokens": 4096})
        body = await request.json()
        key = json.dumps(body, sort_keys=True)
        self.seen[key] = self.seen.get(key, 0) + 1
        first = self.seen[key] == 1
        headers = {"x-prompt-tokens": self.header_tokens} if first and self.header_tokens else {}
        if first and self.header_tokens is None:
            return web.json_response(self.odd)
        if request.path.endswith(("/generate", "/generate_stream")):  # streamed or not: answered whole
            return web.json_response({"generated_text": "ok", "details": {"finish_reason": "length",
                                                                          "generated_tokens": 1}}, headers=headers)
        return web.json_response({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 3, "completion_tokens": 1}}, headers=headers)


def _run(model: str, url: str, tmp: Path) -> dict[str, Any]:
    data = tmp / "d.jsonl"
    data.write_text("".join(json.dumps({"id": str(i), "prompt": f"q{i}", "answers": ["ok"]}) + "\n" for i in range(4)))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", model,
                           "--base-url", url, "--cache", str(tmp / "c.duckdb"), "--out", str(tmp / "out"),
                           "--no-progress"], env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stderr[-2000:]
    summary: dict[str, Any] = json.loads((tmp / "out" / "run.json").read_text())
    return summary


# an answer whose token counts are odd is an answer: a count that is no count is booked at
# our bound and flagged (claims.py), absent details are counted from the text as TGI's
# answers without details are; not retried. Every other odd shape is no answer, retried.
FLAGGED = {"tgi details a list": 0, "tgi generated_tokens many": 4, "chat usage negative": 4}


@pytest.mark.parametrize("name", [n for n in ODD if n not in FLAGGED])
def test_an_odd_response_is_retried_not_a_crash(name: str, tmp_path: Path) -> None:
    model, path = ("tgi:m", "") if name.startswith("tgi") else ("openai-compat:m", "/v1")
    with OddServer(ODD[name]) as server:
        summary = _run(model, f"http://127.0.0.1:{server.port}{path}", tmp_path)
    this = summary["this_invocation"]
    assert summary["samples"]["answered"] == 4 and this["transient_errors"] == 4 and this["retries"] == 4


@pytest.mark.parametrize("name", list(FLAGGED))
def test_odd_token_counts_are_booked_at_the_bound_and_flagged(name: str, tmp_path: Path) -> None:
    model, path = ("tgi:m", "") if name.startswith("tgi") else ("openai-compat:m", "/v1")
    with OddServer(ODD[name]) as server:
        summary = _run(model, f"http://127.0.0.1:{server.port}{path}", tmp_path)
    assert summary["samples"]["answered"] == 4 and summary["this_invocation"]["retries"] == 0
    assert summary["usage_flags"]["answers"] == FLAGGED[name]


def test_a_non_numeric_token_header_is_booked_at_the_bound_and_flagged(tmp_path: Path) -> None:
    with OddServer(None, header_tokens="abc") as server:
        summary = _run("tgi:m", f"http://127.0.0.1:{server.port}", tmp_path)
    assert summary["samples"]["answered"] == 4 and summary["usage_flags"]["answers"] == 4
