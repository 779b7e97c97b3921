"""A lean HTTP/1.1 client on asyncio's protocols, for the self-hosted providers.

`openai-compat:` and `tgi:` talk to servers that a run can keep busy with hundreds of
requests a second, where the client's CPU per request is the limit on a small machine.
aiohttp's ClientSession spends ~100 µs of Python per request on what such a call never
needs (cookie jars, redirects, proxies, tracing, a multidict per response, a stream
reader per body): this client does one POST or GET with keep-alive and nothing else, at
about half of the whole-request CPU of a raw aiohttp loop (bench/raw_client_ratio.md).

What it speaks (RFC 9112): requests with a Content-Length body; responses framed by
Content-Length, chunked transfer coding or the connection's close; 1xx interim responses
skipped; `Connection: close` and HTTP/1.0 answers end the connection. Bodies are decoded
and capped as they arrive (`bounded.BoundedDecoder`: gzip/deflate in pieces, refused
past `--max-response-bytes`), the head is capped at 64 KiB, and one deadline covers the
whole call: connecting, sending and every byte of the answer (a slow drip cannot extend
it). https:// URLs go over TLS with the system's default certificate checks.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit

from .bounded import BodyTooLarge, BoundedDecoder, declared_too_large

MAX_HEAD_BYTES = 64 * 1024
USER_AGENT = "asyncbench"


class HTTPFailure(Exception):
    """The server could not be reached, hung up, or answered something that is not
    HTTP/1.1. `connect` is the reason when no connection was made at all."""

    def __init__(self, message: str, connect: str | None = None) -> None:
        super().__init__(message)
        self.connect = connect


class CallTimeout(Exception):
    """The call's deadline passed before its answer was complete."""


@dataclass(slots=True)
class Answer:
    """One response: status, headers (names lower-cased; a repeated one joined by ", ")
    and the decoded body."""

    status: int
    headers: dict[str, str]
    body: bytearray


