"""What a run reports: `RunSummary`, the typed summary that run.json serialises (and the
store keeps with the run), the terminal summary and the Python API read by attribute;
and the shape of the dry-run estimate (run/dry_run.py makes it).

run.json is `RunSummary.to_json()`: the same keys, in the same order, as it always had,
so runs stored by earlier versions read back (`RunSummary.from_json`) and users' scripts
keep working. Its scores are the benchmark's own score object (`Benchmark.SCORES`), made
JSON (`to_json`) only there and read back through the same type.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

from .atomic import write_text
from .benchmarks import score_type
from .benchmarks.scores import ScoreSet
from .ledger import (
    InvocationFigures,
    Ledger,
    SampleEntry,
    TaskFigures,
    UsageFlags,
    account,
    hint_for,
    next_step,
    partial_label,
)
from .percentiles import percentiles
from .providers.base import ModelSpec
from .secrets import redact_json
from .serving import Serving


@dataclass
class Latencies:
    """Latencies of this invocation's answers: fresh requests, and cache hits (a fully
    cached re-run shows the latencies measured when the answers were paid)."""

    fresh: list[float] = field(default_factory=list)
    cached: list[float] = field(default_factory=list)


class BudgetFigures(TypedDict, total=False):
    max_input_tokens: int | None
    max_total_tokens: int | None
    source: str


class Truncation(TypedDict, total=False):
    """How prompts were cut: the budget, the tokenizer, and how many were cut by how much."""

    max_input_tokens: int | None
    source: str
    budget: BudgetFigures
    tokenizer: str
    tokenizer_stand_in: bool
    official: dict[str, object]
    release_requests: dict[str, object]
    newline_stop: dict[str, object]  # the official newline rule as sent (prompt_rules/official_models.py)
    no_template_sent_as_chat: list[str]
    fitted: dict[str, object]  # cut below the budget to fit the server (run/prompting.py _fit)
    n_truncated: int
    tokens_removed: int


class LatencyFigures(TypedDict, total=False):
    p50: float | None
    p95: float | None
    p99: float | None
    source: str


class Failure(TypedDict, total=False):
    sample_id: str
    task: str
    status: str
    error: str | None
    hint: str


class FailureGroup(TypedDict):
    """Every failure with one (status, error): 50,000 requests pending in a batch are one line."""

    status: str
    error: str | None
    n: int
    sample_ids: list[str]


class ExcludedSample(TypedDict):
    sample_id: str
    task: str
    reason: str | None


class Excluded(TypedDict, total=False):
    n: int
    by_reason: dict[str, int]
    samples: list[ExcludedSample]


@dataclass(frozen=True)
class RunSummary:
    """One run as run.json has it: the ledger's figures (every invocation's), how this
    invocation went, and the scores. An interrupted invocation's summary (`interrupted`)
    has the ledger's figures only: scores need every sample."""

    run_id: str
    benchmark: str
    model: str
    endpoint: str
    complete: bool
    samples: dict[str, int]
    by_task: dict[str, TaskFigures]
    cost_usd: dict[str, float]
    tokens: dict[str, dict[str, int]]
    invocations: list[InvocationFigures]
    this_invocation: InvocationFigures
    partial: str | None
    next_step: str | None
    scores: ScoreSet | None  # the benchmark's score type; None: an interrupted invocation
    started_at: str | None = None
    wall_s: float | None = None
    unpriced: list[str] = field(default_factory=list)  # models whose cost is unknown: their dollars read 0
    prices_version: str | None = None
    latency_ms: LatencyFigures = field(default_factory=lambda: LatencyFigures())
    throughput_rps: float | None = None
    truncation: Truncation = field(default_factory=lambda: Truncation())
    endpoints: list[dict[str, object]] = field(default_factory=list)
    backend: dict[str, object] = field(default_factory=dict)
    aborted: str | None = None
    failures: list[Failure] = field(default_factory=list)
    failure_groups: list[FailureGroup] | None = None  # None: a run.json from before failures were grouped
    hints: list[str] = field(default_factory=list)
    excluded: Excluded = field(default_factory=lambda: Excluded())
    prepare: dict[str, object] = field(default_factory=dict)
    interrupted: bool = False
    samples_so_far: int | None = None  # interrupted: samples the ledger has seen
    out_dir: str | None = None  # where run.json was written (not part of it)
    # answers whose usage the server claimed out of bounds, booked at our bound (claims.py)
    usage_flags: UsageFlags = field(default_factory=lambda: UsageFlags(answers=0, listed=[]))
    # serving latency (TTFT, TPOT, ITL, e2e, throughputs) per run and context-length bin
    # (serving.py); {} in a run.json from before it was kept
    serving: Serving = field(default_factory=lambda: Serving())

    def to_json(self) -> dict[str, object]:
        """run.json's content (JSON-shaped; `write_out` writes it)."""
        head: dict[str, object] = {"run_id": self.run_id, "benchmark": self.benchmark, "model": self.model,
                                   "endpoint": self.endpoint}
        figures: dict[str, object] = {"complete": self.complete, "samples": self.samples, "by_task": self.by_task,
                                      "cost_usd": self.cost_usd, "tokens": self.tokens,
                                      "usage_flags": self.usage_flags, "invocations": self.invocations}
        if self.interrupted:
            return {**head, "interrupted": True, **figures, "samples_so_far": self.samples_so_far,
                    "this_invocation": self.this_invocation, "partial": self.partial, "next_step": self.next_step,
                    "scores": self._scores_json()}
        return {
            **head, "started_at": self.started_at, "wall_s": self.wall_s, **figures,
            "partial": self.partial, "this_invocation": self.this_invocation, "unpriced": self.unpriced,
            "prices_version": self.prices_version, "latency_ms": self.latency_ms,
            "throughput_rps": self.throughput_rps, "serving": self.serving, "truncation": self.truncation, "endpoints": self.endpoints,
            "backend": self.backend, "aborted": self.aborted, "failures": self.failures,
            "failure_groups": self.failure_groups, "hints": self.hints, "next_step": self.next_step,
            "excluded": self.excluded, "prepare": self.prepare, "scores": self._scores_json(),
        }

    def _scores_json(self) -> dict[str, object] | None:
        return self.scores.to_json() if self.scores is not None else None

    @classmethod
    def from_json(cls, data: str | bytes | Mapping[str, object]) -> RunSummary:
        """A summary from run.json's text or its parsed content (a stored run, any version)."""
        raw: Any = json.loads(data) if isinstance(data, (str, bytes)) else data
        invocations = raw.get("invocations") or []
        return cls(
            run_id=raw["run_id"], benchmark=raw["benchmark"], model=raw["model"], endpoint=raw.get("endpoint", ""),
            complete=bool(raw.get("complete")), samples=raw.get("samples") or {}, by_task=raw.get("by_task") or {},
            cost_usd=raw.get("cost_usd") or {}, tokens=raw.get("tokens") or {}, invocations=invocations,
            this_invocation=_block(raw, "this_invocation", invocations[-1] if invocations else {}),
            partial=raw.get("partial"), next_step=raw.get("next_step"), scores=_scores(raw),
            started_at=raw.get("started_at"), wall_s=raw.get("wall_s"), unpriced=raw.get("unpriced") or [],
            prices_version=raw.get("prices_version"), latency_ms=_block(raw, "latency_ms"),
            throughput_rps=raw.get("throughput_rps"), truncation=_block(raw, "truncation"),
            endpoints=raw.get("endpoints") or [], backend=raw.get("backend") or {}, aborted=raw.get("aborted"),
            failures=raw.get("failures") or [], failure_groups=raw.get("failure_groups"),
            hints=raw.get("hints") or [], excluded=_block(raw, "excluded"), prepare=raw.get("prepare") or {},
            interrupted=bool(raw.get("interrupted")), samples_so_far=raw.get("samples_so_far"),
            out_dir=raw.get("out_dir"), usage_flags=_block(raw, "usage_flags", {"answers": 0, "listed": []}),
            serving=_block(raw, "serving"))

    def redacted(self) -> RunSummary:
        """The same summary with every string redacted (URL user-info, keys echoed back)."""
        return replace(RunSummary.from_json(redact_json(self.to_json())), out_dir=self.out_dir)


