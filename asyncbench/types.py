"""Plain dataclasses that flow through the pipeline (see DESIGN.md's data flow)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from .errors import StrEnum

# The closed choices of a run, one typed value each. RunConfig.validate checks the
# user-facing ones where a config is made (a misspelt one is an error, never a silent
# default: `api="completions"` once sent chat), and mypy checks every comparison against
# them. Plain strings, so run.json, run ids and the cache keep the values they always had.
ApiKind = Literal["chat", "completion"]  # the endpoint: chat, or completion for base models
Backend = Literal["local", "ray"]  # where requests and scoring run (runners/)
BatchFallback = Literal["batch", "live"]  # a request a batch did not answer goes to the next batch, or live
PromptCacheMode = Literal["auto", "off"]  # mark shared prompt prefixes for the provider's cache, or not
StreamMode = Literal["on", "off"]  # live answers streamed (timed: TTFT, TPOT), or whole
Purpose = Literal["eval", "judge", "prior"]  # what a request is for (ledger.py)


class SampleStatus(StrEnum):
    """A sample's one status, from the moment its request is settled to the stored row
    and the samples export (a StrEnum: stored and exported as the same strings as ever).
    The first four are settled (its score counts); the rest leave its task, and so the
    run, partial. answered: a request was sent for it in this run; from_cache: its answer
    was stored before this run; shared: the same request as another sample of this run
    (sent once); excluded: left out, with its reason in the row's error (a malformed data
    row, or the benchmark's own rule); failed: no answer after the retries, or scoring it
    failed (retried on resume); skipped_budget: not sent, --max-cost reached."""

    ANSWERED = "answered"
    FROM_CACHE = "from_cache"
    SHARED = "shared"
    EXCLUDED = "excluded"
    FAILED = "failed"
    SKIPPED_BUDGET = "skipped_budget"

    @property
    def settled(self) -> bool:
        return self in _SETTLED

    @property
    def has_answer(self) -> bool:
        """Whether the sample has the model's answer (sent now, cached, or a twin's)."""
        return self in _ANSWERED


_SETTLED = frozenset({SampleStatus.ANSWERED, SampleStatus.FROM_CACHE, SampleStatus.SHARED, SampleStatus.EXCLUDED})
_ANSWERED = frozenset({SampleStatus.ANSWERED, SampleStatus.FROM_CACHE, SampleStatus.SHARED})


class RequestSource(StrEnum):
    """What became of one request: sent and answered, served from the cache, the same as
    an earlier request of the same call (sent once), failed after its attempts, not sent
    (--max-cost reached). Stored in the ledger's request rows as these strings."""

    SENT = "sent"
    FROM_CACHE = "from_cache"
    SHARED = "shared"
    FAILED = "failed"
    SKIPPED_BUDGET = "skipped_budget"

    def sample_status(self) -> SampleStatus:
        """The status of the sample this request was made for."""
        return SampleStatus(self.value) if self is not RequestSource.SENT else SampleStatus.ANSWERED


class _Unset(Enum):
    UNSET = "unset"


UNSET = _Unset.UNSET  # a SampleScore's `parsed` where the metric reads the answer whole
JudgeCall = dict[str, object]  # one judge call as the per-sample view shows it (metrics/judge.py)
Parsed = str | bool | list[int] | None  # the answer as the metric read it (None: nothing it could read)


@dataclass(frozen=True, slots=True)
class SampleScore:
    """What a benchmark's `score` makes of one prediction: `value` in [0, 1] (None where
    no score could be made), the answer as the metric read it (`parsed`; UNSET where the
    metric reads the answer whole), the judge calls that scored it, the verdict of a
    program run on it, and `error`: scoring itself failed (a sandbox that could not run
    the program), never the model's fault, so the sample is failed and retried on resume.

    The run path reads it into the SampleResult; the per-sample view finds the parsed
    answer, judge calls, verdict and error in the stored row's meta (`stored_meta`),
    under the keys they have always had there."""

    value: float | None
    parsed: Parsed | _Unset = UNSET
    judge: tuple[JudgeCall, ...] | None = None
    verdict: str | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        """Scoring failed (not the answer): the sample is failed, and scored again on resume."""
        return self.value is None and bool(self.error)

    def stored_meta(self) -> dict[str, object]:
        """The score's part of the stored row's meta, in the order it was always written."""
        out: dict[str, object] = {}
        if self.parsed is not UNSET:
            out["parsed"] = self.parsed
        if self.judge is not None:
            out["judge"] = list(self.judge)
        if self.verdict is not None:
            out["verdict"] = self.verdict
        if self.error is not None:
            out["score_error"] = self.error
        return out


