"""Generated 100-LongBench contexts: length control, answer presence, determinism."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from asyncbench.benchmarks.longbench100.generator import Generator, Unbuildable
from asyncbench.benchmarks.longbench100.sources import NEEDED_EXTRA, load_sources
from asyncbench.benchmarks.longbench100.tasks import TASKS
from asyncbench.estimators.longscore import parse_length
from asyncbench.tokenizers import get_tokenizer

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not (DATA / "minilongbench").is_dir(), reason="../shared/data not available")
LENGTHS = ["2k", "4k", "8k", "16k"]
ROWS = 4


@pytest.fixture(scope="module")
def sources() -> dict:
    wanted = {n for t in TASKS.values() for n in t.real + t.noise} | NEEDED_EXTRA
    return load_sources(DATA, wanted)


@pytest.fixture(scope="module")
def built(sources: dict) -> dict:
    gen = Generator(sources, get_tokenizer("cl100k_base"), seed=7)
    out = {}
    for task in TASKS:
        for length in LENGTHS:
            try:
                out[task, length] = gen.build(task, length, parse_length(length), ROWS)
            except Unbuildable:
                out[task, length] = None
    return out


def test_every_task_builds_at_8k_and_16k(built: dict) -> None:
    for task in TASKS:
        assert built[task, "8k"] and built[task, "16k"], task


def test_contexts_within_target_and_above_95_percent(built: dict) -> None:
    tok = get_tokenizer("cl100k_base")
    checked = 0
    for (task, length), rows in built.items():
        for b in rows or []:
            n = tok.count(b.context)  # measured afresh, not trusted from the generator
            assert n == b.context_tokens
            assert 0.95 * parse_length(length) <= n <= parse_length(length), (task, length, n)
            checked += 1
    assert checked >= 100


def test_answer_bearing_articles_present_exactly_once(built: dict) -> None:
    for (task, _), rows in built.items():
        for b in rows or []:
            if task in ("single_doc_qa", "single_doc_sum", "passage_retrieval", "multi_doc_qa", "multi_doc_sum", "kv_retrieval"):
                assert b.answer_texts
                for text in b.answer_texts:
                    assert b.context.count(text) == 1, task


def test_passage_retrieval_answer_points_at_the_article(built: dict) -> None:
    for b in built["passage_retrieval", "8k"]:
        number = b.answers[0]
        assert f"Passage {number}: {b.answer_texts[0]}" in b.context


def test_qa_instruction_names_the_answer_passages(built: dict) -> None:
    for b in built["multi_doc_qa", "8k"]:
        named = re.findall(r"\d+", b.instruction)
        assert len(named) == len(b.answer_texts) > 1
        for n, text in zip(named, b.answer_texts):
            assert f"Passage {n}:\n{text}\n" in b.context


def test_kv_chain_and_answer(built: dict) -> None:
    for b in built["kv_retrieval", "4k"]:
        pairs = re.findall(r"The value of ([0-9a-f-]{36}) is ([0-9a-f-]{36})\.", b.context)
        assert len(pairs) == 3
        chain = dict(pairs)
        key = re.fullmatch(r"Answer: the value of ([0-9a-f-]{36}) is", b.input).group(1)  # the release's question
        assert chain[key] == b.answers[0] and chain[chain[key]] in chain.values()


def test_counting_stars_answer_option_lists_counts_in_order(built: dict) -> None:
    for b in built["counting_stars", "8k"]:
        counts = [int(n) for n in re.findall(r"The little penguin counted (\d+) ★", b.context)]
        assert len(counts) == 4
        options = dict(re.findall(r"^(\d+)\. (.+)$", b.input, re.M))
        assert options[b.answers[0]] == str(counts)
        assert options["1"] == "unanswerable" and len(set(options.values())) == len(options)


def test_passage_count_duplicates_and_answer(built: dict) -> None:
    for b in built["passage_count", "8k"]:
        paragraphs = re.split(r"Paragraph \d+: ", b.context)[1:]
        unique = {p.strip() for p in paragraphs}
        assert str(len(unique)) == b.answers[0]
        assert all(1 <= [p.strip() for p in paragraphs].count(u) <= 3 for u in unique)


def test_same_seed_is_byte_identical_and_other_seed_differs(sources: dict, built: dict) -> None:
    again = Generator(sources, get_tokenizer("cl100k_base"), seed=7)
    other = Generator(sources, get_tokenizer("cl100k_base"), seed=8)
    for task in ("kv_retrieval", "single_doc_qa", "passage_count"):
        rows = again.build(task, "4k", 4096, ROWS)
        assert [(b.context, b.input, b.answers) for b in rows] == [(b.context, b.input, b.answers) for b in built[task, "4k"]]
        assert [b.context for b in other.build(task, "4k", 4096, ROWS)] != [b.context for b in rows]
    # more rows never change the earlier ones
    assert again.build("kv_retrieval", "4k", 4096, ROWS + 2)[:ROWS][0].context == built["kv_retrieval", "4k"][0].context


def test_unbuildable_when_no_article_fits(sources: dict) -> None:
    gen = Generator(sources, get_tokenizer("cl100k_base"))
    with pytest.raises(Unbuildable, match="fits in 1k"):
        gen.build("single_doc_sum", "1k", 1024, 1)


def test_the_release_s_base_set(sources: dict) -> None:
    """`<task>_0`: QA and summary rows are the answer-bearing article alone (under 8k),
    synthetic rows are drawn at 2k, 4k and 6k in equal parts."""
    gen = Generator(sources, get_tokenizer("cl100k_base"), seed=7)
    qa = gen.build_base("single_doc_qa", 3)
    assert len(qa) == 3 and all(b.length == "base" for b in qa)
    for b in qa:
        assert b.context == f"Passage 1:\n{b.answer_texts[0]}\n\n" and b.context_tokens < 8192
        assert b.instruction == "Answer the question related with Passage 1. "
    kv = gen.build_base("kv_retrieval", 6)
    assert [b.row for b in kv] == list(range(6)) and sorted(b.target for b in kv) == [2048, 2048, 4096, 4096, 6144, 6144]
