"""Issue 25: the self-hosted servers as the simulator plays them (the real Llama-2
tokenizer, TGI's byte offsets and 422s, vLLM's /detokenize and 400s, the Llama-2 chat
template), and pred.py's cut made through each server's endpoints — equal to the cut the
shared Llama-2 tokenizer makes locally, including cuts inside a multi-byte character."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from pred_py import LLAMA2_TOKENIZER, llama2_tokenizer

from asyncbench.prompt_rules import PostProcess
from asyncbench.prompt_rules.official_models import build_chat, identify
from asyncbench.providers.openai_compat import VLLMTokenizer
from asyncbench.providers.tgi import ServerTokenizer
from asyncbench.sim.server import SimConfig, SimHandle, run_sim_in_thread

pytestmark = pytest.mark.skipif(not LLAMA2_TOKENIZER.is_file(), reason="../shared/data/tokenizers/llama-2 is missing")

# English with accents and curly quotes, Chinese, an emoji and rare CJK (byte fallback), code
TEXTS = [
    "Café “naïve” résumé — déjà vu. " * 40 + "The answer is 42.",
    "北京是中国的首都，有着悠久的历史。" * 60 + "问题：首都是哪里？",
    "emoji 😀 and 𠜎𠜱 rare characters " * 50,
    "def f(x):\n    return x  # ünïcode\n" * 40,
]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    config = SimConfig(model_id="meta-llama/Llama-2-7b-chat-hf", max_context_tokens=4096,
                       tokenizer_file=str(LLAMA2_TOKENIZER))
    with run_sim_in_thread(config) as handle:
        yield handle


def local_cut(text: str, max_tokens: int) -> str:
    tok = llama2_tokenizer()
    ids = tok.encode(text).ids
    if len(ids) <= max_tokens:
        return text
    half = int(max_tokens / 2)
    return tok.decode(ids[:half], skip_special_tokens=True) + tok.decode(ids[-half:], skip_special_tokens=True)


def test_tgi_tokenize_gives_byte_offsets_and_an_empty_span_for_the_bos(sim: SimHandle) -> None:
    text = "Café 北京"
    tokens = httpx.post(f"{sim.base_url}/tokenize", json={"inputs": text}).json()
    assert tokens[0] == {"id": 1, "text": "", "start": 0, "stop": 0}
    raw = text.encode()
    assert tokens[-1]["stop"] == len(raw) != len(text)
    assert all(raw[t["start"]:t["stop"]].decode("utf-8", "replace") == t["text"] for t in tokens[1:])


def test_vllm_detokenize_keeps_special_tokens(sim: SimHandle) -> None:
    ids = httpx.post(f"{sim.base_url}/tokenize", json={"model": "m", "prompt": "Hello"}).json()["tokens"]
    assert ids[0] == 1
    assert httpx.post(f"{sim.base_url}/detokenize", json={"model": "m", "tokens": ids}).json()["prompt"] == "<s> Hello"
    bare = httpx.post(f"{sim.base_url}/tokenize", json={"model": "m", "prompt": "Hello",
                                                         "add_special_tokens": False}).json()["tokens"]
    assert bare == ids[1:]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("max_tokens", [101, 160, 333])
def test_server_cuts_equal_pred_py_s(sim: SimHandle, text: str, max_tokens: int) -> None:
    expected = local_cut(text, max_tokens)
    tgi = ServerTokenizer(f"{sim.base_url}/tokenize", {}, strip_space=True)
    vllm = VLLMTokenizer(sim.base_url, "m", {})
    assert tgi.cut_middle(text, max_tokens)[0] == expected
    assert vllm.cut_middle(text, max_tokens)[0] == expected
    assert "<s>" not in vllm.cut_middle(text, max_tokens)[0]


def test_a_cut_inside_a_character_is_replaced_as_decode_does(sim: SimHandle) -> None:
    """Find budgets whose seam falls between the byte pieces of one character: the
    server's cut must still equal decode's (U+FFFD per piece)."""
    text = TEXTS[2]
    tok = llama2_tokenizer()
    ids = tok.encode(text).ids
    split = [m for m in range(40, 400, 2) if "\ufffd" in local_cut(text, m)]
    assert split, "no budget splits a character: the test would prove nothing"
    tgi = ServerTokenizer(f"{sim.base_url}/tokenize", {}, strip_space=True)
    for m in split[:5]:
        assert len(ids) > m
        assert tgi.cut_middle(text, m)[0] == local_cut(text, m)


def test_tgi_refuses_past_max_total_tokens_in_its_words(sim: SimHandle) -> None:
    text = "word " * 3700
    n = len(llama2_tokenizer().encode(text).ids)
    resp = httpx.post(f"{sim.base_url}/generate", json={"inputs": text, "parameters": {"max_new_tokens": 500}})
    assert resp.status_code == 422
    assert resp.json() == {"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. "
                                    f"Given: {n} `inputs` tokens and 500 `max_new_tokens`", "error_type": "validation"}


def test_vllm_refuses_past_max_model_len_in_its_words(sim: SimHandle) -> None:
    text = "word " * 3700
    n = len(llama2_tokenizer().encode(text).ids)
    resp = httpx.post(f"{sim.base_url}/v1/completions", json={"model": "m", "prompt": text, "max_tokens": 500})
    assert resp.status_code == 400
    body = resp.json()
    assert body["object"] == "error" and body["type"] == "BadRequestError" and body["code"] == 400
    assert body["message"] == (f"This model's maximum context length is 4096 tokens. However, you requested {n + 500} "
                               f"tokens ({n} in the messages, 500 in the completion). Please reduce the length of the "
                               "messages or completion.")


def test_chat_routes_count_the_llama2_template(sim: SimHandle) -> None:
    prompt = "  What is the capital of France?  "
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": 4}
    usage = httpx.post(f"{sim.base_url}/v1/chat/completions", json=body).json()["usage"]
    templated = llama2_tokenizer().encode(f"<s>[INST] {prompt.strip()} [/INST]", add_special_tokens=False).ids
    assert usage["prompt_tokens"] == len(templated)
    raw = httpx.post(f"{sim.base_url}/v1/completions", json={"model": "m", "prompt": prompt, "max_tokens": 4}).json()
    assert raw["usage"]["prompt_tokens"] == len(llama2_tokenizer().encode(prompt).ids)


def test_build_chat_is_pred_py_s_for_each_model() -> None:
    p = "Q?"
    assert build_chat(p, "llama2-7b-chat-4k") == "[INST]Q?[/INST]"
    assert build_chat(p, "vicuna-v1.5-7b-16k") == build_chat(p, "longchat-v1.5-7b-32k")
    assert build_chat(p, "vicuna-v1.5-7b-16k").endswith(" USER: Q? ASSISTANT:")
    assert build_chat(p, "xgen-7b-8k").endswith("\n\n ### Human: Q?\n###")
    assert build_chat(p, "internlm-7b-8k") == "<|User|>:Q?<eoh>\n<|Bot|>:"
    assert build_chat(p, "chatglm2-6b") == "[Round 1]\n\n问：Q?\n\n答："
    assert build_chat(p, "chatglm3-6b-32k") == "<|user|>\nQ?<|assistant|>"
    assert build_chat(p, "some-other-model") == p


def test_the_model_is_found_from_what_the_server_serves() -> None:
    tables = ({"llama2-7b-chat-4k": "meta-llama/Llama-2-7b-chat-hf", "vicuna-v1.5-7b-16k": "lmsys/vicuna-7b-v1.5-16k"},
              {"llama2-7b-chat-4k": 3500, "vicuna-v1.5-7b-16k": 15500})
    found = identify(tables, forced=None, served=["meta-llama/Llama-2-7b-chat-hf"], model="llama", where="d")
    assert found is not None and found.name == "llama2-7b-chat-4k" and found.maxlen == 3500
    assert "meta-llama/Llama-2-7b-chat-hf" in found.reason
    # a local path served by vLLM ends in the repository's name
    found = identify(tables, forced=None, served=["/models/vicuna-7b-v1.5-16k"], model="x", where="d")
    assert found is not None and found.name == "vicuna-v1.5-7b-16k"
    assert identify(tables, forced=None, served=["Qwen/Qwen2-7B"], model="qwen", where="d") is None
    forced = identify(tables, forced="vicuna-v1.5-7b-16k", served=["Qwen/Qwen2-7B"], model="q", where="d")
    assert forced is not None and forced.reason == "--official-model"


def test_samsum_client_cut_keeps_pred_py_s_answer() -> None:
    post = PostProcess(newline_cut=True, model="llama2-7b-chat-4k")
    assert post.apply("\nA summary.\nDialogue: more") == "\nA summary.\n"
    assert post.apply("A summary.\nDialogue: more") == "A summary.\n"
    assert post.apply("no newline") == "no newline"
    # xgen's own post-processing follows the cut, as pred.py's post_process follows generation
    assert PostProcess(newline_cut=True, model="xgen-7b-8k").apply(" Assistant: a\nb") == " a"


def test_a_model_longbench_does_not_list_keeps_today_s_requests(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """In ../shared/data's layout (model2maxlen.json, no model2path.json: the package's copy
    of the release's is used): a server serving a model pred.py does not know gets no
    official settings, run.json says why (the server's own id) and the run says so in one
    line before it sends, naming --official-model; a pred.py model is found from /info."""
    from pred_py import DATA

    from asyncbench.config import RunConfig
    from asyncbench.run.flow import run

    assert not (DATA / "longbench" / "model2path.json").exists() and (DATA / "longbench" / "model2maxlen.json").is_file()
    found, said = {}, {}
    for model_id in ("Qwen/Qwen2-7B-Instruct", "meta-llama/Llama-2-7b-chat-hf"):
        config = SimConfig(model_id=model_id, max_context_tokens=4096, tokenizer_file=str(LLAMA2_TOKENIZER))
        with run_sim_in_thread(config) as handle:
            cfg = RunConfig.build("minilongbench:trec", "tgi:served",
                                  {"base_urls": [handle.base_url], "data_dir": str(DATA), "dry_run": True,
                                   "progress": False, "cache": str(tmp_path / "c.duckdb")})
            found[model_id] = anyio.run(run, cfg)["truncation"]
        said[model_id] = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    unknown = found["Qwen/Qwen2-7B-Instruct"]
    assert unknown["official"]["applied"] is False and "Qwen/Qwen2-7B-Instruct" in unknown["official"]["why"]
    assert unknown["budget"]["source"].startswith("tgi /info") and unknown["budget"]["max_input_tokens"] == 4096 - 500
    (line,) = said["Qwen/Qwen2-7B-Instruct"]
    assert "Qwen/Qwen2-7B-Instruct" in line and "--official-model NAME" in line and "llama2-7b-chat-4k" in line
    known = found["meta-llama/Llama-2-7b-chat-hf"]
    assert known["official"]["applied"] is True and known["budget"]["max_input_tokens"] == 3500
    assert known["official"]["model2path"].endswith("asyncbench/data/longbench/model2path.json")
    assert said["meta-llama/Llama-2-7b-chat-hf"] == []


def test_the_shipped_model2path_is_the_release_s(tmp_path: Path) -> None:
    """The package's model2path.json is LongBench's `LongBench/config/model2path.json`
    (THUDM/LongBench c5ea10b): every name of model2maxlen.json maps to a repository, and a
    data directory's own model2path.json replaces it."""
    import json

    from pred_py import DATA

    from asyncbench.prompt_rules.official_models import model2path_file, read_tables, shipped_model2path

    shipped = json.loads(shipped_model2path().read_text(encoding="utf-8"))
    maxlen = json.loads((DATA / "longbench" / "model2maxlen.json").read_text(encoding="utf-8"))
    assert set(shipped) == set(maxlen) and shipped["llama2-7b-chat-4k"] == "meta-llama/Llama-2-7b-chat-hf"
    assert model2path_file(DATA / "longbench") == shipped_model2path()
    own = tmp_path / "longbench"
    own.mkdir()
    (own / "model2maxlen.json").write_text(json.dumps({"mine-4k": 3500}))
    (own / "model2path.json").write_text(json.dumps({"mine-4k": "me/Mine-4k"}))
    assert read_tables(own) == ({"mine-4k": "me/Mine-4k"}, {"mine-4k": 3500})


def test_a_wrong_official_model_is_one_line_exit_2(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from pred_py import DATA

    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", "minilongbench", "--model", "tgi:x",
                           "--base-url", "http://127.0.0.1:9", "--official-model", "llama3", "--data-dir", str(DATA),
                           "--dry-run"], env=dict(os.environ, PYTHONPATH=str(repo)), capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--official-model 'llama3' is not in" in done.stderr and "llama2-7b-chat-4k" in done.stderr


def test_tgi_special_tokens_with_null_spans_are_read_too() -> None:
    """Some TGI builds mark special tokens `special: true` with null start/stop: they
    count as tokens and give no text, as an empty span does."""
    from aiohttp import web
    from local_server import LocalServer

    text = "Hello wörld, this is a test of the cut."

    class NullSpans(LocalServer):
        async def handle(self, request: web.Request) -> web.Response:
            inputs = (await request.json())["inputs"]
            tokens = httpx.post(f"{self.upstream}/tokenize", json={"inputs": inputs}).json()
            tokens[0] = {"id": tokens[0]["id"], "text": "<s>", "start": None, "stop": None, "special": True}
            return web.json_response(tokens)

    config = SimConfig(max_context_tokens=4096, tokenizer_file=str(LLAMA2_TOKENIZER))
    with run_sim_in_thread(config) as handle, NullSpans() as server:
        server.upstream = handle.base_url
        tok = ServerTokenizer(f"http://127.0.0.1:{server.port}/tokenize", {}, strip_space=True)
        for m in (6, 8, 11):
            assert tok.cut_middle(text, m)[0] == local_cut(text, m)


def test_vllm_served_model_name_is_known_by_its_root() -> None:
    """vLLM started with `--served-model-name llama` lists id "llama" and root the model's
    repository (serving_models.py show_available_models): both are what the server serves."""
    from asyncbench.providers.openai_compat import OpenAICompatProvider

    config = SimConfig(model_id="meta-llama/Llama-2-7b-chat-hf", served_model_name="llama", max_context_tokens=4096)
    with run_sim_in_thread(config) as handle:
        card = httpx.get(f"{handle.base_url}/v1/models").json()["data"][0]
        provider = OpenAICompatProvider("llama", None)

        async def ask() -> list[str]:
            try:
                return await provider.served_models([f"{handle.base_url}/v1"])
            finally:
                await provider.aclose()

        served = anyio.run(ask)
    assert card["id"] == "llama" and card["root"] == "meta-llama/Llama-2-7b-chat-hf" and card["max_model_len"] == 4096
    assert served == ["llama", "meta-llama/Llama-2-7b-chat-hf"]
    tables = ({"llama2-7b-chat-4k": "meta-llama/Llama-2-7b-chat-hf"}, {"llama2-7b-chat-4k": 3500})
    found = identify(tables, forced=None, served=served, model="llama", where="d")
    assert found is not None and found.name == "llama2-7b-chat-4k"


def test_pred_py_chat_formats_fit_the_slack_left_for_them() -> None:
    """A cut FIT_SLACK below the server's limit is sent without counting it again: every
    pred.py chat format (and a seam) must add fewer tokens than that."""
    from asyncbench.run.prompting import FIT_SLACK

    tok = llama2_tokenizer()
    for name in ("llama2-7b-chat-4k", "longchat-v1.5-7b-32k", "vicuna-v1.5-7b-16k", "xgen-7b-8k", "internlm-7b-8k",
                 "chatglm2-6b", "chatglm3-6b-32k"):
        body = "Question: what? Answer:"
        added = len(tok.encode(build_chat(body, name)).ids) - len(tok.encode(body).ids)
        assert 0 <= added <= FIT_SLACK - 8, (name, added)


def test_a_prompt_that_cannot_fit_is_said_once_before_sending(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A context whose answer and [INST] format leave no room (515 tokens, gov_report's
    512-token answers): one line names it before anything is sent, run.json lists them."""
    from pred_py import DATA

    from asyncbench.config import RunConfig
    from asyncbench.run.flow import run

    config = SimConfig(model_id="meta-llama/Llama-2-7b-chat-hf", max_context_tokens=515,
                       tokenizer_file=str(LLAMA2_TOKENIZER))
    with run_sim_in_thread(config) as handle:
        cfg = RunConfig.build("minilongbench:gov_report", "tgi:llama",
                              {"base_urls": [handle.base_url], "data_dir": str(DATA), "dry_run": True,
                               "progress": False, "limit": 2, "cache": str(tmp_path / "c.duckdb")})
        trunc = anyio.run(run, cfg)["truncation"]
        sent = handle.stats()["requests"]
    said = [line for line in capsys.readouterr().err.splitlines() if "leave no room" in line]
    assert len(said) == 1 and "515-token context" in said[0] and "gov_report" in said[0]
    assert len(trunc["fitted"]["unfit"]) == 2 and sent == 0
