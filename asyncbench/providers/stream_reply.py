"""One streamed answer, assembled as its events arrive, with the times they arrived.

Each protocol's reader (openai_wire.OpenAIStream, anthropic.AnthropicStream,
tgi.TGIStream) subclasses `StreamReply`: it reads the events of its API and, once the
stream has ended, builds the very body the same request answers without streaming and
hands it to the same parser (`parse_body`, `parse_message`, `parse_generate`), so the
text, usage, finish reason — and so the cache row and the score — are those of the
unstreamed answer by construction (tests/test_streaming.py checks it per provider kind).

Timing follows the serving benchmarks (AIPerf docs/metrics_reference.md; vLLM
benchmarks/benchmark_serving.py): the time to first token is taken at the first event
that carries non-empty content (a role-only chunk, an empty delta or a special token is
not content), and each later content event adds one inter-token gap. Events that arrive
in one read share its time, as they do for any client.

What a server may make the reader do is capped on what was asked for: the events
(EVENTS_PER_TOKEN per token of `max_tokens` + slack, past which the answer is refused like
an over-large body), the bytes (the answer cap plus BYTES_PER_TOKEN a token: a stream
repeats its envelope in every event) and one event's bytes (sse.py). A stream that ends
before its final event, or without usage, is a classified error, never an answer.
"""

from __future__ import annotations

import time
from typing import Any

from ..claims import COMPLETION_SLACK
from ..errors import ProviderError
from ..types import Timing
from .bounded import MAX_PIECES, AnswerTooCostly
from .http import JSONTooDeep, json_value
from .sse import SSEDecoder

EVENTS_PER_TOKEN = 4
EVENT_SLACK = 256
BYTES_PER_TOKEN = 2048

# What to do about a server that streams no usage: the answer cannot be booked without it.
NO_USAGE_HINT = "the server does not report usage when it streams: run with --stream off"


def stream_caps(max_tokens: int, max_bytes: int) -> tuple[int, int]:
    """(bytes, chunks) a streamed answer to `max_tokens` may take."""
    tokens = max(0, int(max_tokens)) + COMPLETION_SLACK
    return max_bytes + BYTES_PER_TOKEN * tokens, MAX_PIECES + EVENTS_PER_TOKEN * tokens


class StreamReply:
    """The events of one answer so far: its content pieces and their arrival times."""

    def __init__(self, url: str, max_tokens: int, max_bytes: int) -> None:
        self.url, self.max_tokens = url, max_tokens
        limit, _ = stream_caps(max_tokens, max_bytes)
        self.sse = SSEDecoder(limit, url)
        self.max_events = EVENT_SLACK + EVENTS_PER_TOKEN * (max(0, int(max_tokens)) + COMPLETION_SLACK)
        self.events = 0
        self.parts: list[str] = []
        self.first: float | None = None
        self.last = 0.0
        self.gaps: list[float] = []

    def feed(self, data: bytes) -> None:
        """Decoded body bytes as they came (http1's sink, or an SDK's byte iterator)."""
        events = self.sse.feed(data)
        if not events:
            return
        self.events += len(events)
        if self.events > self.max_events:
            raise AnswerTooCostly(f"{self.url} sent over {self.max_events:,} stream events for the tokens asked "
                                  "(a broken or hostile server?)")
        now = time.perf_counter()
        for name, payload in events:
            self.on_event(name, payload, now)

    def content(self, text: str, now: float) -> None:
        """A piece of the answer's content that arrived at `now` (perf_counter)."""
        if not text:
            return
        if self.first is None:
            self.first = now
        else:
            self.gaps.append(round((now - self.last) * 1000.0, 3))
        self.last = now
        self.parts.append(text)

    def on_event(self, name: str, payload: bytes, now: float) -> None:
        raise NotImplementedError

    def payload(self, data: bytes) -> dict[str, Any]:
        """An event's JSON object; a malformed one is a failed attempt (transient, as a
        malformed body is), one nested past any parser's depth refused (fatal)."""
        try:
            value = json_value(data)
        except JSONTooDeep as exc:
            raise ProviderError("fatal", f"{self.url}: {exc}") from None
        except ValueError as exc:
            raise ProviderError("transient", f"malformed stream event from {self.url}: {exc}") from None
        if not isinstance(value, dict):
            raise ProviderError("transient", f"malformed stream event from {self.url}: a JSON "
                                             f"{type(value).__name__}, not an object")
        return value

    def incomplete(self, what: str, fatal: bool = False) -> ProviderError:
        """A stream that ended without `what` (its usage, its final event)."""
        hint = f" ({NO_USAGE_HINT})" if fatal else ""
        return ProviderError("fatal" if fatal else "transient", f"the stream from {self.url} ended without {what}{hint}")

    def timing(self, t0: float, sent_at: float) -> Timing:
        """When it came: `t0` (perf_counter) and `sent_at` (epoch s) taken as it was sent."""
        ttft = None if self.first is None else round((self.first - t0) * 1000.0, 3)
        return Timing(sent_at, ttft, self.gaps)
