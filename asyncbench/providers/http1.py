"""A lean HTTP/1.1 client on asyncio's protocols, for the self-hosted providers.

`openai-compat:` and `tgi:` talk to servers that a run can keep busy with hundreds of
requests a second, where the client's CPU per request is the limit on a small machine.
aiohttp's ClientSession spends ~100 µs of Python per request on what such a call never
needs (cookie jars, redirects, proxies, tracing, a multidict per response, a stream
reader per body): this client does one POST or GET with keep-alive and nothing else, at
about half of the whole-request CPU of a raw aiohttp loop (bench/raw_client_ratio.md).

The answers are read by llhttp (Node's HTTP parser, through `httptools`, as uvicorn
does), not by a parser of our own: a hand-written one took a chunk size of `-5` and then
spun inside `data_received` for ever (issue 35). llhttp is strict where it matters here
(a chunk size or Content-Length is hex or decimal digits and nothing else, no sign, no
space; two Content-Lengths, or one beside Transfer-Encoding, are refused; header lines are
tokens) and linear in the bytes it is fed, and this module adds what llhttp leaves to its
caller: Transfer-Encoding must be `chunked` alone, the status 100-599 in HTTP/1.x, and
every answer has caps on what a server can make the parser do for it: 64 KiB of heads
(interim ones included), 16 interim (1xx) answers, 16,384 chunks, 65,536 reads and
twice `--max-response-bytes` (+ 1 MiB) of wire bytes. Past one of the last four the call
fails at once with `bounded.AnswerTooCostly`, fatal for the sample like a body over the
cap: a valid 1 MB answer dripped as a million one-byte chunks is refused after ~100 KB
of them, where it took 3 CPU-s to parse.

What it speaks (RFC 9112): requests with a Content-Length body; responses framed by
Content-Length, chunked transfer coding (extensions and trailers read and ignored) or the
connection's close; 1xx interim responses skipped; `Connection: close` and HTTP/1.0
answers end the connection; a 3xx is an answer like any other (never followed: the
caller refuses it). Bodies are decoded and capped as they arrive (`bounded.BoundedDecoder`:
gzip/deflate in pieces, refused past `--max-response-bytes`), and one deadline covers the
whole call: connecting, sending and every byte of the answer (a slow drip cannot extend
it; the parser returns after each read, so the timer always gets to fire). https:// URLs
go over TLS with the system's default certificate checks.

A streamed answer (a 2xx `text/event-stream` to a call with a `sink`, issue 38) goes to
the sink piece by piece as it is decoded, under the same deadline, with its caps scaled by
what the caller asked for (`stream_caps`: a stream repeats its envelope in a chunk per
token); what the sink refuses fails the call with the sink's own error (`SinkFailed`). A
call on a kept connection that the server closed without saying so (llama.cpp's server
does after a streamed answer) and that got not one byte back goes once more on a new
connection, within the same deadline, as urllib3 and http.client do.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit

import httptools

from .bounded import MAX_PIECES, AnswerTooCostly, BoundedDecoder, Refused, declared_too_large

MAX_HEAD_BYTES = 64 * 1024
# What one answer may make the parser do (reached only by a broken or hostile server: a
# JSON answer comes with a Content-Length or in a few large chunks, in a few reads).
MAX_INTERIM = 16
MAX_READS = 65_536
USER_AGENT = "asyncbench"


class HTTPFailure(Exception):
    """The server could not be reached, hung up, or answered something that is not
    HTTP/1.1. `connect` is the reason when no connection was made at all."""

    def __init__(self, message: str, connect: str | None = None) -> None:
        super().__init__(message)
        self.connect = connect


class CallTimeout(Exception):
    """The call's deadline passed before its answer was complete."""


