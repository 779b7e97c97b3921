"""Shared plain-HTTP plumbing for the providers that do not use an SDK.

An SDK is avoided where we can: against a local server the official openai SDK manages
~570 requests/s on this 2-core machine, aiohttp ~9,700 (bench/README.md), and our own
HTTP/1.1 client (`http1.py`) costs about half of aiohttp's CPU per request
(bench/raw_client_ratio.md): client overhead is what limits self-hosted fleets.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

import orjson

from ..errors import ProviderError
from ..limits import parse_ratelimit_headers
from .base import classify_status, redirect_refused
from .bounded import ACCEPT_ENCODING, DEFAULT_MAX_RESPONSE_BYTES, Refused
from .http1 import Answer, CallTimeout, HTTP1Client, HTTPFailure, Sink, SinkFailed, basic_auth, request_path


def json_bytes(value: object) -> bytes:
    """`value` as UTF-8 JSON. orjson writes a 40 KB prompt's body in ~2 µs where json.dumps
    takes ~85 (and a small one in a tenth of the time); what orjson refuses (a lone
    surrogate, an integer over 64 bits, a key that is not a string) goes through
    json.dumps as before."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False).encode()


class JSONTooDeep(ValueError):
    """A JSON document nested deeper than the parsers go (orjson stops at 1,024 levels,
    json.loads at Python's recursion limit): no answer is built like that, a broken or
    hostile server's is, and it is refused as such, not retried."""


def json_value(raw: bytes | bytearray | str) -> Any:
    """A JSON body parsed: orjson (~4x json.loads on an answer), json.loads for what
    orjson refuses and json accepts (NaN, a lone surrogate escape); ValueError if neither
    parses it, JSONTooDeep when json.loads ran out of recursion (a 2 KB body of 200,000
    nested arrays once ended a run with a RecursionError traceback, issue 35)."""
    try:
        return orjson.loads(raw)
    except ValueError:
        try:
            return json.loads(raw)
        except RecursionError:
            raise JSONTooDeep("a JSON answer nested deeper than any answer is (a broken or hostile server?)") from None


class HTTPClient:
    """One provider's keep-alive connections (`http1.HTTP1Client`). Bodies are decoded
    and capped at `max_bytes` as they arrive; one deadline covers each whole call."""

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self._headers = headers or {}
        self._client = HTTP1Client({"Accept-Encoding": ACCEPT_ENCODING, **self._headers})
        self.max_bytes = DEFAULT_MAX_RESPONSE_BYTES

    @property
    def headers(self) -> dict[str, str]:
        return dict(self._headers)

    async def _call(self, method: str, url: str, body: bytes | None, timeout: float, failed: str,
                    sink: Sink | None = None, stream_caps: tuple[int, int] | None = None) -> Answer:
        """One call, its failures as ProviderErrors: an answer refused (a body over the cap,
        one framed to cost more than any answer) is fatal, anything
        else the transport met (no connection, a hang-up, the deadline) transient and
        said as `failed` + the URL; what a streamed answer's `sink` refused, its own error."""
        try:
            return await self._client.request(method, url, body, timeout, self.max_bytes, sink, stream_caps)
        except SinkFailed as exc:
            if isinstance(exc.error, ProviderError):
                raise exc.error from None
            raise ProviderError("transient", f"malformed stream from {url}: {exc.error}") from None
        except Refused as exc:
            raise ProviderError("fatal", str(exc)) from None
        except CallTimeout:
            raise ProviderError("transient", f"no complete answer from {url} within --timeout {timeout:g}s") from None
        except HTTPFailure as exc:
            raise ProviderError("transient", f"{failed} {url}: {exc}", unreachable=exc.connect) from None

    async def post_json(self, url: str, body: dict[str, object], timeout: float) -> tuple[object, dict[str, float], dict[str, str]]:
        """POST JSON; return (parsed body, parsed rate-limit headers, headers with lower-case
        names) or raise ProviderError."""
        return await self.post_stream(url, body, timeout, None)

    async def post_stream(self, url: str, body: dict[str, object], timeout: float, sink: Sink | None,
                          stream_caps: tuple[int, int] | None = None) -> tuple[object, dict[str, float], dict[str, str]]:
        """POST JSON asking for a streamed answer: a 2xx `text/event-stream` body goes to
        `sink` piece by piece, under the call's one deadline and `stream_caps` (bytes,
        chunks), and the parsed body returned is None; any other answer is read whole as
        `post_json` reads it, under --max-response-bytes (a server that ignores `stream`
        answers JSON: taken as is)."""
        answer = await self._call("POST", url, json_bytes(body), timeout, "connection error to", sink, stream_caps)
        info = parse_ratelimit_headers(answer.headers)
        if answer.streamed:
            return None, info, answer.headers
        if 300 <= answer.status < 400:
            raise redirect_refused(url, answer.status, answer.headers.get("location"))
        if answer.status >= 400:
            message, code = _error_message(answer.body)
            raise classify_status(answer.status, message, retry_after=info.get("retry_after"), ratelimit=info, code=code)
        try:
            data = json_value(answer.body)
        except JSONTooDeep as exc:
            raise ProviderError("fatal", f"{url}: {exc}") from None
        except ValueError as exc:
            raise ProviderError("transient", f"malformed response body from {url}: {exc}") from None
        return data, info, answer.headers

    async def get_json(self, url: str, timeout: float = 10.0) -> dict[str, object]:
        answer = await self._call("GET", url, None, timeout, "cannot reach")
        if 300 <= answer.status < 400:
            raise redirect_refused(url, answer.status, answer.headers.get("location"))
        if answer.status >= 400:
            message, code = _error_message(answer.body)
            raise classify_status(answer.status, message, code=code)
        try:
            data = json_value(answer.body)
            if not isinstance(data, dict):
                raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        except ValueError as exc:
            raise ProviderError("transient", f"cannot reach {url}: {type(exc).__name__}: {exc}") from None
        return data

    async def aclose(self) -> None:
        self._client.close()


