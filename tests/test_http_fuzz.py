"""Property-based fuzzing of what reads a server's answer (issue 35, item 2): every answer,
valid, mutated or hostile, split at any bytes, ends in the answer or in a classified error
(HTTPFailure, BodyTooLarge / AnswerTooCostly; ProviderError from a provider), never in
another exception or a parser that keeps going.

Most cases feed our HTTP/1.1 client's protocol object directly through a fake transport
(thousands a second: the parser is the subject); a smaller number go over real sockets
from a 127.0.0.1 server to all three transports (`openai-compat:` on our client, `openai:`
and `anthropic:` on httpx2 under their SDKs, through `sdk_transport.BoundedTransport`).
Seeds are fixed (derandomize): `make test` runs the same ~11,000 cases each time.
bench/http_fuzz.py runs the same properties with random seeds and more cases
(bench/http_fuzz.md)."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncbench.errors import ProviderError
from asyncbench.providers.anthropic import AnthropicProvider
from asyncbench.providers.base import ProviderBase
from asyncbench.providers.bounded import Refused
from asyncbench.providers.http1 import Answer, HTTPFailure, _Connection
from asyncbench.providers.openai import OpenAIProvider
from asyncbench.providers.openai_compat import OpenAICompatProvider
from asyncbench.types import Request, Response

# A valid answer in every transport's shape at once (OpenAI chat, Anthropic messages).
ANSWER = json.dumps({
    "id": "x", "object": "chat.completion", "type": "message", "role": "assistant", "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop", "text": "ok", "message": {"role": "assistant", "content": "ok"}}],
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "input_tokens": 1, "output_tokens": 1}}).encode()
CAP = 64 * 1024  # --max-response-bytes for these cases: a few cases pass it
# What a mutation inserts: the tokens a hostile server tries in lengths and framing.
HOSTILE = [b"-5", b"+5", b" 5", b"0x10", "٥".encode(), b"fffffffffffffffffffff", b"99999999999999999999",
           b"\r\n", b"\n", b"\r\n\r\n", b"\x00", b";ext=1", b"0\r\n\r\n", b"HTTP/1.1 100 Continue\r\n\r\n",
           b"HTTP/1.1 200 OK\r\n", b"Content-Length: 5\r\n", b"Transfer-Encoding: chunked\r\n",
           b"Transfer-Encoding: gzip\r\n", b"Content-Encoding: gzip\r\n", b"Connection: close\r\n"]

DIRECT = settings(max_examples=4_500, derandomize=True, deadline=None, database=None, print_blob=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def framed(draw: st.DrawFn) -> tuple[bytes, bytes, bool]:
    """A valid response: its bytes, the body it carries, and whether it ends only with the
    connection. Framing by Content-Length, chunks (sizes, extensions, trailers drawn) or
    the close; gzip or not; interim heads before it or not."""
    body = draw(st.sampled_from([ANSWER, b"", b"{}"]) | st.binary(max_size=300))
    coded = draw(st.booleans())
    payload = gzip.compress(body) if coded else body
    head = b"HTTP/1.1 100 Continue\r\n\r\n" * draw(st.integers(0, 3))
    head += b"HTTP/1.%d 200 OK\r\nContent-Type: application/json\r\n" % draw(st.integers(0, 1))
    if coded:
        head += b"Content-Encoding: gzip\r\n"
    framing = draw(st.sampled_from(["length", "chunked", "close"]))
    if framing == "length":
        return head + b"Content-Length: %d\r\n\r\n" % len(payload) + payload, body, False
    if framing == "close":
        return head + b"\r\n" + payload, body, True
    sizes = draw(st.lists(st.integers(1, 97), min_size=1, max_size=8))
    wire, at, i = bytearray(head + b"Transfer-Encoding: chunked\r\n\r\n"), 0, 0
    while at < len(payload):
        piece = payload[at:at + sizes[i % len(sizes)]]
        ext = b";n=%d" % i if draw(st.booleans()) else b""
        wire += b"%x%s\r\n%s\r\n" % (len(piece), ext, piece)
        at, i = at + len(piece), i + 1
    wire += b"0\r\n" + (b"X-Trailer: 1\r\n" if draw(st.booleans()) else b"") + b"\r\n"
    return bytes(wire), body, False


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid response with one to four mutations: a byte replaced, hostile tokens
    inserted, a range deleted, or the whole cut short."""
    raw = bytearray(draw(framed())[0])
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["replace", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, len(raw)))
        if op == "replace" and at < len(raw):
            raw[at] = draw(st.integers(0, 255))
        elif op == "insert":
            raw[at:at] = draw(st.sampled_from(HOSTILE) | st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del raw[at:at + draw(st.integers(1, 16))]
        else:
            del raw[at:]
    return bytes(raw)


@st.composite
def hostile(draw: st.DrawFn) -> bytes:
    """Answers built to hurt: interim floods, lengths that are huge, negative or signed,
    chunk floods and plain garbage."""
    kind = draw(st.sampled_from(["interim", "length", "chunk-size", "chunks", "garbage"]))
    if kind == "interim":
        return b"HTTP/1.1 100 Continue\r\n\r\n" * draw(st.integers(10, 400)) + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    if kind == "length":
        value = draw(st.sampled_from(HOSTILE[:7] + [b"-1", b"1e3", b"18446744073709551616", b"%d" % (CAP + 1)]))
        return b"HTTP/1.1 200 OK\r\nContent-Length: " + value + b"\r\n\r\n" + ANSWER
    if kind == "chunk-size":
        value = draw(st.sampled_from(HOSTILE[:7] + [b"-0", b"1 ;x", b"%x" % (CAP + 1)]))
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + value + b"\r\nhello\r\n0\r\n\r\n"
    if kind == "chunks":
        return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"1\r\nx\r\n" * draw(st.integers(16_000, 17_000)) + b"0\r\n\r\n")
    return draw(st.binary(min_size=1, max_size=400))


