"""Client-side rate limiting: requests-per-minute AND tokens-per-minute buckets, adaptive
from the rate-limit headers endpoints send back.

Both buckets refill continuously at limit/60 per second and hold `burst_s` seconds'
worth (OpenAI documents that per-minute limits are enforced in shorter windows, so a full
minute's burst would be refused). A request larger than the bucket may still go once
the bucket is full; the bucket then goes into debt, which later requests wait out — the
long-run rate stays exact and a big request is never starved.

A 429's Retry-After pauses the whole endpoint, not just one request: every other request
would hit the same wall.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import anyio

# Stay a hair under a known limit: client and server clocks start at different instants.
SAFETY = 0.98
# The longest pause a server's Retry-After (or reset header) can impose. Per-minute limits
# clear within a minute; a larger value is a server asking for more than any limit needs
# ("Retry-After: 1e9" once paused a run for ever), so it is cut to this.
MAX_RETRY_AFTER_S = 60.0


class TokenBucket:
    """A continuous-refill bucket that may go into debt for oversized requests."""

    def __init__(self, per_minute: float, burst_s: float = 1.0) -> None:
        self.set_rate(per_minute, burst_s)
        self.level = self.capacity
        self.stamp = time.monotonic()

    def set_rate(self, per_minute: float, burst_s: float = 1.0) -> None:
        self.per_minute = per_minute
        self.rate = per_minute * SAFETY / 60.0
        self.capacity = max(self.rate * burst_s, 1.0)

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_time(self, cost: float, now: float) -> float:
        """Seconds until `cost` may be taken (0 if now)."""
        self.refill(now)
        need = min(cost, self.capacity)
        if self.level >= need:
            return 0.0
        return (need - self.level) / self.rate

    def take(self, cost: float) -> None:
        self.level -= cost


def _bounded(seconds: float) -> float | None:
    """A wait a server asked for, within [0, MAX_RETRY_AFTER_S]; None for NaN (not a wait)."""
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _asked(seconds: float) -> float | None:
    """A Retry-After's wait, cut to MAX_RETRY_AFTER_S; None (absent: the scheduler's own
    back-off applies) for NaN and for one that asks for no wait at all. `Retry-After: 0`,
    a negative one or a date in the past would otherwise switch the back-off off: 1,170
    requests for 20 samples against a server answering every one so (issue 35)."""
    if math.isnan(seconds) or seconds <= 0:
        return None
    return min(seconds, MAX_RETRY_AFTER_S)


def _parse_duration(value: str) -> float | None:
    """OpenAI's reset format: '1s', '6m0s', '20ms', '1h2m3.5s', or plain seconds; the
    whole value must be in that form ('soon', '5 minutes' are not durations)."""
    value = value.strip()
    try:
        seconds = float(value)
        return None if not math.isfinite(seconds) else max(seconds, 0.0)
    except ValueError:
        pass
    if not re.fullmatch(r"(?:[0-9]*\.?[0-9]+(?:ms|h|m|s))+", value):
        return None
    total = 0.0
    for num, unit in re.findall(r"([0-9]*\.?[0-9]+)(ms|h|m|s)", value):
        total += float(num) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]
    return total


def _parse_reset_timestamp(value: str) -> float | None:
    """Anthropic's reset format: an RFC 3339 timestamp; returns seconds from now."""
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return max(0.0, when.timestamp() - time.time())
    except (ValueError, OverflowError, OSError):
        return _parse_duration(value)


# (what it is, OpenAI's header, Anthropic's header), named once: every answer is read
_COUNT_HEADERS = tuple((f"{field_}_{kind}", f"x-ratelimit-{field_}-{kind}", f"anthropic-ratelimit-{kind}-{field_}")
                       for kind in ("requests", "tokens") for field_ in ("limit", "remaining"))
_RESET_HEADERS = tuple((f"reset_{kind}", f"x-ratelimit-reset-{kind}", f"anthropic-ratelimit-{kind}-reset")
                       for kind in ("requests", "tokens"))


def parse_ratelimit_headers(headers: Mapping[str, str]) -> dict[str, float]:
    """Normalise OpenAI `x-ratelimit-*`, Anthropic `anthropic-ratelimit-*` and
    `retry-after(-ms)` headers into {limit_requests, remaining_requests, reset_requests,
    limit_tokens, remaining_tokens, reset_tokens, retry_after} (seconds for times).

    Waits are cut to MAX_RETRY_AFTER_S; a value that is none of the documented forms
    (delay-seconds or an HTTP-date for Retry-After, RFC 9110 10.2.3) counts as absent."""
    out: dict[str, float] = {}
    get = headers.get
    for name, oa, an in _COUNT_HEADERS:
        raw = get(oa) or get(an)
        if raw is not None:
            try:
                out[name] = float(raw)
            except ValueError:
                pass
    for name, oa, an in _RESET_HEADERS:
        raw = get(oa)
        parsed = _parse_duration(raw) if raw is not None else None
        if parsed is None:
            raw = get(an)
            parsed = _parse_reset_timestamp(raw) if raw is not None else None
        if parsed is not None:
            out[name] = parsed
    ms = get("retry-after-ms")
    if ms is not None:
        try:
            if (wait := _asked(float(ms) / 1000.0)) is not None:
                out["retry_after"] = wait
        except ValueError:
            pass
    raw_after = get("retry-after")
    if "retry_after" not in out and raw_after is not None:
        if (wait := parse_retry_after(raw_after)) is not None:
            out["retry_after"] = wait
    return out


