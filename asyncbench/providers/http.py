"""Shared plain-HTTP plumbing for the providers that do not use an SDK.

An SDK is avoided where we can: against a local server the official openai SDK manages
~570 requests/s on this 2-core machine, aiohttp ~9,700 (bench/README.md), and our own
HTTP/1.1 client (`http1.py`) costs about half of aiohttp's CPU per request
(bench/raw_client_ratio.md): client overhead is what limits self-hosted fleets.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ProviderError
from ..limits import parse_ratelimit_headers
from .base import classify_status
from .bounded import ACCEPT_ENCODING, DEFAULT_MAX_RESPONSE_BYTES, BodyTooLarge
from .http1 import Answer, CallTimeout, HTTP1Client, HTTPFailure


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

    async def _call(self, method: str, url: str, body: bytes | None, timeout: float, failed: str) -> Answer:
        """One call, its failures as ProviderErrors: a body over the cap is fatal, anything
        else the transport met (no connection, a hang-up, the deadline) transient and
        said as `failed` + the URL."""
        try:
            return await self._client.request(method, url, body, timeout, self.max_bytes)
        except BodyTooLarge as exc:
            raise ProviderError("fatal", str(exc)) from None
        except CallTimeout:
            raise ProviderError("transient", f"no complete answer from {url} within --timeout {timeout:g}s") from None
        except HTTPFailure as exc:
            raise ProviderError("transient", f"{failed} {url}: {exc}", unreachable=exc.connect) from None

    async def post_json(self, url: str, body: dict[str, Any], timeout: float) -> tuple[Any, dict[str, float], dict[str, str]]:
        """POST JSON; return (parsed body, parsed rate-limit headers, headers with lower-case
        names) or raise ProviderError."""
        answer = await self._call("POST", url, json.dumps(body, ensure_ascii=False).encode(), timeout,
                                  "connection error to")
        info = parse_ratelimit_headers(answer.headers)
        if answer.status >= 400:
            message, code = _error_message(answer.body)
            raise classify_status(answer.status, message, retry_after=info.get("retry_after"), ratelimit=info, code=code)
        try:
            data = json.loads(answer.body)
        except ValueError as exc:
            raise ProviderError("transient", f"malformed response body from {url}: {exc}") from None
        return data, info, answer.headers

    async def get_json(self, url: str, timeout: float = 10.0) -> dict[str, Any]:
        answer = await self._call("GET", url, None, timeout, "cannot reach")
        if answer.status >= 400:
            message, code = _error_message(answer.body)
            raise classify_status(answer.status, message, code=code)
        try:
            data = json.loads(answer.body)
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
        data = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")[:300], None
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, dict):
        code = err.get("code")
        if not isinstance(code, str) or not code:
            code = err.get("type") or (data.get("error_type") if isinstance(data, dict) else None) or code
        return str(err.get("message") or err.get("error") or err), None if code is None else str(code)
    return str(err), data.get("error_type") if isinstance(data, dict) else None


def tokenizer_client(root: str, headers: dict[str, str], timeout: float) -> Any:
    """The synchronous httpx client a server tokenizer posts with. A plain-http server
    gets a client without certificate loading (`verify=False` only skips it: no TLS is
    spoken to an http:// URL), which was a fifth of a small run's start-up CPU."""
    import httpx

    plain = root.startswith("http://")
    return httpx.Client(headers=headers, timeout=timeout, verify=not plain)


def post_object(client: Any, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST `body` with a synchronous httpx client (the server tokenizers', called from a
    worker thread) and return the JSON object it answers; anything else, an HTTP error or
    a reply that is not an object, is a fatal ProviderError naming the URL."""
    import httpx

    try:
        resp = client.post(url, json=body)
        resp.raise_for_status()
        data = resp.json()
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        return data
    except (httpx.HTTPError, ValueError) as exc:
        raise ProviderError("fatal", f"{url}: {exc}") from None


def unreachable_reason(exc: ProviderError) -> str | None:
    """Why nothing answered at all ("connection refused", a DNS failure...), when `exc` is
    a failure to connect; None for any other error. A down server is said as such before
    anything that follows from its silence."""
    return exc.unreachable
