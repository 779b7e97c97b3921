"""Token-level middle truncation (LongBench pred.py) and the shipped model-context table."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

from asyncbench.prompts import (
    OUTPUT_RESERVE_TOKENS,
    build_request_prompt,
    max_input_tokens_for,
    truncate_middle,
)
from asyncbench.tokenizers import get_tokenizer
from asyncbench.types import Sample

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
        assert cl100k.count(out) <= limit
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
            assert cl100k.count(out) <= limit
            assert removed >= cl100k.count(text) - limit
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


def test_overflow_from_split_characters_is_shaved():
    tok = ByteTokenizer()
    text = "长" * 100  # 300 bytes
    out, removed = truncate_middle(text, tok, 10)  # official cut: 5 bytes + 5 bytes, both split a character
    assert tok.count(tok.decode(list(text.encode())[:5]) + tok.decode(list(text.encode())[-5:])) > 10
    assert tok.count(out) <= 10
    # one byte less per side until it fits: 3 bytes each, whole characters again
    assert (out, removed) == ("长长", 294)


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
        ("gpt-4o-mini-2024-07-18", 128000 - OUTPUT_RESERVE_TOKENS),
        ("openai:gpt-4o", 128000 - OUTPUT_RESERVE_TOKENS),
        ("gpt-4-0613", 8192 - OUTPUT_RESERVE_TOKENS),
        ("gpt-5", 272000),  # documented input limit below context - reserve
        ("anthropic:claude-3-5-sonnet-20241022", 200000 - OUTPUT_RESERVE_TOKENS),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", 131072 - OUTPUT_RESERVE_TOKENS),
        ("meta-llama/Llama-2-7b-chat-hf", 4096 - OUTPUT_RESERVE_TOKENS),
        ("Qwen/Qwen2.5-7B-Instruct", 32768 - OUTPUT_RESERVE_TOKENS),
        ("my-private-model", None),
        ("gpt-4o1", None),  # a prefix must end at a separator
    ],
)
def test_max_input_tokens_for(name, expected):
    assert max_input_tokens_for(name) == expected


def test_model_table_is_well_formed():
    doc = json.loads(resources.files("asyncbench").joinpath("data/model_context.json").read_text(encoding="utf-8"))
    assert doc["checked"] and doc["models"]
    for name, entry in doc["models"].items():
        assert name == name.lower()
        assert isinstance(entry["context_window"], int) and entry["context_window"] > OUTPUT_RESERVE_TOKENS
        assert entry["source"].startswith("https://")
        if "max_input_tokens" in entry:
            assert entry["max_input_tokens"] <= entry["context_window"]
