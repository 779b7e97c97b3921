"""LLM-as-judge for 100-LongBench, as the release's scorer calls and reads it
(uservan/100-LongBench `utils/metrics.py`, `utils/model_utils.py`, `eval_trec.py`).

- The prompts are the release's (`judge_prompts.json`, read as data by the benchmark and
  passed in here); each call is a system message "You are a helpful assistant" and the
  prompt, at temperature 0.1 and top_p 0.9, up to 1,024 new tokens (the release's
  OpenAIModel defaults for its gpt-4o-mini judge).
- QA: one call per reference answer; the reply's last `{...}` read as JSON gives
  fluency x correctness / 6; the sample scores the best reference. A reply without both
  fields, or no reply, scores 0 (the release's `s = 0`).
- Summaries: per reference, a fluency call on the summary and a precision call against
  the reference, each tried at most twice while its reply does not parse (the second try
  is a fresh answer: repeat index 1); score = fluency x precision / sentence_count (0
  when there are no sentences); either missing scores 0; the best reference counts.
- The release crashes on a reply whose JSON lacks a field or holds a non-number; here
  that reply scores 0, as an unreadable one does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from ..errors import ProviderError
from ..types import Purpose, Request, Response

PURPOSE: Purpose = "judge"
JUDGE_MAX_TOKENS = 1024
JUDGE_TEMPERATURE = 0.1
JUDGE_TOP_P = 0.9
JUDGE_SYSTEM = "You are a helpful assistant"
SUMMARY_TRIES = 2
PROMPT_NAMES = ("judge_prompt", "fluency_prompt", "precision_prompt")  # the release's judge_prompts.json

_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)
_FENCED = re.compile(r"(?:```json)(.+)(?:```)", re.DOTALL)


def judge_messages(prompt: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": prompt}]


def parse_qa(text: str) -> float:
    """fluency x correctness / 6 from the reply's last JSON object; 0 without one."""
    matches = _OBJECT.findall(text or "")
    if not matches:
        return 0.0
    try:
        verdict = json.loads(matches[-1])
        return _number(verdict["fluency"]) * _number(verdict["correctness"]) / 6
    except (ValueError, KeyError, TypeError):
        return 0.0


def parse_summary_verdict(text: str) -> dict[str, object] | None:
    """The release's parse_sum_json: the last `{...}`, else a ```json fenced block."""
    matches = _OBJECT.findall(text or "")
    if not matches:
        return None
    try:
        out = json.loads(matches[-1])
    except ValueError:
        fenced = _FENCED.findall(text)
        if not fenced:
            return None
        try:
            out = json.loads(fenced[-1])
        except ValueError:
            return None
    return out if isinstance(out, dict) else None


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


class Asks(Protocol):
    """What the judge needs of the run (a benchmark's RunContext): the options naming the
    judge model, a way to make its requests and to send them through the engine."""

    @property
    def options(self) -> Mapping[str, object]: ...

    @property
    def make_request(self) -> Callable[..., Request]: ...

    @property
    def generate(self) -> Callable[[list[Request], Purpose], Awaitable[Sequence[Response | ProviderError]]]: ...


async def _replies(ctx: Asks, prompts: Sequence[str], tasks: Sequence[str | None], repeat: int = 0) -> list[str | None]:
    """One judge call per prompt through the engine (scheduler, cache, ledger under
    purpose "judge"); None where the call failed."""
    if not prompts:
        return []
    spec = ctx.options.get("judge")
    requests = [ctx.make_request(spec, messages=judge_messages(p), max_tokens=JUDGE_MAX_TOKENS, task=t,
                                 temperature=JUDGE_TEMPERATURE, params={"top_p": JUDGE_TOP_P}, repeat=repeat)
                for p, t in zip(prompts, tasks)]
    answers = await ctx.generate(requests, PURPOSE)
    return [a.text if isinstance(a, Response) else None for a in answers]


Calls = list[list[dict[str, object]]]  # per item, a record of each judge call (the per-sample view)


async def qa_scores(ctx: Asks, template: str, items: Sequence[tuple[str, Sequence[str], str]],
                    tasks: Sequence[str | None] | None = None, calls_out: Calls | None = None) -> list[float]:
    """Scores in [0, 1] for (question, reference answers, answer) triples: the best
    reference's fluency x correctness / 6 (eval_trec.py's max over ground truths).
    `calls_out[i]` receives item i's calls: reference, reply, score."""
    tasks = list(tasks) if tasks else [None] * len(items)
    calls = [(i, ref, template.format(question=q, correct_answers=ref, parsed_output=pred))
             for i, (q, refs, pred) in enumerate(items) for ref in refs]
    replies = await _replies(ctx, [p for _, _, p in calls], [tasks[i] for i, _, _ in calls])
    scores = [0.0] * len(items)
    for (i, ref, _), reply in zip(calls, replies):
        score = parse_qa(reply or "")
        scores[i] = max(scores[i], score)
        if calls_out is not None:
            calls_out[i].append({"prompt": "judge_prompt", "reference": ref, "reply": reply, "score": score})
    return scores


async def _tried(ctx: Asks, prompts: list[str], tasks: list[str | None]) -> list[dict[str, object] | None]:
    """Each prompt asked until its reply parses, at most SUMMARY_TRIES times."""
    verdicts: list[dict[str, object] | None] = [None] * len(prompts)
    pending = list(range(len(prompts)))
    for attempt in range(SUMMARY_TRIES):
        if not pending:
            break
        replies = await _replies(ctx, [prompts[i] for i in pending], [tasks[i] for i in pending], repeat=attempt)
        for i, reply in zip(pending, replies):
            verdicts[i] = parse_summary_verdict(reply) if reply is not None else None
        pending = [i for i in pending if verdicts[i] is None]
    return verdicts


async def summary_scores(ctx: Asks, fluency_template: str, precision_template: str,
                         items: Sequence[tuple[Sequence[str], str]],
                         tasks: Sequence[str | None] | None = None, calls_out: Calls | None = None) -> list[float]:
    """Scores in [0, 1] for (reference summaries, summary) pairs: the best reference's
    fluency x supported sentences / sentences. `calls_out[i]` receives item i's parsed
    verdicts per reference (a judge reply that never parsed shows as null)."""
    tasks = list(tasks) if tasks else [None] * len(items)
    pairs = [(i, ref, pred.strip()) for i, (refs, pred) in enumerate(items) for ref in refs]
    fluency = await _tried(ctx, [fluency_template.format(text=pred) for _, _, pred in pairs],
                           [tasks[i] for i, _, _ in pairs])
    # as the release: no precision call for a summary whose fluency never parsed
    asked = [k for k, f in enumerate(fluency) if f is not None]
    got = await _tried(ctx, [precision_template.format(expert_summary=pairs[k][1], summary=pairs[k][2]) for k in asked],
                       [tasks[pairs[k][0]] for k in asked])
    precision: list[dict[str, object] | None] = [None] * len(pairs)
    for k, p in zip(asked, got):
        precision[k] = p
    scores = [0.0] * len(items)
    for (i, ref, _), f, p in zip(pairs, fluency, precision):
        if calls_out is not None:
            calls_out[i].append({"prompt": "fluency_prompt + precision_prompt", "reference": ref,
                                 "fluency": f, "precision": p})
        if f is None or p is None:
            continue
        try:
            count = _number(p["sentence_count"])
            share = _number(p["precision"]) / count if count > 0 else 0.0
            scores[i] = max(scores[i], _number(f["fluency"]) * share)
        except (KeyError, TypeError):
            continue
    return scores
