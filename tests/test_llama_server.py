"""A real llama.cpp `llama-server` in the loop (issue 25 items 6 and 8).

The server (built from source by tests/servers/llama_build.py) serves a tiny random-weight
model that carries the real Llama-2 vocabulary (tests/servers/tiny_gguf.py). Its text
handling is llama.cpp's own, so these tests catch what a double would not: its /tokenize
and /detokenize bodies, its context error, its per-slot context, and whether its tokenizer
gives pred.py's cut. Without the built binary they skip (with the reason).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from capture import CaptureProxy
from pred_py import SUBSET_2048, pred_py_prompt, sent_prompt
from servers.fixtures import llama2_tokenizer_json, llama_server, llama_server_binary, tiny_llama2_gguf
from servers.llama_server import LlamaServer, running

from asyncbench.benchmarks.longbench.table import NAMES
from asyncbench.errors import ProviderError
from asyncbench.providers.base import classify_status
from asyncbench.providers.http import _error_message
from asyncbench.providers.llamacpp_wire import LlamaCppTokenizer
from asyncbench.providers.openai_compat import OpenAICompatProvider
from asyncbench.types import Request

__all__ = ["llama2_tokenizer_json", "llama_server", "llama_server_binary", "tiny_llama2_gguf"]  # fixtures

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
SAMPLES = DATA / "minilongbench" / "samples"
# One xdist worker runs them all: one llama-server (a session fixture) instead of one per worker.
pytestmark = pytest.mark.xdist_group("llama_server")


def hf_tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def minilongbench_prompts() -> list[tuple[str, str]]:
    """(dataset, origin_prompt) of every MiniLongBench sample: all 21 LongBench datasets,
    English, Chinese, and English with non-ASCII characters."""
    if not SAMPLES.is_dir():
        pytest.skip("../shared/data/minilongbench is not beside the checkout")
    out = []
    for path in sorted(SAMPLES.glob("MiniLongBench_*.json")):
        dataset = path.stem.removeprefix("MiniLongBench_")
        for entry in json.loads(path.read_text(encoding="utf-8")).values():
            out.append((dataset, entry["origin_prompt"]))
    return out


def pred_py_cut(tok: Any, prompt: str, max_length: int = 3500) -> str:
    """pred.py's truncation, line for line (THUDM/LongBench LongBench/pred.py `get_pred`)."""
    ids = tok.encode(prompt).ids
    if len(ids) > max_length:
        half = int(max_length / 2)
        prompt = tok.decode(ids[:half], skip_special_tokens=True) + tok.decode(ids[-half:], skip_special_tokens=True)
    return prompt


# -- without a server: llama.cpp's error body, as server-common.cpp writes it -------------