@st.composite
def cuts(draw: st.DrawFn, raw: bytes) -> list[bytes]:
    """`raw` in the pieces it arrives in: whole, at drawn offsets, or one byte at a time."""
    how = draw(st.sampled_from(["whole", "cuts", "bytes"]))
    if how == "whole" or not raw:
        return [raw]
    if how == "bytes" and len(raw) <= 4096:
        return [raw[i:i + 1] for i in range(len(raw))]
    at = sorted(set(draw(st.lists(st.integers(1, len(raw) - 1), max_size=12)))) if len(raw) > 1 else []
    return [raw[a:b] for a, b in zip([0, *at], [*at, len(raw)])]


class _Transport(asyncio.Transport):
    """What the protocol writes to and aborts: nothing is sent anywhere."""

    def write(self, data: Any) -> None:
        pass

    def abort(self) -> None:
        pass


def feed(pieces: list[bytes]) -> Answer | BaseException:
    """The pieces into a fresh connection as a socket would hand them over, then the close:
    what its call ended with. Every piece is handled in bounded CPU (a parser that kept
    going would hang here, as the hand-written one did on a chunk size of -5)."""
    loop = asyncio.new_event_loop()
    try:
        conn = _Connection()
        conn.connection_made(_Transport())
        waiter = conn.start(loop, b"POST / HTTP/1.1\r\n\r\n", CAP, "http://fuzz/")
        started = time.process_time()
        for piece in pieces:
            if waiter.done() or conn.closed:
                break
            conn.data_received(piece)
        conn.connection_lost(None)
        assert time.process_time() - started < 5.0  # a loaded machine takes ms: a loop takes for ever
        assert waiter.done()
        return waiter.exception() or waiter.result()
    finally:
        loop.close()


def classified(got: Answer | BaseException) -> None:
    assert isinstance(got, (Answer, HTTPFailure, Refused)), repr(got)


@DIRECT
@given(st.data())
def test_a_valid_answer_split_anywhere_reads_as_its_body(data: st.DataObject) -> None:
    raw, body, _ = data.draw(framed())
    got = feed(data.draw(cuts(raw)))
    assert isinstance(got, Answer) and got.status == 200 and bytes(got.body) == body, repr(got)