def _scores(raw: Any) -> ScoreSet | None:
    """A stored run's scores, read through its benchmark's score type (None: none)."""
    scores = raw.get("scores")
    return score_type(raw["benchmark"]).from_json(scores) if scores is not None else None


def _block(raw: Any, key: str, default: object = None) -> Any:
    """A JSON object of a stored summary (`default`, else {}, where it is missing or empty)."""
    return raw.get(key) or (default if default is not None else {})


@dataclass(frozen=True)
class Closing:
    """What the end of an invocation knows besides the ledger: its answers' latencies,
    the runner's report, the scores and prepare's report, and how prompts were cut."""

    latencies: Latencies
    endpoints: list[dict[str, object]]
    backend: dict[str, object]
    aborted: str | None
    scores: ScoreSet
    prepare: dict[str, object]
    truncated: dict[str, int]
    limits: Mapping[str, object]
    prices_version: str
    unpriced: list[str]
    serving: Serving | None = None  # the run's serving latency (serving.py), read from the store


def run_summary(benchmark: str, run_id: str, spec: ModelSpec, ledger: Ledger, unsettled: list[SampleEntry],
                excluded: list[SampleEntry], closing: Closing) -> RunSummary:
    """The summary of a finished invocation: the ledger's figures (ledger.account: samples
    by status, cost and tokens by purpose, by task, every invocation), then how this
    invocation went, then scores."""
    figures = account(ledger)
    this: InvocationFigures = figures["invocations"][-1]
    values = closing.latencies.fresh or closing.latencies.cached
    latency: Any = {**percentiles(values), "source": "requests" if closing.latencies.fresh else "cache"}
    uncut = "release_requests" in closing.limits  # sent uncut as the release sends them: no --max-input-tokens
    failures = failures_of(unsettled, uncut)
    return RunSummary(
        run_id=run_id, benchmark=benchmark, model=spec.label, endpoint=spec.endpoint_id,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(this["started_at"])), wall_s=this["wall_s"],
        complete=figures["complete"], samples=figures["samples"], by_task=figures["by_task"],
        cost_usd=figures["cost_usd"], tokens=figures["tokens"], invocations=figures["invocations"],
        usage_flags=figures["usage_flags"],
        partial=partial_label(figures["samples"]) or None, this_invocation=this, unpriced=closing.unpriced,
        prices_version=closing.prices_version,
        latency_ms=latency, serving=closing.serving or Serving(),
        throughput_rps=round(this["requests"] / this["wall_s"], 2) if this["wall_s"] > 0 else None,
        truncation=_truncation(closing.limits, closing.truncated), endpoints=closing.endpoints,
        backend=closing.backend, aborted=closing.aborted, failures=failures[:50],
        failure_groups=_grouped(failures), hints=sorted({f["hint"] for f in failures if "hint" in f}),
        next_step=next_step(unsettled, uncut),  # None: complete
        excluded=excluded_block(excluded), prepare=closing.prepare, scores=closing.scores)