class SinkFailed(Exception):
    """A streamed answer's reader (the `sink` of a call) refused what it was fed: its own
    error (a classified ProviderError: a malformed event, an error event) is `error`."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


# A sink takes each decoded piece of a streamed (text/event-stream) 2xx answer's body as
# it arrives, instead of the body keeping it.
Sink = Callable[[bytes], None]


@dataclass(slots=True)
class Answer:
    """One response: status, headers (names lower-cased; a repeated one joined by ", ")
    and the decoded body."""

    status: int
    headers: dict[str, str]
    body: bytearray
    streamed: bool = False  # the body went to the call's sink as it came (and is empty here)


class _Connection(asyncio.Protocol):
    """One keep-alive connection: llhttp parses the answer to the request in flight as its
    bytes arrive (the `on_*` methods are its callbacks) and `waiter` gets it.

    `_parser` is None between calls: a byte then is one nobody asked for, and the
    connection can no longer be trusted."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[Answer] | None = None
        self.closed = False
        self.reusable = False
        self._parser: httptools.HttpResponseParser | None = None
        self._headers: dict[str, str] = {}
        self._answer: Answer | None = None
        self._decoder: BoundedDecoder | None = None
        self._until_close = False  # the answer's body ends with the connection
        self._limit = self._wire_cap = 0
        self._url = ""
        self._wire = self._reads = self._chunks = self._interim = self._head = 0
        self._status_line = False
        self._sink: Sink | None = None  # the call's streamed-answer reader
        self._stream: Sink | None = None  # ... once the answer is a 2xx event stream
        self._pieces = self._stream_pieces = MAX_PIECES
        self._stream_limit = 0
        self._max_reads = MAX_READS

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None:  # bytes nobody asked for: the connection cannot be trusted
            self.abort()
            return
        self._reads += 1
        self._wire += len(data)
        try:
            if self._reads > self._max_reads or self._wire > self._wire_cap:
                raise AnswerTooCostly(f"{self._url} sent its answer in over {self._max_reads:,} reads or "
                                  f"{self._wire_cap:,} bytes (a broken or hostile server?)")
            parser.feed_data(data)
            if self._answer is None and self._wire > MAX_HEAD_BYTES:
                raise HTTPFailure(f"{self._url} sent a response head over {MAX_HEAD_BYTES:,} bytes")
        except httptools.HttpParserCallbackError as exc:  # one of ours, raised in a callback
            cause = exc.__context__
            self._fail(cause if isinstance(cause, (HTTPFailure, Refused, SinkFailed)) else HTTPFailure(str(exc)))
        except httptools.HttpParserUpgrade:
            self._fail(HTTPFailure(f"{self._url} switched protocols (101) instead of answering"))
        except httptools.HttpParserError as exc:
            self._fail(HTTPFailure(self._malformed(exc)))
        except (HTTPFailure, Refused, SinkFailed) as exc:
            self._fail(exc)

    def eof_received(self) -> bool | None:
        return None  # close our side too: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._parser is not None and self._until_close and self._answer is not None:  # framed by the close
            try:
                self._finish(False)
            except (Refused, SinkFailed) as err:
                self._fail(err)
            return
        if self.waiter is not None and not self.waiter.done():
            why = f": {exc}" if exc is not None else ""
            self.waiter.set_exception(HTTPFailure(f"the server closed the connection before its answer was complete{why}"))

    @property
    def answered(self) -> bool:
        """Whether any byte of the answer to the call in flight has arrived."""
        return self._wire > 0

    # -- a call ---------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop, data: bytes, limit: int, url: str, sink: Sink | None = None,
              stream_caps: tuple[int, int] | None = None) -> asyncio.Future[Answer]:
        """Send one request; its answer comes to the future returned. `sink`: the reader of
        a streamed answer, and `stream_caps` the (bytes, chunks) it may take (a stream
        repeats its envelope in a chunk per token or so: the caller sizes the caps on what
        it asked for); any other answer keeps `limit` and the usual caps."""
        self.waiter = waiter = loop.create_future()
        self._parser = httptools.HttpResponseParser(self)
        self._limit, self._wire_cap, self._url = limit, 2 * limit + 1024 * 1024, url
        self._sink, self._stream, self._pieces, self._max_reads = sink, None, MAX_PIECES, MAX_READS
        self._stream_limit, self._stream_pieces = stream_caps or (limit, MAX_PIECES)
        self._answer, self._decoder, self._until_close, self.reusable = None, None, False, False
        self._wire = self._reads = self._chunks = self._interim = self._head = 0
        self._status_line = False
        assert self.transport is not None
        self.transport.write(data)
        return waiter

    def expire(self) -> None:
        """The call's deadline: fail it and drop the connection."""
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(CallTimeout())
        self.abort()

    def abort(self) -> None:
        self.closed = True
        self._parser = None
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        self.abort()

    def _malformed(self, exc: Exception) -> str:
        if self._parser is None:  # the answer was whole: these bytes came after it
            return f"{self._url} sent bytes after its answer"
        if not self._status_line:
            return f"{self._url} did not answer in HTTP/1.x ({exc})"
        return f"{self._url} sent a malformed answer ({exc})"

    # -- llhttp's callbacks ---------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self._parser is None:  # a second answer behind the first: not ours to guess at
            raise HTTPFailure(f"{self._url} sent bytes after its answer")
        self._headers = {}

    def on_status(self, reason: bytes) -> None:
        self._status_line = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._answer is not None:  # a trailer after a chunked body: not read
            return
        self._head += len(name) + len(value)
        if self._head > MAX_HEAD_BYTES:  # the heads' size, interim ones included
            raise HTTPFailure(f"{self._url} sent a response head over {MAX_HEAD_BYTES:,} bytes")
        key, text = name.decode("latin-1").lower(), value.decode("latin-1").strip()
        headers = self._headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        parser = self._parser
        assert parser is not None
        status, self._status_line = parser.get_status_code(), True
        if not parser.get_http_version().startswith("1.") or not 100 <= status <= 599:
            raise HTTPFailure(f"{self._url} did not answer in HTTP/1.x (HTTP/{parser.get_http_version()} {status})")
        headers = self._headers
        if status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            self._interim += 1
            if self._interim > MAX_INTERIM:
                raise AnswerTooCostly(f"{self._url} sent over {MAX_INTERIM} interim (1xx) answers (a broken or hostile server?)")
            return
        coding = headers.get("transfer-encoding")
        if coding is not None and coding.lower() != "chunked":
            raise HTTPFailure(f"{self._url} answered in Transfer-Encoding {coding[:40]!r}")
        if self._sink is not None and 200 <= status < 300 \
                and headers.get("content-type", "").lower().startswith("text/event-stream"):
            self._stream = self._sink
            self._limit, self._pieces = max(self._limit, self._stream_limit), max(MAX_PIECES, self._stream_pieces)
            self._wire_cap = 2 * self._limit + 1024 * 1024
            self._max_reads = MAX_READS + self._pieces - MAX_PIECES
        declared_too_large(headers, self._limit, self._url)
        self._decoder = BoundedDecoder(headers.get("content-encoding"), self._limit, self._url)
        self._answer = Answer(status, headers, bytearray(), streamed=self._stream is not None)
        self._until_close = coding is None and "content-length" not in headers and status not in (204, 304)

    def on_chunk_header(self) -> None:
        self._chunks += 1
        if self._chunks > self._pieces:
            raise AnswerTooCostly(f"{self._url} sent its answer in over {self._pieces:,} chunks (a broken or hostile server?)")

    def on_body(self, body: bytes) -> None:
        assert self._decoder is not None and self._answer is not None
        if self._stream is not None:
            self._feed(self._decoder.feed(body))
            return
        for out in self._decoder.feed(body):
            self._answer.body += out

    def _feed(self, pieces: list[bytes]) -> None:
        """Decoded pieces of a streamed answer to its sink; what the sink refuses fails the
        call with the sink's own error (a cap it met is Refused as any other)."""
        assert self._stream is not None
        try:
            for out in pieces:
                self._stream(out)
        except Refused:
            raise
        except Exception as exc:
            raise SinkFailed(exc) from None

    def on_message_complete(self) -> None:
        if self._answer is None:  # an interim answer's end
            return
        assert self._parser is not None
        self._finish(self._parser.should_keep_alive())

    def _finish(self, keep: bool) -> None:
        assert self._decoder is not None and self._answer is not None
        if self._stream is not None:
            self._feed(self._decoder.flush())
        else:
            for out in self._decoder.flush():
                self._answer.body += out
        self._parser, self.reusable = None, keep
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(self._answer)