def test_llamacpp_context_error_is_a_fatal_context_error() -> None:
    # tools/server/server-common.cpp format_error_response + server-task.cpp to_json
    body = {"error": {"code": 400, "message": "request (5000 tokens) exceeds the available context size (4096 tokens), "
                      "try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}
    message, code = _error_message(json.dumps(body).encode())
    assert code == "exceed_context_size_error"
    err = classify_status(400, message, code=code)
    assert err.kind == "fatal" and err.message.startswith("context too long")
    # an integer code with no type is still text, not a crash
    assert _error_message(b'{"error": {"code": 503, "message": "Loading model"}}') == ("Loading model", "503")


# -- against the real server ---------------------------------------------------------------

def tokenize_mismatches(server: LlamaServer, texts: list[str], want: list[list[int]]) -> list[int]:
    """Indices of the texts whose llama.cpp /tokenize (`content`, `add_special`) ids differ."""
    out = []
    for i, (text, ids) in enumerate(zip(texts, want)):
        status, body = server.post("/tokenize", {"content": text, "add_special": True})
        assert status == 200
        if body["tokens"] != ids:
            out.append(i)
    return out


def test_tokenize_gives_the_shared_tokenizers_ids(llama_server: LlamaServer, llama2_tokenizer_json: Path) -> None:
    """llama.cpp's /tokenize on the tiny model = the Llama-2 tokenizer's ids on its 26 check
    strings (English, Chinese, accents, code, whitespace runs, LongBench prompts)."""
    folder = llama2_tokenizer_json.parent
    strings = json.loads((folder / "check_strings.json").read_text(encoding="utf-8"))
    expected = json.loads((folder / "check_ids.json").read_text(encoding="utf-8"))
    assert any("\u4e00" <= ch <= "\u9fff" for ch in "".join(strings))
    assert tokenize_mismatches(llama_server, strings, expected) == []
    # vLLM's body (`prompt`) is not llama.cpp's: it answers no tokens at all
    assert llama_server.post("/tokenize", {"prompt": "Hello", "add_special_tokens": True}) == (200, {"tokens": []})


@pytest.mark.slow
def test_tokenize_every_minilongbench_prompt(llama_server: LlamaServer, llama2_tokenizer_json: Path) -> None:
    """... and on all 237 MiniLongBench prompts (21 datasets)."""
    tok = hf_tokenizer(llama2_tokenizer_json)
    prompts = [p for _, p in minilongbench_prompts()]
    wrong = tokenize_mismatches(llama_server, prompts, [tok.encode(p).ids for p in prompts])
    assert wrong == [], f"{len(wrong)} of {len(prompts)} prompts tokenize differently"


def test_detokenize_takes_tokens_and_keeps_what_pred_py_drops(llama_server: LlamaServer) -> None:
    """/detokenize reads `tokens` and answers `content`, rendering `<s>` and keeping the
    first piece's space: why LlamaCppTokenizer.decode joins raw pieces itself."""
    status, body = llama_server.post("/detokenize", {"tokens": [1, 15043, 3186]})
    assert status == 200 and body == {"content": "<s> Hello world"}


@pytest.mark.slow
def test_server_tokenizer_cuts_as_pred_py(llama_server: LlamaServer, llama2_tokenizer_json: Path) -> None:
    """The provider recognises llama.cpp (/v1/models `owned_by: llamacpp`), reads its slot's
    context, and its tokenizer cuts every MiniLongBench prompt exactly as pred.py does with
    the Hugging Face tokenizer (Chinese cuts inside a character included)."""
    provider = OpenAICompatProvider("llama2-7b-chat-4k", None)

    async def probe() -> tuple[Any, tuple[int | None, int | None, str]]:
        try:
            urls = [f"{llama_server.url}/v1"]
            return await provider.server_tokenizer(urls), await provider.context_limits(urls)
        finally:
            await provider.aclose()

    server_tok, limits = asyncio.run(probe())
    assert isinstance(server_tok, LlamaCppTokenizer)
    assert limits == (None, 4096, "/v1/models meta.n_ctx (1 endpoint)")
    assert server_tok.special == {0, 1, 2} and server_tok.byte_base == 3 and server_tok.strip_space
    tok = hf_tokenizer(llama2_tokenizer_json)
    prompts = minilongbench_prompts()
    wrong, cut = [], 0
    for dataset, prompt in prompts:
        text, removed = server_tok.cut_middle(prompt, 3500)
        cut += removed > 0
        if text != pred_py_cut(tok, prompt):
            wrong.append(dataset)
    assert cut > 100 and wrong == []
    assert server_tok.token_id("\n") == tok.encode("\n", add_special_tokens=False).ids[-1]


def test_decode_follows_byte_fallback_on_broken_characters(llama_server: LlamaServer,
                                                            llama2_tokenizer_json: Path) -> None:
    """A slice that starts or ends inside a character: every byte of the broken run becomes
    U+FFFD, as the tokenizers ByteFallback decoder does (llama.cpp's JSON writer differs)."""
    tok = hf_tokenizer(llama2_tokenizer_json)
    server_tok = LlamaCppTokenizer(llama_server.url, {})
    text = "语言模型\n评测 naïve café — “ok”"
    ids = tok.encode(text).ids
    for a in range(len(ids)):
        for b in range(a + 1, len(ids) + 1):
            assert server_tok.decode(ids[a:b]) == tok.decode(ids[a:b], skip_special_tokens=True), (a, b)


def ask(**fields: Any) -> Request:
    return Request(provider="openai-compat", model="llama2-7b-chat-4k", endpoint_id="llama-server", **fields)


def send(server: LlamaServer, request: Request, stream: bool = False) -> Any:
    provider = OpenAICompatProvider(request.model, None, api="completion" if request.messages is None else "chat")
    provider.stream = stream

    async def go() -> Any:
        try:
            return await provider.send(request, f"{server.url}/v1", timeout=120)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_completions_and_chat_completions(llama_server: LlamaServer, llama2_tokenizer_json: Path) -> None:
    tok = hf_tokenizer(llama2_tokenizer_json)
    prompt = "[INST]Summarise: 中文 and naïve text.[/INST]"
    resp = send(llama_server, ask(prompt=prompt, max_tokens=5, temperature=0.0))
    # raw text gets the BOS, as pred.py's tokenizer(prompt) does
    assert resp.usage.prompt_tokens == len(tok.encode(prompt).ids)
    assert resp.usage.completion_tokens <= 5 and resp.finish_reason in ("length", "stop")
    messages = [{"role": "user", "content": " What is 2+2? "}]
    resp = send(llama_server, ask(messages=messages, max_tokens=3, temperature=0.0))
    # the server renders Llama-2-chat's template: <s>[INST] content.strip() [/INST]
    assert resp.usage.prompt_tokens == len(tok.encode("[INST] What is 2+2? [/INST]").ids)


@pytest.mark.parametrize("chat", [False, True])
def test_a_streamed_answer_is_the_unstreamed_one(llama_server: LlamaServer, chat: bool) -> None:
    """llama.cpp's own event stream (stream_options.include_usage; its last chunk carries
    the usage) assembles to the same text, usage and finish reason as the same request
    unstreamed (issue 38), and is timed: a TTFT and a gap per later content chunk."""
    text = "Long contexts: 中文, naïve café, and code `x = 1`. " * 30
    fields: dict[str, Any] = {"messages": [{"role": "user", "content": text}]} if chat else {"prompt": text}
    request = ask(max_tokens=24, temperature=0.0, **fields)
    send(llama_server, request)  # the slot's prompt cache holds it from now on: both below read it
    whole, streamed = send(llama_server, request), send(llama_server, request, stream=True)
    assert whole.usage.cached_prompt_tokens > 0
    assert streamed.text == whole.text and streamed.usage == whole.usage
    assert streamed.finish_reason == whole.finish_reason and streamed.usage.completion_tokens > 1
    assert whole.timing.ttft_ms is None and streamed.timing.ttft_ms is not None
    assert 0 < streamed.timing.ttft_ms <= streamed.latency_ms
    assert 1 <= len(streamed.timing.itl_ms) <= streamed.usage.completion_tokens - 1


def test_context_error_is_fatal_not_malformed(llama_server: LlamaServer) -> None:
    """A prompt past the slot's 4,096 tokens: llama.cpp's 400 exceed_context_size_error is a
    fatal context-length error (never retried as a malformed response)."""
    for (messages, prompt), stream in itertools.product(
            ((None, "hello " * 5000), ([{"role": "user", "content": "hello " * 5000}], None)), (False, True)):
        with pytest.raises(ProviderError) as info:
            send(llama_server, ask(prompt=prompt, messages=messages, max_tokens=5), stream=stream)
        assert info.value.kind == "fatal" and info.value.status == 400
        assert "context too long" in info.value.message and "exceed_context_size_error" not in info.value.message


@pytest.mark.slow
def test_minilongbench_run_completes(llama_server: LlamaServer, tmp_path: Path) -> None:
    """`openai-compat:llama2-7b-chat-4k` against llama-server, one sample of each of the 21
    LongBench datasets: all complete (was 36/36 failed: nothing cut, errors retried)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [sys.executable, "-m", "asyncbench.cli", "run", "minilongbench", "--model", "openai-compat:llama2-7b-chat-4k",
         "--base-url", f"{llama_server.url}/v1", "--data-dir", str(DATA), "--limit", "1", "--concurrency", "1",
         "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"), "--no-progress"],
        env=dict(env, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert run["truncation"]["tokenizer"] == "llama.cpp /tokenize"
    assert run["complete"] and run["samples"]["failed"] == 0 and run["samples"]["total"] == 21, run["samples"]


@pytest.mark.slow
def test_prompts_reaching_llama_server_are_pred_py_s(llama_server: LlamaServer, tmp_path: Path) -> None:
    """Issue 25's capture test against the real llama.cpp server: a MiniLongBench run (all
    237 samples, the 21 LongBench datasets, Chinese and non-ASCII English among them) of a
    model named only `llama`, behind a recording proxy, with ../shared/data as it is (no
    model2path.json there: the package's copy of the release's, issue 42). The server is
    identified from its /v1/models id (model2path.json: llama2-7b-chat-4k), the cut is made
    with llama.cpp's own /tokenize, and every prompt that reaches llama-server is byte for
    byte what pred.py (tests/pred_py.py, the Hugging Face tokenizer) gives the model; none
    is refused. Prompts are counted once each: a transient failure (a slow CPU server under
    load) is sent again with the same body, and a complete run may make more requests."""
    assert not (DATA / "longbench" / "model2path.json").exists()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    with CaptureProxy(llama_server.url) as proxy:
        done = subprocess.run(
            [sys.executable, "-m", "asyncbench.cli", "run", "minilongbench", "--model", "openai-compat:llama",
             "--base-url", f"{proxy.url}/v1", "--data-dir", str(DATA),
             "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"), "--no-progress"],
            env=dict(env, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=900, cwd=tmp_path)
        bodies = proxy.bodies()
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert run["complete"] and run["samples"]["answered"] == 237 and run["samples"]["failed"] == 0
    trunc = run["truncation"]
    assert trunc["official"]["applied"] and trunc["official"]["name"] == "llama2-7b-chat-4k"
    assert trunc["tokenizer"] == "llama.cpp /tokenize" and trunc["n_truncated"] > 100
    generations = [(path, body) for path, body in bodies if path.endswith("/completions")]
    sent = list(dict.fromkeys(p for path, body in generations if (p := sent_prompt(path, body)) is not None))
    assert all(path == "/v1/completions" for path, _ in generations)  # raw text, no template
    expected = [(dataset, pred_py_prompt(prompt, dataset)) for dataset, prompt in minilongbench_prompts()]
    assert len({text for _, text in expected}) == 237 and len(sent) == 237  # 237 distinct prompts, each sent
    pool = list(sent)
    exact: dict[str, int] = {}
    for dataset, text in expected:
        if text in pool:
            pool.remove(text)
            exact[dataset] = exact.get(dataset, 0) + 1
    per_dataset = {d: sum(1 for x, _ in expected if x == d) for d in NAMES}
    assert exact == per_dataset, {d: (exact.get(d, 0), n) for d, n in per_dataset.items() if exact.get(d, 0) != n}
    assert any(any("\u4e00" <= c <= "\u9fff" for c in t) for t in sent)  # Chinese prompts among them
    # samsum: llama.cpp takes no vLLM min_tokens, so no stop is sent and the client cuts
    samsum = [body for _, body in generations if "Summarize the dialogue" in body["prompt"]]
    assert samsum and all("stop" not in b and "min_tokens" not in b for b in samsum)
    assert trunc["newline_stop"]["client_cut"]


@pytest.mark.slow
def test_a_2048_token_llama_server_refuses_none(llama_server_binary: Path, tiny_llama2_gguf: Path,
                                                llama2_tokenizer_json: Path, tmp_path: Path) -> None:
    """Issue 42 against the real server: llama-server with a 2,048-token slot, the subset a
    2,048-token TGI/vLLM refused 42 of 89 of. pred.py's prompts are cut further to fit it
    (its context from /v1/models meta.n_ctx, the count from its own /tokenize), and every
    sample is answered, each prompt and its answer within the slot."""
    tok = hf_tokenizer(llama2_tokenizer_json)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    with running(llama_server_binary, tiny_llama2_gguf, tmp_path / "server.log", ctx=2048,
                 alias="meta-llama/Llama-2-7b-chat-hf") as server, CaptureProxy(server.url) as proxy:
        done = subprocess.run(
            [sys.executable, "-m", "asyncbench.cli", "run", SUBSET_2048, "--model", "openai-compat:llama",
             "--base-url", f"{proxy.url}/v1", "--data-dir", str(DATA), "--cache", str(tmp_path / "c.duckdb"),
             "--out", str(tmp_path / "o"), "--no-progress"],
            env=dict(env, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=900, cwd=tmp_path)
        bodies = [body for path, body in proxy.bodies() if path.endswith("/completions")]
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert run["complete"] and run["samples"]["answered"] == 89 and run["samples"]["failed"] == 0
    trunc = run["truncation"]
    assert trunc["budget"]["max_total_tokens"] == 2048 and trunc["official"]["name"] == "llama2-7b-chat-4k"
    assert trunc["fitted"]["n"] > 40 and trunc["fitted"]["unfit"] == []
    assert "context (2048 tokens)" in done.stderr
    assert len({b["prompt"] for b in bodies}) == 89
    assert all(len(tok.encode(b["prompt"]).ids) + b["max_tokens"] <= 2048 for b in bodies)
