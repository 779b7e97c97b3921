"""Token-level middle truncation (LongBench pred.py), the prompt budget (model2maxlen.json,
context - 500, room for the answer) and the shipped model-context table."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

from asyncbench.prompt_rules.budget import (
    CHAT_TEMPLATE_TOKENS,
    OFFICIAL_MARGIN,
    PromptBudget,
    from_context,
    official_maxlen,
)
from asyncbench.prompt_rules.context_table import context_window_for
from asyncbench.prompt_rules.cut import build_request_prompt, truncate_middle
from asyncbench.tokenizers import get_tokenizer
from asyncbench.types import Sample

# The official cut re-encodes to at most a few tokens more than it kept (a seam inside a
# character or across a BPE merge); pred.py sends it as it is, and so do we.
SEAM = 4
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SAMPLES = DATA / "minilongbench" / "samples"
needs_data = pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/data not available")


def _longest(n: int, datasets: tuple[str, ...] | None = None) -> list[str]:
    prompts = []
    for path in sorted(SAMPLES.glob("MiniLongBench_*.json")):
        if datasets and path.stem.removeprefix("MiniLongBench_") not in datasets:
            continue
        prompts += [e["origin_prompt"] for e in json.loads(path.read_text(encoding="utf-8")).values()]
    return sorted(prompts, key=len, reverse=True)[:n]


@pytest.fixture(scope="module")
def cl100k():
    return get_tokenizer("cl100k_base")


@needs_data
@pytest.mark.parametrize("limit", [4000, 16001, 25001])
def test_longest_samples_fit_and_keep_both_ends(cl100k, limit):
    for text in _longest(4):
        ids = cl100k.encode(text)
        out, removed = truncate_middle(text, cl100k, limit)
        half = limit // 2
        assert len(ids) > limit
        assert cl100k.count(out) <= limit + SEAM
        assert removed == len(ids) - 2 * half
        assert out == cl100k.decode(ids[:half]) + cl100k.decode(ids[-half:])
        # the instructions at the start and the question at the end survive
        assert text.startswith(out[:200]) and text.endswith(out[-200:])


@needs_data
def test_chinese_samples_fit(cl100k):
    """Chinese characters span several byte-level tokens, so a cut can split one."""
    for text in _longest(3, ("dureader", "vcsum", "multifieldqa_zh", "lsht")):
        for limit in (1001, 2000, 3333):
            out, removed = truncate_middle(text, cl100k, limit)
            ids = cl100k.encode(text)
            assert out == cl100k.decode(ids[: limit // 2]) + cl100k.decode(ids[-(limit // 2):])  # byte for byte
            assert cl100k.count(out) <= limit + SEAM
            assert removed == len(ids) - 2 * (limit // 2)
            assert out[-20:] == text[-20:]


def test_official_formula_on_short_text(cl100k):
    text = " ".join(f"word{i}" for i in range(200))
    ids = cl100k.encode(text)
    out, removed = truncate_middle(text, cl100k, 11)  # odd: int(11/2) = 5 tokens each side
    assert out == cl100k.decode(ids[:5]) + cl100k.decode(ids[-5:])
    assert removed == len(ids) - 10
    assert out.startswith("word0 word1") and out.endswith("word199")


def test_no_truncation_when_it_fits(cl100k):
    text = "A short prompt.\n\nQuestion: why?\nAnswer:"
    assert truncate_middle(text, cl100k, cl100k.count(text)) == (text, 0)
    with pytest.raises(ValueError):
        truncate_middle(text, cl100k, 1)


@dataclass
class ByteTokenizer:
    """Byte-level tokens with lossy decoding, like any byte-level BPE: a cut inside a
    multi-byte character decodes to U+FFFD (3 bytes), so the result can grow."""

    name: str = "bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    def count(self, text: str) -> int:
        return len(self.encode(text))


def test_split_characters_are_cut_as_the_official_script_cuts_them():
    """No shaving: decode(ids[:5]) + decode(ids[-5:]) even where both halves split a
    character and the result re-encodes longer (pred.py does the same)."""
    tok = ByteTokenizer()
    text = "长" * 100  # 300 bytes
    ids = list(text.encode())
    out, removed = truncate_middle(text, tok, 10)
    assert (out, removed) == (tok.decode(ids[:5]) + tok.decode(ids[-5:]), 290)
    assert tok.count(out) > 10


def test_build_request_prompt(cl100k):
    sample = Sample(id="hotpotqa/0", task="hotpotqa", prompt="Passage. " * 500 + "Question: who?\nAnswer:")
    assert build_request_prompt(sample, tokenizer=cl100k, max_input_tokens=None) == (sample.prompt, 0)
    text, removed = build_request_prompt(sample, tokenizer=cl100k, max_input_tokens=64)
    assert removed == cl100k.count(sample.prompt) - 64
    assert text.endswith("Question: who?\nAnswer:") and cl100k.count(text) <= 64
    with pytest.raises(ValueError, match="no prompt"):
        build_request_prompt(Sample(id="x", task="t", messages=[]), tokenizer=cl100k, max_input_tokens=10)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpt-4o-mini-2024-07-18", (128000, None)),
        ("openai:gpt-4o", (128000, None)),
        ("gpt-4-0613", (8192, None)),
        ("gpt-5", (400000, 272000)),  # a documented input limit below the context
        ("anthropic:claude-3-5-sonnet-20241022", (200000, None)),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", (131072, None)),
        ("meta-llama/Llama-2-7b-chat-hf", (4096, None)),
        ("Qwen/Qwen2.5-7B-Instruct", (32768, None)),
        ("my-private-model", None),
        ("gpt-4o1", None),  # a prefix must end at a separator
    ],
)
def test_context_window_for(name, expected):
    assert context_window_for(name) == expected


def test_model_table_is_well_formed():
    doc = json.loads(resources.files("asyncbench").joinpath("data/model_context.json").read_text(encoding="utf-8"))
    assert doc["checked"] and doc["models"]
    for name, entry in doc["models"].items():
        assert name == name.lower()
        assert isinstance(entry["context_window"], int) and entry["context_window"] > 2 * OFFICIAL_MARGIN
        assert entry["source"].startswith("https://")
        if "max_input_tokens" in entry:
            assert entry["max_input_tokens"] <= entry["context_window"]


@needs_data
def test_official_model2maxlen_is_read_as_data():
    path = DATA / "longbench" / "model2maxlen.json"
    assert official_maxlen(path, "llama2-7b-chat-4k") == 3500
    assert official_maxlen(path, "THUDM/chatglm2-6b") == 31500  # organisation prefix dropped
    assert official_maxlen(path, "vicuna-v1.5-7b-16k") == 15500
    assert official_maxlen(path, "gpt-4o") is None


def test_budget_leaves_room_for_the_answer_and_the_template():
    budget = from_context(4096, "tgi /info", server_input=4095)
    assert budget.input == 4096 - OFFICIAL_MARGIN  # the official margin: context - 500
    assert budget.for_sample(128, templated=False) == 3596
    assert budget.for_sample(512, templated=False) == 4096 - 512  # a long answer needs more room
    assert budget.for_sample(512, templated=True) == 4096 - 512 - CHAT_TEMPLATE_TOKENS
    assert PromptBudget(3500, None, "model2maxlen.json").for_sample(512, templated=True) == 3500
    assert PromptBudget(None, None, "none").for_sample(128, templated=True) is None
