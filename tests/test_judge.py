"""Judge verdict parsing and the bounded re-ask, with a scripted fake RunContext."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from asyncbench.errors import ProviderError
from asyncbench.metrics.judge import DEFAULT_REASKS, FLUENCY, PRECISION, QA, judge_qa, judge_summary, parse_verdict
from asyncbench.types import Request, Response, Usage


class ScriptedJudge:
    """A RunContext stand-in whose judge replies come from a function of the thread."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls: list[tuple[list[Request], str]] = []
        self.options = {"judge": "openai-compat:judge"}

    def make_request(self, spec: str | None, prompt: str | None = None, messages: list | None = None, max_tokens: int = 128,
                     task: str | None = None) -> Request:
        return Request(provider="fake", model=spec or "evaluated", endpoint_id="fake", prompt=prompt, messages=messages,
                       max_tokens=max_tokens, task=task)

    async def generate(self, requests: list[Request], purpose: str) -> list[Response | ProviderError]:
        self.calls.append((requests, purpose))
        out: list[Response | ProviderError] = []
        for r in requests:
            text = self.reply(r)
            out.append(text if isinstance(text, ProviderError) else Response(text=text, usage=Usage(10, 5), latency_ms=1.0))
        return out


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('Reasoning... fine.\n{"fluency": 2, "correctness": 3}', {"fluency": 2, "correctness": 3}),
        ('```json\n{"Fluency": "1", "correctness": 2.0}\n```', {"fluency": 1, "correctness": 2}),
        ("Format {'fluency': 0, 'correctness': 0} ... final {'fluency': 2, 'correctness': 1,}", {"fluency": 2, "correctness": 1}),
    ],
)
def test_parse_valid_verdicts(text: str, expected: dict[str, int]) -> None:
    assert parse_verdict(text, QA) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "The answer is good. fluency 2, correctness 3",  # no JSON
        '{"fluency": 2}',  # missing field
        '{"fluency": 3, "correctness": 1}',  # out of range
        '{"fluency": 2, "correctness": -1}',
        '{"fluency": 1.5, "correctness": 1}',  # not integral
        '{"fluency": true, "correctness": 1}',
        '{"fluency": 2, "correctness": ',  # truncated
    ],
)
def test_parse_rejects_bad_verdicts(text: str) -> None:
    assert parse_verdict(text, QA) is None


def test_precision_cannot_exceed_sentences() -> None:
    assert parse_verdict('{"precision": 3, "sentence_count": 4}', PRECISION) == {"precision": 3, "sentence_count": 4}
    assert parse_verdict('{"precision": 5, "sentence_count": 4}', PRECISION) is None
    assert parse_verdict('{"fluency": 2}', FLUENCY) is None


def test_qa_score_is_product_over_six() -> None:
    ctx = ScriptedJudge(lambda r: 'ok {"fluency": 2, "correctness": 2}')
    scores = run(judge_qa(ctx, [("Q?", ["A"], "A")]))
    assert scores == [pytest.approx(4 / 6)]
    assert all(purpose == "judge" for _, purpose in ctx.calls)
    assert ctx.calls[0][0][0].model == "openai-compat:judge"


def test_malformed_verdict_is_reasked_then_counted_failed_not_zero() -> None:
    ctx = ScriptedJudge(lambda r: "I think it is quite good.")
    scores = run(judge_qa(ctx, [("Q?", ["A"], "A")]))
    assert scores == [None]
    assert len(ctx.calls) == 1 + DEFAULT_REASKS
    # every re-ask is a longer thread (so a cache cannot replay the bad reply) ending in the re-ask turn
    threads = [reqs[0].messages for reqs, _ in ctx.calls]
    assert [len(t) for t in threads] == [1, 3, 5]
    assert '"fluency"' in threads[-1][-1]["content"] and threads[-1][-2]["role"] == "assistant"


def test_reask_recovers() -> None:
    def reply(r: Request) -> str:
        return '{"fluency": 9, "correctness": 9}' if len(r.messages) == 1 else '{"fluency": 1, "correctness": 3}'

    ctx = ScriptedJudge(reply)
    assert run(judge_qa(ctx, [("Q?", ["A"], "A")])) == [pytest.approx(0.5)]
    assert len(ctx.calls) == 2


def test_provider_errors_are_retried_within_bound() -> None:
    ctx = ScriptedJudge(lambda r: ProviderError("transient", "boom"))
    assert run(judge_qa(ctx, [("Q?", ["A"], "A"), ("Q2?", ["B"], "B")])) == [None, None]
    assert len(ctx.calls) == 1 + DEFAULT_REASKS and all(len(reqs) == 2 for reqs, _ in ctx.calls)


def test_only_failed_items_are_reasked() -> None:
    def reply(r: Request) -> str:
        return '{"fluency": 2, "correctness": 3}' if "Q1" in r.messages[0]["content"] else "no idea"

    ctx = ScriptedJudge(reply)
    assert run(judge_qa(ctx, [("Q1", ["A"], "A"), ("Q2", ["B"], "B")])) == [1.0, None]
    assert [len(reqs) for reqs, _ in ctx.calls] == [2, 1, 1]


def test_summary_score_fluency_times_precision() -> None:
    def reply(r: Request) -> str:
        content = r.messages[0]["content"]
        if "fluency of the text" in content:
            return '{"fluency": 1}'
        return 'Sentence 1 supported, 2 not, 3 supported, 4 not.\n{"precision": 3, "sentence_count": 4}'

    ctx = ScriptedJudge(reply)
    assert run(judge_summary(ctx, [("expert", "model summary")])) == [0.75]
    assert len(ctx.calls) == 1 and len(ctx.calls[0][0]) == 2  # fluency + precision in one batch


def test_summary_fails_when_either_verdict_is_missing() -> None:
    def reply(r: Request) -> str:
        return '{"fluency": 1}' if "fluency of the text" in r.messages[0]["content"] else '{"precision": 7, "sentence_count": 2}'

    assert run(judge_summary(ScriptedJudge(reply), [("expert", "summary")])) == [None]
