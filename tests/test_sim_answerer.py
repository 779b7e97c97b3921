"""The baseline answerer on real LongBench (MiniLongBench) and BAMBOO prompts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from asyncbench.sim.answerer import answer

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SAMPLES = DATA / "minilongbench" / "samples"
BAMBOO = DATA / "bamboo"

pytestmark = pytest.mark.skipif(not SAMPLES.exists(), reason="shared reference data not available")


def _mini(dataset: str) -> list[dict]:
    return list(json.loads((SAMPLES / f"MiniLongBench_{dataset}.json").read_text(encoding="utf-8")).values())


def _bamboo(name: str, limit: int = 5) -> list[dict]:
    with (BAMBOO / f"{name}.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for _, line in zip(range(limit), fh)]


def _bamboo_prompt(task: str, **fields: str) -> str:
    template = json.loads((BAMBOO / "prompt.json").read_text(encoding="utf-8"))[task]
    return template["system"] + "\n" + template["final_answer"].format(**fields)


def test_passage_retrieval_answers_an_offered_paragraph():
    for sample in _mini("passage_retrieval_en"):
        prompt = sample["origin_prompt"]
        out = answer(prompt, 128)
        assert re.fullmatch(r"Paragraph \d+", out), out
        assert f"\n{out}:" in prompt  # the label exists in the prompt
    for sample in _mini("passage_retrieval_zh"):
        out = answer(sample["origin_prompt"], 128)
        assert re.fullmatch(r"段落\d+", out) and f"\n{out}：" in sample["origin_prompt"]


def test_passage_retrieval_is_near_chance_not_constant():
    outs = {answer(s["origin_prompt"], 128) for s in _mini("passage_retrieval_en")}
    assert len(outs) > 1


def test_passage_count_answers_a_number_in_range():
    for sample in _mini("passage_count"):
        out = answer(sample["origin_prompt"], 128)
        shown = len(re.findall(r"^Paragraph \d+:", sample["origin_prompt"], re.M))
        assert out.isdigit() and 1 <= int(out) <= shown


@pytest.mark.parametrize("dataset", ["trec", "lsht"])
def test_classification_picks_a_label_from_the_examples(dataset):
    for sample in _mini(dataset):
        out = answer(sample["origin_prompt"], 256)
        assert out in sample["gold"]["all_classes"], out


def test_code_completion_returns_a_line_of_the_context():
    for dataset in ("lcc", "repobench-p"):
        for sample in _mini(dataset):
            prompt = sample["origin_prompt"]
            out = answer(prompt, 256)
            assert out.strip() and out in prompt.splitlines()


def test_qa_extracts_a_span_of_the_context():
    scored = 0
    for dataset in ("hotpotqa", "2wikimqa", "musique", "narrativeqa", "qasper", "multifieldqa_en", "triviaqa"):
        for sample in _mini(dataset):
            prompt = sample["origin_prompt"]
            out = answer(prompt, 128)
            assert len(out) <= 128
            assert out in ("yes", "no") or out in prompt
            question = prompt[prompt.rfind("Question:"):].lower()
            if out not in ("yes", "no") and any(w in out.lower() for w in re.findall(r"[a-z]{6,}", question)):
                scored += 1
    assert scored >= 20  # most extracted spans share a content word with the question


def test_summaries_use_the_lead_of_the_context():
    sample = _mini("gov_report")[0]
    out = answer(sample["origin_prompt"], 200)
    assert out.startswith("To participate in federal student aid programs")
    samsum = _mini("samsum")[0]
    assert answer(samsum["origin_prompt"], 512) == "William: are you still angry?\r\nEmilia: YES \r\nWilliam: :("


def test_deterministic_and_truncated():
    prompt = _mini("hotpotqa")[0]["origin_prompt"]
    assert answer(prompt, 400) == answer(prompt, 400)
    assert len(answer(prompt, 10)) <= 10
    assert answer(prompt, 0) == ""


@pytest.mark.skipif(not BAMBOO.exists(), reason="BAMBOO data not available")
def test_bamboo_prompt_shapes():
    for row in _bamboo("meetingqa_4k"):
        prompt = _bamboo_prompt("meetingqa", content=row["content"], question=row["question"],
                                options="\n".join(row["options"]))
        assert answer(prompt, 16) in ("A", "B", "C", "D")
    for row in _bamboo("senhallu_4k"):
        prompt = _bamboo_prompt("senhallu", content=row["content"], hypothesis=row["hypothesis"])
        assert answer(prompt, 16) in ("Yes.", "No.")
    for row in _bamboo("showssort_4k"):
        prompt = _bamboo_prompt("showssort", content="\n".join(f"[{i}] {p}" for i, p in enumerate(row["content"])))
        out = answer(prompt, 64)
        assert sorted(re.findall(r"\[(\d)\]", out)) == ["0", "1", "2", "3", "4"]
    for row in _bamboo("showspred_4k"):
        out = answer(_bamboo_prompt("showspred", content=row["content"]), 64)
        assert out and f"said by {out}" in row["content"]
    for row in _bamboo("altqa_4k"):
        out = answer(_bamboo_prompt("altqa", content=row["content"]), 16)
        assert out.replace(".", "").isdigit() and out in row["content"]