def _error_message(raw: bytes | bytearray) -> tuple[str, str | None]:
    """Pull the human message and code out of OpenAI/Anthropic/TGI/llama.cpp error bodies.

    The code comes back as text: llama.cpp's is an integer (`{"error": {"code": 400, "type":
    "exceed_context_size_error", ...}}`, tools/server/server-common.cpp
    `format_error_response`), so its `type`, which says more than the HTTP status, is
    preferred over a numeric code."""
    try:
        data = json_value(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")[:300], None
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, dict):
        code = err.get("code")
        if not isinstance(code, str) or not code:
            code = err.get("type") or (data.get("error_type") if isinstance(data, dict) else None) or code
        return str(err.get("message") or err.get("error") or err), None if code is None else str(code)
    return str(err), data.get("error_type") if isinstance(data, dict) else None


# A tokenizer's answer lists every token of a prompt (TGI: id, text, special, start and
# stop, 70-100 bytes a token): a 2M-character LongBench prompt is ~50 MB of it.
TOKENIZER_MAX_BYTES = 256 * 1024 * 1024


class SyncCallError(Exception):
    """A blocking call that got no usable answer: no connection, a hang-up, an HTTP
    error status or a body over the cap."""


class SyncClient:
    """The blocking JSON client the server tokenizers call from worker threads: the
    standard library's http.client, one keep-alive connection per thread. (httpx's
    import and client were a sixth of a small run's start-up CPU, for a few calls.)"""

    def __init__(self, root: str, headers: dict[str, str], timeout: float) -> None:
        parts = urlsplit(root)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ProviderError("fatal", f"{root} is not an http:// or https:// URL")
        self._https, self._host, self._port = parts.scheme == "https", parts.hostname, parts.port
        self._headers, self._timeout = {"Accept": "application/json", **headers}, timeout
        if (auth := basic_auth(parts)) is not None:  # user:password@ in place of the key
            self._headers["Authorization"] = auth
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._https:
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                                   context=ssl.create_default_context())
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            self._local.conn = conn
        return conn

    def call(self, method: str, url: str, body: dict[str, object] | None = None) -> object:
        """The parsed JSON answer to one call; SyncCallError for anything else. A kept
        connection the server has closed meanwhile is replaced once."""
        path = request_path(urlsplit(url))
        data = None if body is None else json_bytes(body)
        headers = self._headers if data is None else {**self._headers, "Content-Type": "application/json"}
        for fresh in (False, True):
            conn = self._connection()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = bytearray()
                while piece := resp.read(65536):
                    raw += piece
                    if len(raw) > TOKENIZER_MAX_BYTES:
                        conn.close()
                        self._local.conn = None
                        raise SyncCallError(f"an answer over {TOKENIZER_MAX_BYTES:,} bytes (a broken or hostile server?)")
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                conn.close()
                self._local.conn = None
                if fresh:
                    raise SyncCallError(f"connection error: {exc}") from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._local.conn = None
                raise SyncCallError(f"{type(exc).__name__}: {exc}") from None
        if resp.status >= 400:
            message, _ = _error_message(raw)
            raise SyncCallError(f"HTTP {resp.status}: {message}")
        try:
            return json_value(raw)  # a tokenizer's answer to a long prompt is tens of MB
        except ValueError as exc:
            raise SyncCallError(f"malformed JSON answer: {exc}") from None


def post_object(client: SyncClient, url: str, body: dict[str, object]) -> dict[str, object]:
    """POST `body` with a server tokenizer's client (called from a worker thread) and
    return the JSON object it answers; anything else, an HTTP error or a reply that is
    not an object, is a fatal ProviderError naming the URL."""
    try:
        data = client.call("POST", url, body)
    except SyncCallError as exc:
        raise ProviderError("fatal", f"{url}: {exc}") from None
    if not isinstance(data, dict):
        raise ProviderError("fatal", f"{url}: expected a JSON object")
    return data