@dataclass(slots=True)
class _Target:
    """What a URL resolves to once: the origin's pool key and the request line's parts."""

    origin: tuple[str, str, int]
    path: bytes
    host_header: bytes
    headers: bytes  # the client's header lines, the URL's user:password@ in place of its Authorization


def request_path(parts: SplitResult) -> str:
    """The path and query a request line asks for."""
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def basic_auth(parts: SplitResult) -> str | None:
    """The URL's `user:password@` as a Basic Authorization value (RFC 7617), if it has one."""
    if parts.username is None and parts.password is None:
        return None
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
    return "Basic " + base64.b64encode(pair).decode()


class HTTP1Client:
    """Keep-alive connections per origin (no limit on their number: the scheduler's
    concurrency is the limit), owned by the event loop that made them."""

    def __init__(self, headers: dict[str, str]) -> None:
        for name, value in headers.items():
            if any(c in f"{name}{value}" for c in "\r\n\0") or ":" in name:
                raise ValueError(f"header {name!r} has a character that cannot go in an HTTP header")
        self._headers = headers
        self._extra = _lines(headers)
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._targets: dict[str, _Target] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tls: ssl.SSLContext | None = None

    def _target(self, url: str) -> _Target:
        found = self._targets.get(url)
        if found is None:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise HTTPFailure(f"{url} is not an http:// or https:// URL")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
            default = port == (443 if parts.scheme == "https" else 80)
            auth = basic_auth(parts)  # one request carries one Authorization: the URL's wins
            headers = self._extra if auth is None else _lines(
                {**{k: v for k, v in self._headers.items() if k.lower() != "authorization"}, "Authorization": auth})
            found = _Target((parts.scheme, parts.hostname, port), request_path(parts).encode("ascii", "strict"),
                            (host if default else f"{host}:{port}").encode("idna"), headers)
            self._targets[url] = found
        return found

    async def request(self, method: str, url: str, body: bytes | None, timeout: float, limit: int,
                      sink: Sink | None = None, stream_caps: tuple[int, int] | None = None) -> Answer:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections belong to the loop that made them
            self._idle, self._loop = {}, loop
        deadline = loop.time() + timeout
        target = self._target(url)
        idle = self._idle.setdefault(target.origin, [])
        head = b"%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n%s" % (
            method.encode(), target.path, target.host_header, USER_AGENT.encode(), target.headers)
        if body is not None:
            head += b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
            data = head + body
        else:
            data = head + b"\r\n"
        conn = None
        while idle:
            conn = idle.pop()
            if not conn.closed:
                break
            conn = None
        if conn is not None:
            try:
                return await self._exchange(loop, conn, idle, data, limit, url, sink, stream_caps, deadline)
            except HTTPFailure:
                # A kept connection the server closed while it was idle (llama.cpp's server
                # closes one after a streamed answer, without saying so): not one byte of
                # an answer came, so the request goes once more on a new connection, as
                # urllib3 and http.client do for a stale keep-alive connection.
                if conn.answered or loop.time() >= deadline:
                    raise
        conn = await self._connect(target.origin, max(0.001, deadline - loop.time()))
        return await self._exchange(loop, conn, idle, data, limit, url, sink, stream_caps, deadline)

    @staticmethod
    async def _exchange(loop: asyncio.AbstractEventLoop, conn: _Connection, idle: list[_Connection], data: bytes,
                        limit: int, url: str, sink: Sink | None, stream_caps: tuple[int, int] | None,
                        deadline: float) -> Answer:
        """One request on `conn` under the call's deadline; the connection back to `idle`
        when its answer left it reusable."""
        waiter = conn.start(loop, data, limit, url, sink, stream_caps)
        timer = loop.call_at(deadline, conn.expire)
        try:
            answer = await waiter
        except BaseException:
            conn.abort()  # cancelled or failed mid-answer: its state is unknown
            raise
        finally:
            timer.cancel()
        if conn.reusable and not conn.closed:
            idle.append(conn)
        else:
            conn.abort()
        return answer

    async def _connect(self, origin: tuple[str, str, int], timeout: float) -> _Connection:
        scheme, host, port = origin
        tls: ssl.SSLContext | None = None
        if scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context()
            tls = self._tls
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(_Connection, host, port, ssl=tls, server_hostname=host if tls else None), timeout)
        except asyncio.TimeoutError:
            raise CallTimeout() from None
        except OSError as exc:
            why = connect_reason(exc)
            raise HTTPFailure(f"cannot connect to {host}:{port}: {why}", connect=why) from None
        return conn

    def close(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.abort()
        self._idle = {}


def _lines(headers: dict[str, str]) -> bytes:
    return b"".join(b"%s: %s\r\n" % (k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items())


def connect_reason(exc: OSError) -> str:
    """Why a connection could not be made, in a few words ("connection refused")."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed: {exc.reason or exc}"
    text = exc.strerror or str(exc) or type(exc).__name__
    return text[0].lower() + text[1:] if text else type(exc).__name__