def interrupted_summary(benchmark: str, run_id: str, spec: ModelSpec, ledger: Ledger,
                        samples_so_far: int) -> RunSummary:
    """The summary of an invocation that did not finish: the ledger's figures, no scores."""
    figures = account(ledger)
    return RunSummary(
        run_id=run_id, benchmark=benchmark, model=spec.label, endpoint=spec.endpoint_id, interrupted=True,
        complete=False, samples=figures["samples"], by_task=figures["by_task"], cost_usd=figures["cost_usd"],
        tokens=figures["tokens"], invocations=figures["invocations"], samples_so_far=samples_so_far,
        usage_flags=figures["usage_flags"],
        this_invocation=figures["invocations"][-1], partial="interrupted",
        next_step=f"continue it with `asyncbench run --resume {run_id}` (or the same command)", scores=None)


def _truncation(limits: Mapping[str, object], truncated: dict[str, int]) -> Truncation:
    """The budget's input limit at the top level too: what report labels and tests read."""
    block: Any = {**limits}
    budget = block["budget"]
    out: Any = {"max_input_tokens": budget["max_input_tokens"], "source": budget["source"], **block,
                "n_truncated": len(truncated), "tokens_removed": sum(truncated.values())}
    typed: Truncation = out
    return typed


def failures_of(unsettled: list[SampleEntry], uncut: bool = False) -> list[Failure]:
    """The unsettled samples, each with what to do about it where there is a hint
    (`uncut`: prompts sent uncut, ledger.hint_for)."""
    out: list[Failure] = []
    for e in unsettled:
        failure: Failure = {"sample_id": e.sample_id, "task": e.task, "status": e.status, "error": e.error}
        if (h := hint_for(e.status, e.error, uncut)) is not None:
            failure["hint"] = h
        out.append(failure)
    return out


