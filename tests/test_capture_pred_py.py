"""Issues 25 and 42: what reaches a TGI-like and a vLLM-like server for llama2-7b-chat-4k is,
byte for byte, what LongBench's pred.py gives the model (tests/pred_py.py re-implements it
with the shared Llama-2 tokenizer) — every LongBench dataset (MiniLongBench's 237 samples
cover all 21, with Chinese and non-ASCII English prompts), with the cut made by a local
tokenizer.json or by the server's own /tokenize — in ../shared/data's layout (no
model2path.json: the package's copy of the release's names the model), for a vLLM server
started with --served-model-name too; and at a 2,048-token context none is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from capture import CaptureProxy
from pred_py import DATA, LLAMA2_TOKENIZER, SUBSET_2048, llama2_tokenizer, pred_py_prompt, sent_prompt

from asyncbench.benchmarks.base import LoadOptions
from asyncbench.benchmarks.longbench.benchmark import MiniLongBench
from asyncbench.benchmarks.longbench.table import NAMES

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not LLAMA2_TOKENIZER.is_file() or not (DATA / "minilongbench").is_dir(),
                                reason="../shared/data (MiniLongBench, the Llama-2 tokenizer) is not beside the checkout")
LLAMA2_REPO = "meta-llama/Llama-2-7b-chat-hf"


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], env=dict(env, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=600, cwd=cwd)


def expected_by_id() -> dict[str, tuple[str, str]]:
    samples = MiniLongBench(data_dir=DATA).load(LoadOptions(data_dir=DATA))
    return {s.id: (s.task, pred_py_prompt(s.prompt or "", s.task)) for s in samples}


def compare(sent: list[str], expected: dict[str, tuple[str, str]]) -> dict[str, int]:
    """Per dataset, how many of its samples' pred.py prompts were sent exactly."""
    pool = Counter(sent)
    ok: Counter[str] = Counter()
    for task, text in expected.values():
        if pool[text] > 0:
            pool[text] -= 1
            ok[task] += 1
    return dict(ok)


def run_through_proxy(tmp_path: Path, provider: str, sim_args: list[str], extra: list[str],
                      bench: str = "minilongbench") -> tuple[dict[str, Any], list[str], dict[str, Any],
                                                             list[dict[str, Any]], str]:
    """A MiniLongBench run of PROVIDER:llama against the simulator behind a capture proxy,
    with ../shared/data as it is: (run.json, the prompts that reached the server, the
    simulator's /stats, samsum's bodies, the run's stderr)."""
    import httpx

    from asyncbench.sim.testing import sim_subprocess

    with sim_subprocess(sim_args) as url, CaptureProxy(url) as proxy:
        base = proxy.url + ("/v1" if provider == "openai-compat" else "")
        done = run_cli(["run", bench, "--model", f"{provider}:llama", "--base-url", base,
                        "--data-dir", str(DATA), "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"),
                        "--no-progress", *extra], tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        samsum = [body for path, body in proxy.bodies() if "Summarize the dialogue" in (sent_prompt(path, body) or "")
                  and not path.endswith(("/tokenize", "/detokenize"))]
        sent = [p for path, body in proxy.bodies() if (p := sent_prompt(path, body)) is not None
                and not path.endswith(("/tokenize", "/detokenize"))]
        stats = httpx.get(f"{url}/stats").json()
    return json.loads((tmp_path / "o" / "run.json").read_text()), sent, stats, samsum, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("provider", "tokenizer", "served_name"), [
    ("tgi", "file", None), ("tgi", "server", None), ("openai-compat", "file", None),
    ("openai-compat", "server", None), ("openai-compat", "server", "llama")])