class _Connection(asyncio.Protocol):
    """One keep-alive connection: parses the answer to the request in flight as its bytes
    arrive (head, then the body by its framing) and resolves `waiter` with it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[Answer] | None = None
        self.closed = False
        self.reusable = False
        self._buf = bytearray()
        self._state = "idle"  # idle | head | length | chunk-size | chunk-data | chunk-crlf | trailers | close
        self._left = 0
        self._answer: Answer | None = None
        self._decoder: BoundedDecoder | None = None
        self._limit = 0
        self._url = ""

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._state == "idle":  # bytes nobody asked for: the connection cannot be trusted
            self.abort()
            return
        self._buf += data
        try:
            self._parse()
        except (BodyTooLarge, HTTPFailure) as exc:
            self._fail(exc)

    def eof_received(self) -> bool | None:
        return None  # close our side too: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._state == "close" and self._answer is not None:  # framed by the close
            try:
                self._finish()
            except BodyTooLarge as err:
                self._fail(err)
            return
        if self.waiter is not None and not self.waiter.done():
            why = f": {exc}" if exc is not None else ""
            self.waiter.set_exception(HTTPFailure(f"the server closed the connection before its answer was complete{why}"))

    # -- a call ---------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop, data: bytes, limit: int, url: str) -> asyncio.Future[Answer]:
        self.waiter = waiter = loop.create_future()
        self._state, self._limit, self._url = "head", limit, url
        self._answer, self._decoder, self.reusable = None, None, False
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
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        self._state = "idle"
        self.abort()

    # -- parsing --------------------------------------------------------------------------
    def _parse(self) -> None:
        """Take what the buffer holds, state by state, until a state needs more bytes."""
        while self._state != "idle" and _STEPS[self._state](self):
            pass

    def _step_head(self) -> bool:
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if (end if end >= 0 else len(buf)) > MAX_HEAD_BYTES:
            raise HTTPFailure(f"{self._url} sent a response head over {MAX_HEAD_BYTES:,} bytes")
        if end < 0:
            return False
        head = bytes(buf[:end])
        del buf[:end + 4]
        self._head(head)
        return True

    def _take(self) -> bool:
        """Up to `_left` bytes of the body (a Content-Length's or a chunk's) into the
        decoder; False when none has arrived."""
        buf = self._buf
        if not buf:
            return False
        piece = bytes(buf[:self._left])
        del buf[:len(piece)]
        self._left -= len(piece)
        self._feed(piece)
        return True

    def _step_length(self) -> bool:
        if not self._take():
            return False
        if not self._left:
            self._finish()
        return not self._left

    def _step_close(self) -> bool:
        if self._buf:
            self._feed(bytes(self._buf))
            self._buf.clear()
        return False

    def _step_chunk_size(self) -> bool:
        buf = self._buf
        end = buf.find(b"\r\n")
        if end < 0:
            if len(buf) > 1024:
                raise HTTPFailure(f"{self._url} sent a malformed chunk size line")
            return False
        line = bytes(buf[:end]).split(b";", 1)[0].strip()
        del buf[:end + 2]
        try:
            self._left = int(line, 16)
        except ValueError:
            raise HTTPFailure(f"{self._url} sent a malformed chunk size {line[:40]!r}") from None
        self._state = "chunk-data" if self._left else "trailers"
        return True

    def _step_chunk_data(self) -> bool:
        if not self._take():
            return False
        if not self._left:
            self._state = "chunk-crlf"
        return True

    def _step_chunk_crlf(self) -> bool:
        buf = self._buf
        if len(buf) < 2:
            return False
        if buf[:2] != b"\r\n":
            raise HTTPFailure(f"{self._url} sent a chunk without its closing CRLF")
        del buf[:2]
        self._state = "chunk-size"
        return True

    def _step_trailers(self) -> bool:
        buf = self._buf
        end = buf.find(b"\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise HTTPFailure(f"{self._url} sent trailers over {MAX_HEAD_BYTES:,} bytes")
            return False
        del buf[:end + 2]
        if end == 0:
            self._finish()
            return False
        return True

    def _head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not (parts[1].isdigit() and len(parts[1]) == 3):
            raise HTTPFailure(f"{self._url} did not answer in HTTP/1.x ({lines[0][:60]!r})")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise HTTPFailure(f"{self._url} sent a malformed header line {line[:60]!r}")
            name, value = name.lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        if 100 <= status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            return
        keep = parts[0] == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        self._answer = Answer(status, headers, bytearray())
        self._decoder = BoundedDecoder(headers.get("content-encoding"), self._limit, self._url)
        coding = headers.get("transfer-encoding")
        if coding is not None:
            if coding.lower().replace(" ", "") != "chunked":
                raise HTTPFailure(f"{self._url} answered in Transfer-Encoding {coding!r}")
            self._state, self.reusable = "chunk-size", keep
        elif status in (204, 304):
            self.reusable = keep
            self._finish()
        elif (length := headers.get("content-length")) is not None:
            if not length.isdigit():
                raise HTTPFailure(f"{self._url} sent Content-Length {length[:40]!r}")
            declared_too_large(headers, self._limit, self._url)
            self._left, self.reusable = int(length), keep
            self._state = "length"
            if not self._left:
                self._finish()
        else:
            self._state = "close"

    def _feed(self, piece: bytes) -> None:
        assert self._decoder is not None and self._answer is not None
        for out in self._decoder.feed(piece):
            self._answer.body += out

    def _finish(self) -> None:
        assert self._decoder is not None and self._answer is not None
        for out in self._decoder.flush():
            self._answer.body += out
        if self._buf:  # more than one answer's bytes: not ours to guess at
            self.reusable = False
        self._state = "idle"
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(self._answer)


# what `_Connection._parse` does in each state of an answer (a step returns whether to go on)
_STEPS: dict[str, Callable[[_Connection], bool]] = {
    "head": _Connection._step_head, "length": _Connection._step_length, "close": _Connection._step_close,
    "chunk-size": _Connection._step_chunk_size, "chunk-data": _Connection._step_chunk_data,
    "chunk-crlf": _Connection._step_chunk_crlf, "trailers": _Connection._step_trailers}


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

    async def request(self, method: str, url: str, body: bytes | None, timeout: float, limit: int) -> Answer:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections belong to the loop that made them
            self._idle, self._loop = {}, loop
        deadline = loop.time() + timeout
        target = self._target(url)
        idle = self._idle.setdefault(target.origin, [])
        conn = None
        while idle:
            conn = idle.pop()
            if not conn.closed:
                break
            conn = None
        if conn is None:
            conn = await self._connect(target.origin, timeout)
        head = b"%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n%s" % (
            method.encode(), target.path, target.host_header, USER_AGENT.encode(), target.headers)
        if body is not None:
            head += b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
            data = head + body
        else:
            data = head + b"\r\n"
        waiter = conn.start(loop, data, limit, url)
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