def parse_retry_after(value: str) -> float | None:
    """Retry-After as seconds from now: delay-seconds or an HTTP-date (RFC 9110 10.2.3),
    cut to MAX_RETRY_AFTER_S; None when it is neither, or asks for no wait (0, a date
    past)."""
    value = value.strip()
    if re.fullmatch(r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?", value):
        return _asked(float(value))
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # an HTTP-date is always GMT
        from datetime import timezone

        when = when.replace(tzinfo=timezone.utc)
    return _asked(when.timestamp() - time.time())


@dataclass
class LimitStats:
    waited_s: float = 0.0
    pauses: int = 0


class Limiter(Protocol):
    """What the scheduler needs of a limiter: this process's RateLimiter, or the Ray
    runner's proxy to a limiter actor shared by every worker."""

    async def acquire(self, tokens: int) -> None: ...

    def free(self) -> bool:
        """Nothing could make a request wait now (no limit, no pause): the scheduler then
        skips `acquire` and the cancel scope around it (per-request CPU, issue 27)."""
        ...

    def pause(self, seconds: float) -> None: ...

    def observe(self, info: dict[str, float]) -> None: ...


class RateLimiter:
    """RPM + TPM limits for one endpoint group (one API key / one server fleet).

    Configured limits (`--rpm`, `--tpm`) are used as given. Unknown limits are learned
    from response headers (`x-ratelimit-limit-*`); a `remaining == 0` header or a 429
    pauses sending until the advertised reset.
    """

    def __init__(self, rpm: float | None = None, tpm: float | None = None, burst_s: float = 1.0) -> None:
        self.burst_s = burst_s
        self.configured_rpm = rpm
        self.configured_tpm = tpm
        self.requests = TokenBucket(rpm, burst_s) if rpm else None
        self.tokens = TokenBucket(tpm, burst_s) if tpm else None
        self.paused_until = 0.0
        self.stats = LimitStats()
        self._lock = anyio.Lock()

    async def acquire(self, tokens: int) -> None:
        """Wait until one request of `tokens` tokens may be sent, then charge it.

        Callers queue on a lock so tokens are granted in arrival order (FIFO): a large
        request is not overtaken forever by small ones. With no limit known and no pause,
        nothing can make a request wait: it goes without taking the lock (most
        self-hosted runs, where a lock round-trip per request was 2% of the client's CPU).
        """
        if self.free():
            return
        async with self._lock:
            while True:
                now = time.monotonic()
                wait = max(0.0, self.paused_until - now)
                if self.requests is not None:
                    wait = max(wait, self.requests.wait_time(1, now))
                if self.tokens is not None:
                    wait = max(wait, self.tokens.wait_time(tokens, now))
                if wait <= 0:
                    break
                self.stats.waited_s += wait
                await anyio.sleep(wait)
            if self.requests is not None:
                self.requests.take(1)
            if self.tokens is not None:
                self.tokens.take(tokens)

    def free(self) -> bool:
        return (self.requests is None and self.tokens is None and not self._lock.locked()
                and time.monotonic() >= self.paused_until)

    def pause(self, seconds: float) -> None:
        """Stop all sending for `seconds` (Retry-After, or remaining hit zero), at most
        MAX_RETRY_AFTER_S whoever asks."""
        until = time.monotonic() + (_bounded(seconds) or 0.0)
        if until > self.paused_until:
            self.paused_until = until
            self.stats.pauses += 1

    def observe(self, info: Mapping[str, float]) -> None:
        """Adapt to rate-limit headers from a response (success or 429)."""
        if not info:
            return
        if self.configured_rpm is None and info.get("limit_requests"):
            limit = info["limit_requests"]
            if self.requests is None:
                self.requests = TokenBucket(limit, self.burst_s)
                # Start from what the server says is left, not from a full bucket.
                self.requests.level = min(self.requests.capacity, info.get("remaining_requests", limit))
            elif self.requests.per_minute != limit:
                self.requests.set_rate(limit, self.burst_s)
        if self.configured_tpm is None and info.get("limit_tokens"):
            limit = info["limit_tokens"]
            if self.tokens is None:
                self.tokens = TokenBucket(limit, self.burst_s)
                self.tokens.level = min(self.tokens.capacity, info.get("remaining_tokens", limit))
            elif self.tokens.per_minute != limit:
                self.tokens.set_rate(limit, self.burst_s)
        # Never believe we have more left than the server says (min: its figure may be a
        # little stale, which only makes us slightly more careful).
        for bucket, kind in ((self.requests, "requests"), (self.tokens, "tokens")):
            remaining = info.get(f"remaining_{kind}")
            if bucket is not None and remaining is not None:
                bucket.refill(time.monotonic())  # to now, before comparing
                bucket.level = min(bucket.level, remaining)
