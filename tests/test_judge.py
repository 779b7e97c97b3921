"""The 100-LongBench judge as the release calls and reads it (utils/metrics.py,
eval_trec.py): its prompts, one call per reference with the best kept, the reply's last
JSON object, failures scoring 0, summaries tried twice — with a scripted RunContext."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from asyncbench.benchmarks.longbench100.release import judge_prompts_from_source, load_release
from asyncbench.errors import ProviderError
from asyncbench.metrics.judge import (
    JUDGE_SYSTEM,
    parse_qa,
    parse_summary_verdict,
    qa_scores,
    summary_scores,
)
from asyncbench.types import Request, Response, Usage

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "longbench100").is_dir(), reason="../shared/data not available")


class ScriptedJudge:
    """A RunContext stand-in whose judge replies come from a function of the request."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.requests: list[Request] = []
        self.options = {"judge": "openai-compat:judge"}

    def make_request(self, spec: str | None, prompt: str | None = None, messages: list | None = None,
                     max_tokens: int = 128, task: str | None = None, temperature: float = 0.0,
                     params: dict | None = None, repeat: int = 0) -> Request:
        return Request(provider="fake", model=spec or "evaluated", endpoint_id="fake", prompt=prompt, messages=messages,
                       max_tokens=max_tokens, task=task, temperature=temperature, params=params or {}, repeat=repeat)

    async def generate(self, requests: list[Request], purpose: str) -> list[Response | ProviderError]:
        assert purpose == "judge"
        self.requests += requests
        out: list[Response | ProviderError] = []
        for r in requests:
            text = self.reply(r)
            out.append(text if isinstance(text, ProviderError) else Response(text=text, usage=Usage(10, 5), latency_ms=1.0))
        return out


QA_T = "Q: {question}\nCorrect answers: {correct_answers}\nAnswer: {parsed_output}\n"
FLU_T = 'fluency of "{text}"'
PRE_T = 'precision of "{summary}" against "{expert_summary}"'


def user(r: Request) -> str:
    assert r.messages is not None
    return r.messages[-1]["content"]


@pytest.mark.parametrize(("text", "score"), [
    ('Reasoning... {"fluency": 2, "correctness": 3}', 1.0),
    ('first {"fluency": 0, "correctness": 0} then {"fluency": 2, "correctness": 2}', 4 / 6),  # the last object
    ("no verdict at all", 0.0),
    ('{"fluency": 2}', 0.0),  # a field missing: the release crashes; here 0
    ('{"fluency": "2", "correctness": 3}', 0.0),
    ('{"fluency": 2, "correctness": ', 0.0),
])
def test_parse_qa_as_the_release(text: str, score: float) -> None:
    assert parse_qa(text) == pytest.approx(score)


def test_parse_summary_falls_back_to_a_fenced_block() -> None:
    assert parse_summary_verdict('x {"precision": 2, "sentence_count": 3}') == {"precision": 2, "sentence_count": 3}
    assert parse_summary_verdict('```json\n{"fluency": 1, "x": {"y": 1}}\n```') == {"fluency": 1, "x": {"y": 1}}
    assert parse_summary_verdict("nothing") is None


def test_qa_one_call_per_reference_best_kept_and_sampling_as_the_release() -> None:
    def reply(r: Request) -> str:
        return '{"fluency": 2, "correctness": 3}' if "Correct answers: Paris\n" in user(r) else \
            '{"fluency": 2, "correctness": 1}'

    ctx = ScriptedJudge(reply)
    scores = asyncio.run(qa_scores(ctx, QA_T, [("Capital?", ["Lyon", "Paris"], "Paris"), ("Q2?", ["x"], "y")],
                                   tasks=["single_doc_qa", "multi_doc_qa"]))
    assert scores == [pytest.approx(1.0), pytest.approx(2 / 6)]
    assert [user(r) for r in ctx.requests] == [QA_T.format(question="Capital?", correct_answers=a, parsed_output="Paris")
                                               for a in ("Lyon", "Paris")] + [
        QA_T.format(question="Q2?", correct_answers="x", parsed_output="y")]
    r = ctx.requests[0]
    assert r.messages is not None and r.messages[0] == {"role": "system", "content": JUDGE_SYSTEM}
    assert r.temperature == 0.1 and r.params == {"top_p": 0.9} and r.max_tokens == 1024
    assert [q.task for q in ctx.requests] == ["single_doc_qa", "single_doc_qa", "multi_doc_qa"]


def test_a_failed_judgement_scores_zero() -> None:
    ctx = ScriptedJudge(lambda r: ProviderError("fatal", "down"))
    assert asyncio.run(qa_scores(ctx, QA_T, [("Q?", ["A"], "A")])) == [0.0]
    assert asyncio.run(summary_scores(ctx, FLU_T, PRE_T, [(["ref"], "A summary.")])) == [0.0]


def test_summary_fluency_times_precision_with_one_retry() -> None:
    def reply(r: Request) -> str:
        if user(r).startswith("fluency"):
            return "unreadable" if r.repeat == 0 else '{"fluency": 1}'  # parses on the second try
        return '{"precision": 2, "sentence_count": 4}'

    ctx = ScriptedJudge(reply)
    scores = asyncio.run(summary_scores(ctx, FLU_T, PRE_T, [(["expert"], "  One. Two.  ")]))
    assert scores == [pytest.approx(0.5)]
    fluency = [r for r in ctx.requests if user(r).startswith("fluency")]
    assert [r.repeat for r in fluency] == [0, 1] and user(fluency[0]) == 'fluency of "One. Two."'  # stripped
    (precision,) = [r for r in ctx.requests if user(r).startswith("precision")]
    assert user(precision) == 'precision of "One. Two." against "expert"'


def test_summary_gives_up_after_two_tries_and_skips_precision() -> None:
    ctx = ScriptedJudge(lambda r: "never a verdict")
    assert asyncio.run(summary_scores(ctx, FLU_T, PRE_T, [(["expert"], "S.")])) == [0.0]
    assert len(ctx.requests) == 2 and all(user(r).startswith("fluency") for r in ctx.requests)


def test_zero_sentences_scores_zero() -> None:
    ctx = ScriptedJudge(lambda r: '{"fluency": 1}' if user(r).startswith("fluency") else
                        '{"precision": 0, "sentence_count": 0}')
    assert asyncio.run(summary_scores(ctx, FLU_T, PRE_T, [(["e"], "s")])) == [0.0]


@needs_data
def test_the_release_s_judge_prompts_are_read_as_data() -> None:
    release = load_release(DATA)
    shipped = json.loads((DATA / "longbench100" / "judge_prompts.json").read_text())
    assert release.judge == shipped
    assert "{correct_answers}" in release.judge["judge_prompt"] and "{expert_summary}" in release.judge["precision_prompt"]


def test_judge_prompts_are_taken_from_metrics_py_without_running_it() -> None:
    source = 'import os\njudge_prompt = """J {question}"""\nfluency_prompt="F {text}"\n' \
             'precision_prompt = "P {summary}"\nos.system("never run")\n'
    assert judge_prompts_from_source(source) == {"judge_prompt": "J {question}", "fluency_prompt": "F {text}",
                                                 "precision_prompt": "P {summary}"}
