"""The rows the store keeps, typed: what callers hand it and what they read back.

Column tuples name the table columns in the order the columnar inserts fill them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple, TypedDict

from ..errors import ErrorKind
from ..types import SampleResult

RESPONSE_COLUMNS = ("key", "provider", "model", "endpoint", "request_json", "text", "finish_reason",
                    "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "latency_ms",
                    "cost_usd", "served_by", "created_at", "cache_write_tokens", "usage_flag", "sent_at", "ttft_ms",
                    "itl_ms")
RESULT_COLUMNS = ("run_id", "sample_id", "task", "purpose", "key", "status", "score", "prediction",
                  "cached", "error", "prompt_tokens", "completion_tokens", "cached_prompt_tokens",
                  "cost_usd", "latency_ms", "truncated_tokens", "meta_json", "invocation", "references_json")
LEDGER_COLUMNS = ("invocation", "purpose", "task", "source", "key", "sample_id", "prompt_tokens", "completion_tokens",
                  "cached_prompt_tokens", "cost_usd", "saved_usd", "latency_ms", "attempts", "cache_write_tokens",
                  "usage_flag", "sent_at", "ttft_ms")
INVOCATION_COLUMNS = ("invocation", "started_at", "wall_s", "requests", "retries", "rate_limited", "transient_errors",
                      "complete", "finished", "pid", "host")
RUN_COLUMNS = ("run_id", "benchmark", "model", "started_at", "finished_at", "status", "summary_json")
BATCH_COLUMNS = ("batch_id", "run_id", "provider", "model", "n_requests", "state", "counts_json", "submitted_at",
                 "updated_at", "collected")


class ResponseRow(TypedDict):
    """One answer as the cache stores it (the prompt itself only as its size)."""

    key: str
    provider: str
    model: str
    endpoint: str
    request_json: str
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    latency_ms: float
    cost_usd: float
    served_by: str
    created_at: float
    cache_write_tokens: int  # written to the provider's prompt cache (Anthropic; part of prompt_tokens)
    usage_flag: str | None  # the server's usage out of bounds, booked at our bound (claims.py)
    # when it was sent (epoch s), its time to first token, its inter-token gaps (types.Timing);
    # None: not measured (a batch result; TTFT and gaps of an unstreamed answer)
    sent_at: float | None
    ttft_ms: float | None
    itl_ms: list[float] | None


class FailureRow(TypedDict):
    """One request that failed after its attempts (never served as an answer)."""

    key: str
    run_id: str
    sample_id: str | None
    kind: ErrorKind
    status: int | None
    message: str
    attempts: int


@dataclass
class CachedResponse:
    """A stored answer, as a lookup serves it."""

    key: str
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    latency_ms: float
    cost_usd: float
    cache_write_tokens: int = 0
    usage_flag: str | None = None


@dataclass
class ResultRow:
    """One sample of a run (the sample ledger, `results`): its status and, when it was
    scored, its answer and score. A sample never sent has no answer columns (NULL)."""

    run_id: str
    sample_id: str
    task: str
    purpose: str
    key: str | None = None
    status: str | None = None
    score: float | None = None
    prediction: str | None = None
    cached: bool | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None
    truncated_tokens: int | None = None
    meta_json: str | None = None
    invocation: int | None = None
    references_json: str | None = None

    @classmethod
    def scored(cls, run_id: str, r: SampleResult, status: str, invocation: int) -> ResultRow:
        """A scored sample with the run's status for it (ledger.merge_sample)."""
        return cls(run_id, r.sample_id, r.task, "eval", r.key, status, r.score, r.prediction, r.cached, r.error,
                   r.prompt_tokens, r.completion_tokens, r.cached_prompt_tokens, r.cost_usd, r.latency_ms,
                   r.truncated_tokens, json.dumps(r.stored_meta(), default=str, ensure_ascii=False), invocation,
                   json.dumps(r.references, ensure_ascii=False))

    @classmethod
    def excluded(cls, run_id: str, sample_id: str, task: str, reason: str, invocation: int) -> ResultRow:
        """A sample that never became a request, with the reason it was left out."""
        return cls(run_id, sample_id, task, "eval", status="excluded", error=reason, invocation=invocation,
                   meta_json="{}")


@dataclass
class RunRow:
    """One run as `runs` keeps it; `summary_json` is run.json's text (None until the
    first invocation finishes)."""

    run_id: str
    benchmark: str
    model: str
    started_at: float | None
    finished_at: float | None
    status: str
    summary_json: str | None


@dataclass
class BatchRow:
    """One provider batch and its last known state (`counts_json`: the provider's counts)."""

    batch_id: str
    run_id: str
    provider: str
    model: str
    n_requests: int
    state: str
    counts_json: str
    submitted_at: float
    updated_at: float
    collected: bool


class ModelStats(TypedDict):
    responses: int
    cost_usd: float


class CacheStats(TypedDict):
    """What `asyncbench cache stats` prints."""

    path: str
    schema_version: int
    responses: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    failures: int
    runs: int
    by_model: dict[str, ModelStats]


class SampleRow(NamedTuple):
    """One sample of a run joined with its prompt, what the run paid for it and the
    sample whose answer it shares (report/samples.SampleRecord parses it)."""

    run_id: str
    sample_id: str
    task: str
    status: str
    score: float | None
    prediction: str | None
    meta_json: str | None
    references_json: str | None
    prompt: str | None
    prompt_tokens: int
    completion_tokens: int
    usd: float
    cached_usd: float
    latency_ms: float | None
    attempts: int
    truncated_tokens: int
    error: str | None
    key: str | None
    shared_with: str | None
    usage_flag: str | None  # the server's usage out of bounds, booked at our bound (claims.py)
    cached_prompt_tokens: int
    ttft_ms: float | None  # the run's own measurement of the sample's answer (types.Timing)
    e2e_ms: float | None
    itl_ms: list[float] | None
    timing: str | None  # streamed, unstreamed, batch, cache hit, not measured (None: no answer)