def _grouped(failures: list[Failure]) -> list[FailureGroup]:
    groups: dict[tuple[str, str], FailureGroup] = {}
    for f in failures:
        group = groups.setdefault((f["status"], f["error"] or ""), {"status": f["status"], "error": f["error"],
                                                                   "n": 0, "sample_ids": []})
        group["n"] += 1
        if len(group["sample_ids"]) < 3:
            group["sample_ids"].append(f["sample_id"])
    return list(groups.values())


def excluded_block(excluded: list[SampleEntry], listed: int = 50) -> Excluded:
    """The excluded samples with their reasons: counted by reason, the first `listed` named."""
    by_reason: dict[str, int] = {}
    for e in excluded:
        by_reason[e.error or "-"] = by_reason.get(e.error or "-", 0) + 1
    return {"n": len(excluded), "by_reason": by_reason,
            "samples": [{"sample_id": e.sample_id, "task": e.task, "reason": e.error} for e in excluded[:listed]]}


def write_out(out: Path, summary: RunSummary) -> RunSummary:
    """Write run.json into the folder `plan.out_dir` made and checked before the run; the
    summary that says where."""
    write_text(out / "run.json", json.dumps(summary.to_json(), indent=2, ensure_ascii=False, default=_json_default))
    return replace(summary, out_dir=str(out))


def _json_default(o: object) -> object:
    if isinstance(o, float) and math.isnan(o):
        return None
    tolist = getattr(o, "tolist", None)  # numpy values in a benchmark's scores
    if tolist is not None:
        result: object = tolist()
        return result
    return str(o)


# -- the dry run ---------------------------------------------------------------------------

class PurposeEstimate(TypedDict, total=False):
    """One purpose's requests, tokens and dollars, "exact" or an "upper bound"."""

    requests: int
    prompt_tokens: int
    max_output_tokens: int
    cost_usd: float | str
    cached: int
    estimate: str
    cost_usd_by_mode: dict[str, float | int | str]


class JudgeNote(TypedDict):
    """The judge a dry run priced (`model`), or why the run needs one it was not given
    (`why`, with the judge calls it counted but did not price)."""

    model: str | None
    needed: bool
    unpriced_calls: PurposeEstimate | None
    why: str | None


class DryRunTotals(TypedDict):
    """The dry run's totals, each over every purpose (eval, judge, prior)."""

    estimated_requests: int
    estimated_prompt_tokens: int
    estimated_max_output_tokens: int
    estimated_cost_usd: float | str
    estimate: str


class DryRunSummary(DryRunTotals):
    """What a run would send and cost (`run --dry-run`; `--json` prints it)."""

    run_id: str
    benchmark: str
    model: str
    dry_run: bool
    n_samples: int
    requests: int
    cached: int
    to_send: int
    left_out_as_stored: int
    cache_checked: bool
    by_purpose: dict[str, PurposeEstimate]
    judge: JudgeNote | None  # a benchmark scored by a judge, or a --judge given
    token_counting: str
    truncation: dict[str, object]
