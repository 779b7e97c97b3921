"""`jsonl:PATH` — a user's own data: one sample per line.

Fields: `id` (required, unique), `prompt` (raw text) or `messages` (chat), optional
`answers` (list of strings or one string), `max_tokens` (default 128), `metric`, and
`task` (grouping in the report; default "jsonl"). Metrics: `exact_match` (normalised as
LongBench's QA normalisation), `contains`, or any LongBench metric name
(`qa_f1_score`, `rouge_score`, `classification_score`, ...). Samples without answers
are generated and stored but not scored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import UserError
from ..jsonl_io import iter_json_objects
from ..metrics import registry as metrics
from ..types import Sample, SampleResult, SampleScore
from .base import Benchmark, LoadOptions, RunContext
from .scores import TaskScores

if TYPE_CHECKING:  # numpy stays out of `asyncbench --help`
    from ..estimators.intervals import Plan, Tree

# The largest max_tokens a line may ask for: above every provider's output limit.
MAX_OUTPUT_TOKENS = 1_000_000


def _sample(row: dict[str, object], where: str) -> Sample:
    """One validated line: every field of the type the format documents, or one line
    naming the field, what it holds and what it should hold (checked in this order)."""
    if "id" not in row or not ("prompt" in row or "messages" in row):
        raise UserError(f"{where}: each line needs \"id\" and \"prompt\" or \"messages\"")
    sid = row["id"]
    if isinstance(sid, bool) or not isinstance(sid, (str, int)):
        raise UserError(f"{where}: \"id\" must be a string or an integer, not {_kind(sid)}")
    prompt, messages = _text(row, where)
    answers = _answers(row.get("answers") or [], where)
    max_tokens = row.get("max_tokens", 128)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= MAX_OUTPUT_TOKENS:
        raise UserError(f"{where}: \"max_tokens\" must be an integer from 1 to {MAX_OUTPUT_TOKENS:,}, "
                        f"not {max_tokens!r}")
    metric = row.get("metric")
    if metric is not None and not isinstance(metric, str):
        raise UserError(f"{where}: \"metric\" must be a string, not {_kind(metric)}")
    task = row.get("task", "jsonl")
    if not isinstance(task, str):
        raise UserError(f"{where}: \"task\" must be a string, not {_kind(task)}")
    all_classes = row.get("all_classes")
    if all_classes is not None and not (isinstance(all_classes, list) and all(isinstance(c, str) for c in all_classes)):
        raise UserError(f"{where}: \"all_classes\" must be a list of strings, not {_kind(all_classes)}")
    return Sample(id=str(sid), task=task, prompt=prompt, messages=messages, answers=answers, max_tokens=max_tokens,
                  metric=metric or ("exact_match" if answers else None), chat=messages is not None,
                  meta={"all_classes": all_classes})


def _text(row: dict[str, object], where: str) -> tuple[str | None, list[dict[str, str]] | None]:
    """(prompt, messages): `messages` when the line has it (its `prompt` is then ignored)."""
    if "messages" in row:
        messages = row["messages"]
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages):
            raise UserError(f"{where}: \"messages\" must be a non-empty list of "
                            f"{{\"role\": string, \"content\": string}} objects, not {_kind(messages)}")
        return None, messages
    prompt = row.get("prompt")
    if not isinstance(prompt, str):
        raise UserError(f"{where}: \"prompt\" must be a string, not {_kind(prompt)}")
    return prompt, None


def _answers(answers: object, where: str) -> list[str]:
    """A string or a list of strings (numbers taken as their text)."""
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not all(isinstance(a, (str, int, float)) and not isinstance(a, bool)
                                                for a in answers):
        raise UserError(f"{where}: \"answers\" must be a string or a list of strings, not {_kind(answers)}")
    return [str(a) for a in answers]


def _kind(value: object) -> str:
    """A value as the user wrote it, short: `5`, `"text"`, a list."""
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class JsonlBenchmark(Benchmark):
    """`jsonl:PATH`: the user's own samples, one JSON object a line, streamed."""

    STREAMS: ClassVar[bool] = True
    SCORES: ClassVar[type[TaskScores]] = TaskScores

    def __init__(self, path: str) -> None:
        self.path = Path(path).expanduser()
        self.name = f"jsonl:{self.path}"

    @classmethod
    def from_spec(cls, rest: str, extra: Mapping[str, object], data_dir: Path | None) -> tuple[Benchmark, list[str] | None]:
        """`jsonl:PATH`: the rest of the spec is the file, not a task selection."""
        if not rest:
            raise UserError("jsonl needs a file: jsonl:PATH (one JSON object a line)")
        return cls(rest), None

    def load(self, opts: LoadOptions) -> list[Sample]:
        return list(self.iter_load(opts))

    def fingerprint(self) -> str:
        """sha256 of the file's bytes: part of the run id, so an edited file is a new run."""
        import hashlib

        if not self.path.is_file():
            raise UserError(f"data file {self.path} not found (jsonl:PATH needs an existing .jsonl file)")
        h, buf = hashlib.sha256(), bytearray(1 << 20)  # one buffer reused: no fresh 1 MB bytes per read
        view = memoryview(buf)
        with self.path.open("rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                h.update(view[:n])
        return h.hexdigest()

    def iter_load(self, opts: LoadOptions) -> Iterator[Sample]:
        """Samples one line at a time, validated as they are read: a run starts sending
        while the rest of a large file is still being parsed (see run.py)."""
        if not self.path.is_file():
            raise UserError(f"data file {self.path} not found (jsonl:PATH needs an existing .jsonl file)")
        seen: set[str] = set()
        for lineno, row in iter_json_objects(self.path, hint='each line needs "id" and "prompt" or "messages"'):
            if opts.limit and len(seen) >= opts.limit:
                return
            where = f"{self.path}:{lineno}"
            sample = _sample(row, where)
            if sample.id in seen:
                raise UserError(f"{where}: duplicate id {sample.id!r}")
            seen.add(sample.id)
            if sample.metric:
                try:
                    metrics.get(sample.metric)
                except UserError as exc:
                    raise UserError(f"{where}: {exc}") from None
            yield sample
        if not seen:
            raise UserError(f"{self.path} holds no samples")

    async def score(self, samples: list[Sample], predictions: list[str], ctx: RunContext) -> list[SampleScore]:
        return [SampleScore(metrics.score(s.metric, pred, s.answers, s.meta) if s.metric and s.answers else None)
                for s, pred in zip(samples, predictions)]

    def aggregate(self, results: list[SampleResult], report: dict[str, object] | None = None) -> TaskScores:
        from ..estimators.intervals import intervals

        by_task = _scored_by_task(results)
        tasks = {t: 100 * sum(v) / len(v) for t, v in by_task.items()}
        return self.SCORES.of({"overall": sum(tasks.values()) / len(tasks) if tasks else None, "by_task": tasks,
                                "ci95": intervals(self.resampling_plan(results))})

    def resampling_plan(self, results: list[SampleResult]) -> Plan:
        """Each task a stratum of its scored samples; overall is the mean over tasks."""
        from ..estimators.intervals import Plan, mean_stratum

        return Plan({t: mean_stratum(v) for t, v in _scored_by_task(results).items()}, _scores_tree)


def _scored_by_task(results: list[SampleResult]) -> dict[str, list[float]]:
    by_task: dict[str, list[float]] = {}
    for r in results:
        if r.score is not None:
            by_task.setdefault(r.task, []).append(r.score)
    return by_task


def _scores_tree(by_task: Mapping[str, Any]) -> Tree:
    return {"overall": sum(by_task.values()) / len(by_task), "by_task": dict(by_task)}