@DIRECT
@given(st.data())
def test_a_mutated_answer_ends_in_an_answer_or_a_classified_error(data: st.DataObject) -> None:
    classified(feed(data.draw(cuts(data.draw(mutated())))))


@settings(DIRECT, max_examples=1_500)
@given(st.data())
def test_a_hostile_answer_ends_in_a_classified_error(data: st.DataObject) -> None:
    raw = data.draw(hostile())
    got = feed(data.draw(cuts(raw)))
    classified(got)
    if raw.startswith(b"HTTP/1.1 100") and raw.count(b" 100 ") > 16:
        assert isinstance(got, Refused) and "interim" in str(got), repr(got)
    if raw.count(b"1\r\nx\r\n") > 16_384:
        assert isinstance(got, Refused) and "chunks" in str(got), repr(got)


# -- over real sockets, to every transport ---------------------------------------------------
TRANSPORTS: dict[str, tuple[type[ProviderBase], str, str]] = {
    "openai-compat": (OpenAICompatProvider, "m", "/v1"),
    "openai SDK": (OpenAIProvider, "gpt-4o-mini", "/v1"),
    "anthropic SDK": (AnthropicProvider, "claude-haiku-4-5", ""),
}
DEADLINE_S = 5.0


class _Server:
    """Answers each request with the case's pieces, one write (and drain) each, then closes
    unless the answer was a whole, valid keep-alive one."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.keep = False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(v) for k, _, v in (ln.partition(b":") for ln in head.split(b"\r\n"))
                               if k.strip().lower() == b"content-length"), 0)
                await reader.readexactly(length)
                for piece in self.pieces:
                    writer.write(piece)
                    await writer.drain()
                if not self.keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def _sockets(transport: str, examples: int, derandomize: bool = True) -> int:
    """`examples` cases over real sockets to one transport; how many ran."""
    make, model, suffix = TRANSPORTS[transport]
    server = _Server()
    loop = asyncio.new_event_loop()
    listener = loop.run_until_complete(asyncio.start_server(server.handle, "127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}{suffix}"
    provider = make(model, None)
    provider.max_response_bytes = CAP
    request = Request(provider=provider.name, model=model, endpoint_id=url,
                      messages=[{"role": "user", "content": "hello"}], max_tokens=8)

    async def one(pieces: list[bytes]) -> Response | ProviderError:
        t0 = time.monotonic()
        try:
            # the scheduler's total deadline, as a run has it around an SDK's per-read one
            return await asyncio.wait_for(provider.send(request, url, DEADLINE_S), 2 * DEADLINE_S)
        except ProviderError as exc:
            return exc
        finally:
            assert time.monotonic() - t0 < 2 * DEADLINE_S + 5

    ran = 0

    @settings(DIRECT, max_examples=examples, derandomize=derandomize)
    @given(st.data())
    def case(data: st.DataObject) -> None:
        nonlocal ran
        ran += 1
        raw, _, until_close = data.draw(framed())
        valid = data.draw(st.booleans())
        if not valid:
            raw = data.draw(mutated() | hostile())
        server.pieces = data.draw(cuts(raw)) if len(raw) <= 2048 else [raw]
        server.keep = valid and not until_close and b"HTTP/1.0" not in raw
        got = loop.run_until_complete(one(server.pieces))
        assert isinstance(got, (Response, ProviderError)), repr(got)

    try:
        case()
    finally:
        loop.run_until_complete(provider.aclose())
        listener.close()
        loop.run_until_complete(listener.wait_closed())
        loop.close()
    return ran


def test_answers_over_real_sockets_end_classified_on_our_client() -> None:
    _sockets("openai-compat", 300)


def test_answers_over_real_sockets_end_classified_on_the_openai_sdk() -> None:
    _sockets("openai SDK", 150)


def test_answers_over_real_sockets_end_classified_on_the_anthropic_sdk() -> None:
    _sockets("anthropic SDK", 150)
