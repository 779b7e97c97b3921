"""Keys go only where they belong and never reach a file or an output (issue 18).

A real HTTP server on 127.0.0.1 logs every header it receives and, in echo mode, repeats
the Authorization header in its error bodies and in its answers — what a hostile or
careless server would do.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb
import pytest
from aiohttp import web
from local_server import LocalServer

REPO = Path(__file__).resolve().parents[1]
OPENAI_KEY = "sk-openai-test-secret-0123456789"
ANTHROPIC_KEY = "sk-ant-test-secret-0123456789"
SELF_HOSTED_KEY = "selfhosted-secret-987654321"
URL_PASSWORD = "url-password-secret-5555"


class Server(LocalServer):
    """OpenAI chat/completions, TGI /generate and /info, logging headers."""

    def __init__(self, echo: bool, transforms: bool = False) -> None:
        super().__init__()
        self.echo = echo
        self.transforms = transforms  # echo the key changed: cased, base64, URL-encoded
        self.headers: list[dict[str, str]] = []
        self.calls = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.headers.append(dict(request.headers))
        self.calls += 1
        auth = request.headers.get("Authorization", "")
        if request.path.endswith("/info"):
            return web.json_response({"model_id": "m", "max_input_tokens": 4000, "max_total_tokens": 4096})
        raw = await request.text()
        if self.echo and ("question 0" in raw or "prompt 0" in raw):  # always an error that repeats the key
            return web.json_response({"error": {"message": f"upstream rejected credentials {auth!r}"}}, status=503)
        text = f"answer; you sent {auth}" if self.echo else "answer"
        if self.transforms:
            text = "answer; you sent " + " ".join(transforms_of(auth.removeprefix("Bearer ")))
        if request.path.endswith(("/generate", "/generate_stream")):  # streamed or not: answered whole
            return web.json_response({"generated_text": text, "details": {"finish_reason": "length",
                                                                            "generated_tokens": 2}})
        body = json.loads(raw)
        if request.path.endswith("/messages"):  # Anthropic
            return web.json_response({"id": "x", "type": "message", "role": "assistant", "model": body["model"],
                                      "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                                      "usage": {"input_tokens": 5, "output_tokens": 2}})
        usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
        if request.path.endswith("/chat/completions"):
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}
        else:
            choice = {"index": 0, "text": text, "finish_reason": "stop"}
        return web.json_response({"id": "x", "object": "chat.completion", "model": body.get("model", "m"),
                                  "choices": [choice], "usage": usage})


def transforms_of(key: str) -> list[str]:
    """The key as a careless server might repeat it: cased, base64-encoded alone and
    inside longer encoded texts at each byte alignment (a Basic header), URL-encoded."""
    out = [key.upper(), key.lower(), key.swapcase(), quote(key, safe=""), quote(key, safe="").lower()]
    for prefix in ("", "u", "us", "user:"):
        raw = f"{prefix}{key}:x".encode()
        out += [base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode().rstrip("=")]
    return out


@pytest.mark.parametrize("key", [SELF_HOSTED_KEY, "Ab+/x=?&%zZ~09", "naïve-clé-secrète"])
def test_redaction_covers_simple_transforms_of_a_key(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from asyncbench.secrets import MASK, redact

    monkeypatch.setenv("ASYNCBENCH_API_KEY", key)
    for variant in transforms_of(key):
        masked = redact(f"echo: [{variant}] end")
        assert MASK in masked and variant not in masked, (variant, masked)
        assert masked.startswith("echo: [") and masked.endswith("] end")
    assert redact("nothing secret here, AbCdEfGh") == "nothing secret here, AbCdEfGh"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "d.jsonl"
    rows = [{"id": f"c{i}", "messages": [{"role": "user", "content": f"chat question {i}"}], "answers": ["a"]}
            for i in range(3)]
    rows += [{"id": f"r{i}", "prompt": f"raw prompt {i}", "answers": ["a"]} for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(argv: list[str], tmp: Path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(PYTHONPATH=str(REPO), OPENAI_API_KEY=OPENAI_KEY, ANTHROPIC_API_KEY=ANTHROPIC_KEY, **env_extra)
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *argv, "--cache", str(tmp / "c.duckdb"),
                           "--out", str(tmp / "out"), "--no-progress", "--max-attempts", "3"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp)


def sent_keys(server: Server) -> set[str]:
    return {h.get("Authorization", "") for h in server.headers}


@pytest.mark.parametrize("model,path", [("openai-compat:m", "/v1"), ("tgi:m", ""), ("openai:gpt-4o-mini", "/v1"),
                                        ("anthropic:claude-haiku-4-5", "")])
def test_provider_keys_never_reach_another_server(model: str, path: str, data: Path, tmp_path: Path) -> None:
    """OPENAI_API_KEY and ANTHROPIC_API_KEY are set; the server at --base-url is not theirs."""
    if model.startswith("anthropic"):
        pytest.importorskip("anthropic")
    with Server(echo=False) as server:
        done = run(["run", f"jsonl:{data}", "--model", model, "--base-url", f"http://127.0.0.1:{server.port}{path}"],
                   tmp_path)
    seen = json.dumps(server.headers)
    assert server.headers, done.stderr
    assert OPENAI_KEY not in seen and ANTHROPIC_KEY not in seen


def test_self_hosted_servers_get_asyncbench_api_key(data: Path, tmp_path: Path) -> None:
    with Server(echo=False) as server:
        done = run(["run", f"jsonl:{data}", "--model", "tgi:m", "--base-url", f"http://127.0.0.1:{server.port}"],
                   tmp_path, ASYNCBENCH_API_KEY=SELF_HOSTED_KEY)
    assert done.returncode == 0, done.stderr
    assert sent_keys(server) == {f"Bearer {SELF_HOSTED_KEY}"}  # /info and every request


def test_openai_key_goes_to_the_url_the_user_gave_for_it(data: Path, tmp_path: Path) -> None:
    """OPENAI_BASE_URL is the user pairing the key with a server: that one gets it."""
    with Server(echo=False) as server:
        done = run(["run", f"jsonl:{data}", "--model", "openai:gpt-4o-mini"], tmp_path,
                   OPENAI_BASE_URL=f"http://127.0.0.1:{server.port}/v1")
    assert done.returncode == 0, done.stderr
    assert sent_keys(server) == {f"Bearer {OPENAI_KEY}"}


def _stored_text(tmp: Path) -> str:
    """Every value of every table of the cache, plus the raw file bytes, as text."""
    con = duckdb.connect(str(tmp / "c.duckdb"), read_only=True)
    parts = []
    for (table,) in con.execute("select table_name from information_schema.tables").fetchall():
        parts.append(json.dumps(con.execute(f'select * from "{table}"').fetchall(), default=str))
    con.close()
    parts.append((tmp / "c.duckdb").read_bytes().decode("latin-1"))
    return "\n".join(parts)


@pytest.mark.parametrize("model,path", [("openai-compat:m", "/v1"), ("tgi:m", "")])
def test_an_echoed_key_reaches_no_file_and_no_output(model: str, path: str, data: Path, tmp_path: Path) -> None:
    with Server(echo=True) as server:
        done = run(["run", f"jsonl:{data}", "--model", model, "--base-url", f"http://127.0.0.1:{server.port}{path}",
                    "--json"], tmp_path, ASYNCBENCH_API_KEY=SELF_HOSTED_KEY)
    assert f"Bearer {SELF_HOSTED_KEY}" in sent_keys(server)  # the key was sent, and echoed back
    outputs = [done.stdout, done.stderr, _stored_text(tmp_path),
               *(p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file())]
    assert (tmp_path / "out" / "run.json").exists(), done.stderr
    for text in outputs:
        assert SELF_HOSTED_KEY not in text
    summary = json.loads(done.stdout)
    assert {f["sample_id"] for f in summary["failures"]} == {"c0", "r0"}
    assert all("[REDACTED]" in f["error"] for f in summary["failures"])  # the echo was there, masked


def test_a_transformed_echo_of_the_key_reaches_no_file_and_no_output(data: Path, tmp_path: Path) -> None:
    with Server(echo=False, transforms=True) as server:
        done = run(["run", f"jsonl:{data}", "--model", "openai-compat:m", "--base-url",
                    f"http://127.0.0.1:{server.port}/v1", "--json"], tmp_path, ASYNCBENCH_API_KEY=SELF_HOSTED_KEY)
    assert done.returncode == 0, done.stderr
    stored = _stored_text(tmp_path)
    assert "answer; you sent [REDACTED]" in stored  # the echo arrived, and was masked
    for text in [done.stdout, done.stderr, stored,
                 *(p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file())]:
        for variant in transforms_of(SELF_HOSTED_KEY):
            assert variant not in text, variant


def test_url_credentials_authenticate_but_are_never_stored(data: Path, tmp_path: Path) -> None:
    with Server(echo=False) as server:
        url = f"http://evaluator:{URL_PASSWORD}@127.0.0.1:{server.port}/v1"
        done = run(["run", f"jsonl:{data}", "--model", "openai-compat:m", "--base-url", url, "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert all(h.get("Authorization", "").startswith("Basic ") for h in server.headers)
    for text in [done.stdout, done.stderr, _stored_text(tmp_path),
                 *(p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file())]:
        assert URL_PASSWORD not in text and "evaluator:" not in text
