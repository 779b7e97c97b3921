"""LLM-as-judge for 100-LongBench: rubric prompts, verdict extraction, bounded re-asks.

The rubric is the paper's (A.2) and its official scorer's: a QA answer gets fluency 0-2
times correctness 0-3 against the reference answers, normalised by 6; a summary gets
fluency 0/1 times precision = supported sentences / sentences, judged against the
reference summary. The prompt wording is ours.

A judge reply is only trusted when it ends with a JSON verdict whose fields are all
present, integral and in range. Anything else is re-asked (as a follow-up turn, so the
cached bad reply is not simply replayed) a bounded number of times; a verdict that never
arrives is a failed judgement, reported as None and never as a zero score.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ProviderError
from ..types import Response

DEFAULT_REASKS = 2
JUDGE_MAX_TOKENS = 1024
PURPOSE = "judge"


@dataclass(frozen=True)
class Rubric:
    """The verdict a judge must return: field -> (low, high); high None means unbounded."""

    name: str
    fields: dict[str, tuple[int, int | None]]

    def shape(self) -> str:
        """The verdict's form with placeholders, never a parseable example: a judge that
        merely echoes the instructions must not produce a valid (made-up) verdict."""
        return "{" + ", ".join(f'"{k}": {k[0].upper()}' for k in self.fields) + "}"

    def ranges(self) -> str:
        return "; ".join(f"{k}: integer {lo}-{hi}" if hi is not None else f"{k}: integer >= {lo}" for k, (lo, hi) in self.fields.items())


QA = Rubric("qa", {"fluency": (0, 2), "correctness": (0, 3)})
FLUENCY = Rubric("fluency", {"fluency": (0, 1)})
PRECISION = Rubric("precision", {"precision": (0, None), "sentence_count": (0, None)})

_QA_PROMPT = """You are an impartial grader. A model answered a question about a document you are not shown. Grade its answer against the reference answers, which would earn full marks.

Fluency:
- 0: incoherent or garbled.
- 1: coherent and grammatical, but repetitive.
- 2: coherent, grammatical and not repetitive.

Correctness:
- 0: does not agree with any reference answer.
- 1: agrees with part of a reference answer (e.g. the question asks for a date and a person and only the date is right).
- 2: fully agrees with a reference answer but also adds clearly unrelated information. Extra details that are relevant to the question do not count as unrelated.
- 3: fully agrees with a reference answer and contains only information relevant to the question. A longer answer is fine as long as all of it is relevant (reference "the North Pole", answer "They are travelling to the North Pole" earns 3).

Reason briefly, step by step, then end your reply with the scores as JSON in the form {{"fluency": F, "correctness": C}}, with F and C replaced by your integer scores.

Question: {question}
Reference answers: {answers}
Answer to grade: {prediction}
"""

_FLUENCY_PROMPT = """You are an impartial grader. Judge only the fluency of the text below.

- 0: incoherent, repetitive (even when reworded), incomplete (e.g. just "Summary:") or gibberish. A coherent text that repeats itself still gets 0.
- 1: coherent, fluent, grammatical and not repetitive. A text whose last sentence is cut off still gets 1 if the rest qualifies.

Reason briefly, then end your reply with the score as JSON in the form {{"fluency": F}}, with F replaced by your integer score.

Text: "{text}"
"""

_PRECISION_PROMPT = """You are an impartial grader. Compare a model's summary with an expert summary of the same document.

Split the model's summary into sentences. A sentence is supported when its main facts agree with the expert summary; missing minor details (exact dates, names of people, laws or earlier cases) do not make it unsupported. A sentence whose main facts are absent from, or contradicted by, the expert summary is unsupported.

Reason sentence by sentence, then end your reply with JSON in the form {{"precision": P, "sentence_count": N}}, with P replaced by the number of supported sentences and N by the total number of sentences.

Expert summary: "{reference}"

