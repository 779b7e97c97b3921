"""Server-side rate limits of the simulator: RPM and TPM as continuous token buckets.

OpenAI documents that a per-minute limit is enforced in shorter windows (a 60,000 TPM
limit behaves like 1,000 tokens per second), so a burst of a whole minute's quota at once
is refused. We model each limit as a bucket that refills continuously at `limit / 60` per
second and holds at most `burst_s` seconds' worth. A request costs one request and
`prompt tokens + max_tokens` tokens, the way OpenAI counts `max_tokens` at admission.

A request costing more tokens than the bucket can ever hold would otherwise starve; it is
admitted once the bucket is full and leaves it in debt, which keeps the long-run rate at
the limit. A request costing more than a whole minute's TPM is refused for good, as
OpenAI does ("Request too large").

The header values report the bucket honestly: `remaining` is what could be spent right
now and `reset` is the time until the bucket is full again.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone


@dataclass
class TokenBucket:
    """A bucket of `capacity` units refilling at `rate` units per second."""

    rate: float
    capacity: float
    level: float = field(init=False)
    stamp: float = field(init=False)

    def __post_init__(self) -> None:
        self.level = self.capacity
        self.stamp = time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, cost: float) -> float:
        """Seconds until `cost` can be admitted (0 if now); requires a fresh `refill`."""
        need = min(cost, self.capacity) - self.level
        return 0.0 if need <= 1e-9 else need / self.rate

    def reset_in(self) -> float:
        """Seconds until the bucket is full again."""
        return max(0.0, (self.capacity - self.level) / self.rate)

    def remaining(self) -> int:
        return max(0, math.floor(self.level))


@dataclass
class Decision:
    """The outcome of one admission check, with what the headers need."""

    admitted: bool
    retry_after: float | None
    reason: str | None  # "requests" | "tokens" | "too_large" when refused
    snapshot: dict[str, float]


@dataclass
class RateLimiter:
    """RPM and TPM limits of one simulated server; `None` disables a limit."""

    rpm: int | None = None
    tpm: int | None = None
    burst_s: float = 1.0
    requests: TokenBucket | None = field(init=False, default=None)
    tokens: TokenBucket | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.rpm:
            self.requests = TokenBucket(self.rpm / 60.0, max(1.0, self.rpm * self.burst_s / 60.0))
        if self.tpm:
            self.tokens = TokenBucket(self.tpm / 60.0, max(1.0, self.tpm * self.burst_s / 60.0))

    @property
    def enabled(self) -> bool:
        return self.requests is not None or self.tokens is not None

    def admit(self, cost_tokens: int) -> Decision:
        """Charge one request of `cost_tokens` tokens, or say how long to wait."""
        now = time.monotonic()
        waits: list[tuple[float, str]] = []
        if self.requests is not None:
            self.requests.refill(now)
            waits.append((self.requests.wait_for(1), "requests"))
        if self.tokens is not None:
            self.tokens.refill(now)
            if self.tpm is not None and cost_tokens > self.tpm:
                return Decision(False, None, "too_large", self._snapshot())
            waits.append((self.tokens.wait_for(cost_tokens), "tokens"))
        wait, reason = max(waits, default=(0.0, ""))
        if wait > 0:
            return Decision(False, wait, reason, self._snapshot())
        if self.requests is not None:
            self.requests.level -= 1
        if self.tokens is not None:
            self.tokens.level -= cost_tokens
        return Decision(True, None, None, self._snapshot())

    def _snapshot(self) -> dict[str, float]:
        snap: dict[str, float] = {}
        if self.requests is not None and self.rpm:
            snap["limit_requests"] = self.rpm
            snap["remaining_requests"] = self.requests.remaining()
            snap["reset_requests"] = self.requests.reset_in()
        if self.tokens is not None and self.tpm:
            snap["limit_tokens"] = self.tpm
            snap["remaining_tokens"] = self.tokens.remaining()
            snap["reset_tokens"] = self.tokens.reset_in()
        return snap


def format_duration(seconds: float) -> str:
    """OpenAI's reset format: "20ms", "1s", "1.5s", "6m0s"."""
    if seconds < 1.0:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    if seconds < 60.0:
        text = f"{seconds:.3f}".rstrip("0").rstrip(".")
        return f"{text}s"
    minutes, rest = divmod(seconds, 60.0)
    return f"{int(minutes)}m{int(rest)}s"


def openai_headers(snap: dict[str, float]) -> dict[str, str]:
    """`x-ratelimit-*` headers as OpenAI sends them on every response."""
    headers: dict[str, str] = {}
    for kind in ("requests", "tokens"):
        if f"limit_{kind}" in snap:
            headers[f"x-ratelimit-limit-{kind}"] = str(int(snap[f"limit_{kind}"]))
            headers[f"x-ratelimit-remaining-{kind}"] = str(int(snap[f"remaining_{kind}"]))
            headers[f"x-ratelimit-reset-{kind}"] = format_duration(snap[f"reset_{kind}"])
    return headers


def _rfc3339_in(seconds: float) -> str:
    moment = datetime.fromtimestamp(time.time() + seconds, tz=timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def anthropic_headers(snap: dict[str, float]) -> dict[str, str]:
    """`anthropic-ratelimit-*` headers; Anthropic's reset is an RFC 3339 timestamp."""
    headers: dict[str, str] = {}
    for kind in ("requests", "tokens"):
        if f"limit_{kind}" in snap:
            headers[f"anthropic-ratelimit-{kind}-limit"] = str(int(snap[f"limit_{kind}"]))
            headers[f"anthropic-ratelimit-{kind}-remaining"] = str(int(snap[f"remaining_{kind}"]))
            headers[f"anthropic-ratelimit-{kind}-reset"] = _rfc3339_in(snap[f"reset_{kind}"])
    return headers


def retry_headers(retry_after: float) -> dict[str, str]:
    """`retry-after` in (fractional) seconds and `retry-after-ms`, as OpenAI sends them."""
    ms = max(1, math.ceil(retry_after * 1000))
    return {"retry-after": f"{ms / 1000:.3f}".rstrip("0").rstrip("."), "retry-after-ms": str(ms)}