@dataclass
class Sample:
    """One benchmark item before it becomes a request.

    `prompt` is the filled template (not yet truncated). `chat` says whether an official
    implementation wraps it in the model's chat template (LongBench: not for few-shot and
    code tasks); chat-only APIs get one plain user message either way. `meta` carries
    whatever the metric needs (all_classes, length, language, the BAMBOO row...): input
    only, written where samples are built (loaders; tests/test_architecture.py holds
    every other module to it). What scoring finds travels back as a SampleScore.
    """

    id: str
    task: str
    prompt: str | None = None
    messages: list[dict[str, str]] | None = None
    answers: list[str] = field(default_factory=list)
    max_tokens: int = 128
    metric: str | None = None
    chat: bool = True
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Request:
    """The exact thing sent to an endpoint. Its cache key covers everything that changes
    the answer, and nothing that does not (credentials, timeouts, concurrency)."""

    provider: str
    model: str
    endpoint_id: str
    prompt: str | None = None
    messages: list[dict[str, str]] | None = None
    max_tokens: int = 128
    temperature: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)
    repeat: int = 0
    # the task a judge or prior request is made for: booked in the ledger, not in the key
    task: str | None = field(default=None, compare=False)
    # --prompt-cache: the length (characters) of the prompt's prefix shared with other
    # requests of the run, marked for the provider's prompt cache (prompt_cache.py); not
    # in the key, as it does not change the answer
    cache_prefix: int = field(default=0, compare=False)
    # ... and its group among the run's requests (-1: none): the engine sends a group's
    # first request alone and the rest once it is answered (the prefix is cached then)
    cache_group: int = field(default=-1, compare=False)
    _key: str | None = field(default=None, repr=False, compare=False)
    _hashed: str | None = field(default=None, repr=False, compare=False)

    def canonical(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "endpoint": self.endpoint_id,
            "prompt": self.prompt,
            "messages": self.messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "params": self.params,
            "repeat": self.repeat,
        }

    def key(self) -> str:
        """sha256 of the canonical request, computed once. The (long) prompt enters as its
        own sha256 — hashing its UTF-8 bytes is several times cheaper than JSON-escaping
        tens of kilobytes — and everything else as canonical JSON."""
        if self._key is None:
            canonical = self.canonical()
            prompt, messages = canonical.pop("prompt"), canonical.pop("messages")
            canonical["prompt_sha256"] = None if prompt is None else hashlib.sha256(prompt.encode("utf-8")).hexdigest()
            canonical["messages_sha256"] = None if messages is None else hashlib.sha256(
                "".join(f"{len(str(m.get('role')))}:{m.get('role')}{len(str(m.get('content')))}:{m.get('content')}"
                        for m in messages).encode("utf-8")).hexdigest()
            blob = json.dumps(canonical, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            self._key, self._hashed = hashlib.sha256(blob.encode("utf-8")).hexdigest(), blob
        return self._key

    def hashed_json(self) -> str:
        """The canonical request exactly as `key()` hashes it (the prompt and messages by
        their sha256): the store keeps it as the answer's `request_json`, so the sha256 of
        that text is the row's key, which anyone can check, and an answer does not pay a
        second canonical JSON encoding."""
        self.key()
        assert self._hashed is not None
        return self._hashed

    def text(self) -> str:
        """All prompt text, for token counting."""
        if self.prompt is not None:
            return self.prompt
        return "\n".join(m.get("content", "") for m in self.messages or [])


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # read from the provider's prompt cache (part of prompt_tokens)
    cache_write_tokens: int = 0  # written to it (Anthropic; part of prompt_tokens, billed 1.25x)


@dataclass(slots=True)
class Timing:
    """When one streamed answer came (providers/stream_reply.py), as the serving benchmarks
    define it (AIPerf's metrics reference): `ttft_ms`, the time from sending the request to
    its first non-empty piece of content; `itl_ms`, the gaps between each later piece and
    the one before it (vLLM benchmark_serving's ITL list). End-to-end is the answer's
    `latency_ms`; TPOT = (e2e - TTFT) / (output tokens - 1) is derived (serving.py).
    `sent_at`: the wall clock (epoch s) when it was sent, for the run's active time.
    An answer that was not streamed has `ttft_ms` None; a cache hit or a batch result
    has no Timing at all: never a 0 standing for "not measured"."""

    sent_at: float
    ttft_ms: float | None = None
    itl_ms: list[float] = field(default_factory=list)


@dataclass
class Response:
    """What came back from one successful call."""

    text: str
    usage: Usage
    latency_ms: float
    finish_reason: str | None = None
    endpoint: str = ""
    # Parsed rate-limit state from response headers (see limits.parse_ratelimit_headers).
    ratelimit: dict[str, float] = field(default_factory=dict)
    # the share of the price paid: the provider's batch discount for an answer that came
    # through its batch API (runners/batch.py), 1.0 for a live one
    discount: float = 1.0
    # what of the server's usage was out of bounds and booked at our bound (claims.py);
    # None: its usage was booked as reported
    usage_flag: str | None = None
    # when it came (a live call); None: a cache hit, a batch result
    timing: Timing | None = None


@dataclass(slots=True)
class SampleResult:
    """A scored sample, as stored per run and aggregated into a report (slots: a streamed
    run keeps one per sample until its aggregate, ~100 bytes less each)."""

    sample_id: str
    task: str
    status: SampleStatus
    prediction: str | None = None
    score: float | None = None
    cached: bool = False
    key: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float | None = None
    truncated_tokens: int = 0
    meta: dict[str, Any] = field(default_factory=dict)  # the sample's (input only)
    # the sample's reference answers (in memory, for aggregates that rescore)
    references: list[str] = field(default_factory=list)
    # what the benchmark's score made of the answer beyond `score` (parsed, judge, error)
    scored: SampleScore | None = None

    def stored_meta(self) -> dict[str, object]:
        """The meta the sample's stored row keeps: the sample's, then what scoring found."""
        return self.meta if self.scored is None else {**self.meta, **self.scored.stored_meta()}