def test_requests_reaching_the_server_are_pred_py_s(tmp_path: Path, provider: str, tokenizer: str,
                                                    served_name: str | None) -> None:
    """`served_name`: vLLM started with --served-model-name (its /v1/models id; the
    repository is its root)."""
    assert not (DATA / "longbench" / "model2path.json").exists()  # the layout of ../shared/data and the hub's
    sim = ["--model-id", LLAMA2_REPO, "--max-context-tokens", "4096", "--tokenizer-file", str(LLAMA2_TOKENIZER),
           *(["--served-model-name", served_name] if served_name else [])]
    extra = ["--tokenizer", str(LLAMA2_TOKENIZER)] if tokenizer == "file" else []
    run, sent, stats, samsum, stderr = run_through_proxy(tmp_path, provider, sim, extra)
    assert "pred.py" not in stderr  # the server was recognised: no line saying it was not
    # the strict double (the real tokenizer, 4,096 total tokens, TGI's 422 / vLLM's 400):
    # every sample fits and is answered
    assert run["complete"] and run["samples"]["answered"] == 237 and run["samples"]["failed"] == 0
    assert stats["context_length_errors"] == 0 and stats["requests"] == 237
    official = run["truncation"]["official"]
    assert official["applied"] and official["name"] == "llama2-7b-chat-4k"
    assert LLAMA2_REPO in official["why"]  # found from the server's /info or /v1/models
    assert run["truncation"]["budget"]["max_input_tokens"] == 3500
    expected = expected_by_id()
    ok = compare(sent, expected)
    per_dataset = Counter(task for task, _ in expected.values())
    assert len(sent) == 237
    assert ok == dict(per_dataset), {t: (ok.get(t, 0), n) for t, n in per_dataset.items() if ok.get(t, 0) != n}
    assert set(ok) == set(NAMES)  # all 21 LongBench datasets
    assert run["truncation"]["n_truncated"] > 100
    non_ascii = [text for task, text in expected.values() if task in ("multifieldqa_zh", "dureader") or
                 (task in ("qasper", "narrativeqa") and any(ord(c) > 127 for c in text))]
    assert non_ascii and all(t in sent for t in non_ascii)

    # samsum: vLLM gets pred.py's rule (min 1 new token, then the newline token ends it);
    # TGI no stop at all, the answer cut at the client (run.json says which)
    assert len(samsum) == 15
    if provider == "openai-compat":
        assert all(b["min_tokens"] == 1 and b["stop_token_ids"] == [13] and "stop" not in b for b in samsum)
        assert not run["truncation"]["newline_stop"]["client_cut"]
    else:
        assert all("stop" not in b["parameters"] for b in samsum)
        assert run["truncation"]["newline_stop"]["client_cut"]


def pred_py_cut_at(prompt: str, dataset: str, budgets: range) -> dict[str, int]:
    """pred.py's prompt (tests/pred_py.py) at each of `budgets`: text -> budget."""
    tok = llama2_tokenizer()
    ids = tok.encode(prompt).ids
    out = {}
    for b in budgets:
        half = int(b / 2)
        text = prompt if len(ids) <= b else (tok.decode(ids[:half], skip_special_tokens=True)
                                              + tok.decode(ids[-half:], skip_special_tokens=True))
        out.setdefault(pred_py_prompt(text, dataset, max_length=10**9), b)
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("provider", "hint"), [("tgi", False), ("openai-compat", False), ("tgi", True)])
def test_a_2048_token_server_refuses_none(tmp_path: Path, provider: str, hint: bool) -> None:
    """TGI (max_total_tokens 2048: 422 past it, or past max_input_tokens 2047) and vLLM
    (max_model_len 2048: 400): every sample of the subset fits and is answered. Each prompt
    sent is pred.py's for llama2-7b-chat-4k (its cut, its [INST] format) at the largest
    budget the server takes (a few tokens below context - max_new_tokens), which the run
    says in one line before it sends."""
    sim = ["--model-id", LLAMA2_REPO, "--max-context-tokens", "2048", "--tokenizer-file", str(LLAMA2_TOKENIZER)]
    extra = ["--max-input-tokens", "1536"] if hint else []  # the CONTEXT_HINT followed (left 12 refused before)
    run, sent, stats, _, stderr = run_through_proxy(tmp_path, provider, sim, extra, bench=SUBSET_2048)
    assert stats["context_length_errors"] == 0 and stats["requests"] == 89
    assert run["complete"] and run["samples"]["answered"] == 89 and run["samples"]["failed"] == 0
    trunc = run["truncation"]
    assert trunc["official"]["name"] == "llama2-7b-chat-4k" and trunc["budget"]["max_total_tokens"] == 2048
    assert trunc["fitted"]["n"] >= (12 if hint else 40) and trunc["fitted"]["unfit"] == []
    (line,) = [x for x in stderr.splitlines() if "context (2048 tokens)" in x]
    assert "llama2-7b-chat-4k" in line
    if hint:
        return
    tok = llama2_tokenizer()
    samples = MiniLongBench(data_dir=DATA).load(LoadOptions(data_dir=DATA, tasks=SUBSET_2048.split(":")[1].split(",")))
    pool = Counter(sent)
    for s in samples:
        room = min(2047, 2048 - s.max_tokens)
        options = pred_py_cut_at(s.prompt or "", s.task, range(room, room - 24, -1))
        found = [t for t in options if pool[t] > 0]  # pred.py's text at one of these budgets was sent
        assert found, f"{s.id}: no prompt sent is pred.py's at a budget in {room - 23}..{room}"
        pool[found[0]] -= 1
        assert len(tok.encode(found[0]).ids) <= room