Model summary: "{summary}"
"""

_REASK = (
    "I could not read a valid verdict in your reply. Reply with only one JSON object of the form "
    "{shape} ({ranges}) and nothing else."
)


def qa_prompt(question: str, answers: Sequence[str], prediction: str) -> str:
    return _QA_PROMPT.format(question=question, answers=json.dumps(list(answers), ensure_ascii=False), prediction=prediction)


def fluency_prompt(text: str) -> str:
    return _FLUENCY_PROMPT.format(text=text.strip())


def precision_prompt(reference: str, summary: str) -> str:
    return _PRECISION_PROMPT.format(reference=reference, summary=summary.strip())


_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    return None


def _load_object(blob: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(blob)
    except json.JSONDecodeError:
        import json5  # lenient fallback: single quotes, trailing commas, bare keys

        try:
            obj = json5.loads(blob)
        except ValueError:
            return None
    return obj if isinstance(obj, dict) else None


def parse_verdict(text: str | None, rubric: Rubric) -> dict[str, int] | None:
    """The judge's verdict, or None when it is missing, malformed or out of range.

    The last JSON object naming all the rubric's fields wins: judges reason first and
    conclude last, and may quote the example format along the way.
    """
    if not text:
        return None
    for blob in reversed(_OBJECT.findall(text)):
        obj = _load_object(blob)
        if obj is None:
            continue
        lowered = {str(k).strip().lower(): v for k, v in obj.items()}
        if not all(k in lowered for k in rubric.fields):
            continue
        verdict: dict[str, int] = {}
        for key, (lo, hi) in rubric.fields.items():
            value = _as_int(lowered[key])
            if value is None or value < lo or (hi is not None and value > hi):
                return None
            verdict[key] = value
        if rubric is PRECISION and verdict["precision"] > verdict["sentence_count"]:
            return None
        return verdict
    return None


async def ask(ctx: Any, items: Sequence[tuple[str, Rubric]], *, reasks: int = DEFAULT_REASKS,
              tasks: Sequence[str] | None = None) -> list[dict[str, int] | None]:
    """Send each (prompt, rubric) to the judge (`ctx.options["judge"]`); return its verdicts.

    All prompts go out together through `ctx.generate`, so the engine's scheduler, limits
    and cache apply and the tokens are booked under purpose "judge". A reply without a
    valid verdict is followed up with a re-ask turn, at most `reasks` times; a failed call
    is retried within the same bound. What is still missing after that is None.
    `tasks[i]`, when given, is the task item i is judged for: the ledger books its cost there.
    """
    spec = ctx.options.get("judge")
    threads: list[list[dict[str, str]]] = [[{"role": "user", "content": p}] for p, _ in items]
    verdicts: list[dict[str, int] | None] = [None] * len(items)
    pending = list(range(len(items)))
    for _attempt in range(reasks + 1):
        if not pending:
            break
        requests = [ctx.make_request(spec, messages=threads[i], max_tokens=JUDGE_MAX_TOKENS,
                                     task=tasks[i] if tasks else None) for i in pending]
        replies = await ctx.generate(requests, PURPOSE)
        still: list[int] = []
        for i, reply in zip(pending, replies):
            if isinstance(reply, ProviderError) or not isinstance(reply, Response):
                still.append(i)  # same thread again: a failed call is not cached
                continue
            rubric = items[i][1]
            verdict = parse_verdict(reply.text, rubric)
            if verdict is not None:
                verdicts[i] = verdict
                continue
            reask = _REASK.format(shape=rubric.shape(), ranges=rubric.ranges())
            threads[i] = threads[i] + [{"role": "assistant", "content": reply.text or ""}, {"role": "user", "content": reask}]
            still.append(i)
        pending = still
    return verdicts


async def judge_qa(ctx: Any, items: Sequence[tuple[str, Sequence[str], str]], *, reasks: int = DEFAULT_REASKS,
                   tasks: Sequence[str] | None = None) -> list[float | None]:
    """Scores in [0, 1] for (question, reference answers, prediction) triples:
    fluency x correctness / 6, or None where the judge never gave a valid verdict."""
    verdicts = await ask(ctx, [(qa_prompt(q, a, p), QA) for q, a, p in items], reasks=reasks, tasks=tasks)
    return [None if v is None else v["fluency"] * v["correctness"] / 6 for v in verdicts]


async def judge_summary(ctx: Any, items: Sequence[tuple[str, str]], *, reasks: int = DEFAULT_REASKS,
                        tasks: Sequence[str] | None = None) -> list[float | None]:
    """Scores in [0, 1] for (reference summary, summary) pairs: fluency x supported/sentences.

    Fluency and precision are separate judge calls, as in the official scorer (sent in one
    batch); either failing makes the judgement fail. A summary judged to have no
    sentences scores 0.
    """
    asks = [(fluency_prompt(s), FLUENCY) for _, s in items] + [(precision_prompt(r, s), PRECISION) for r, s in items]
    verdicts = await ask(ctx, asks, reasks=reasks, tasks=list(tasks) * 2 if tasks else None)
    fluency, precision = verdicts[: len(items)], verdicts[len(items) :]
    scores: list[float | None] = []
    for f, p in zip(fluency, precision):
        if f is None or p is None:
            scores.append(None)
        else:
            share = p["precision"] / p["sentence_count"] if p["sentence_count"] else 0.0
            scores.append(f["fluency"] * share)
    return scores
