"""Shared plain-HTTP plumbing (aiohttp) for the providers that do not use an SDK.

aiohttp is used rather than an SDK where we can: against a local server the official
openai SDK manages ~570 requests/s on this 2-core machine, aiohttp ~9,700 (measured in
bench/README.md), and client overhead is what limits self-hosted fleets.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import aiohttp

from ..errors import ProviderError
from ..limits import parse_ratelimit_headers
from .base import classify_status
from .bounded import ACCEPT_ENCODING, DEFAULT_MAX_RESPONSE_BYTES, BodyTooLarge, read_bounded


class HTTPClient:
    """One pooled aiohttp session per provider instance, created lazily inside the loop.
    Bodies are read through `bounded.read_bounded` (at most `max_bytes` decoded, inflated
    in pieces): the session's own decompression is off."""

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self._headers = headers or {}
        self._session: aiohttp.ClientSession | None = None
        self.max_bytes = DEFAULT_MAX_RESPONSE_BYTES

    @property
    def headers(self) -> dict[str, str]:
        return dict(self._headers)

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                headers={"Accept-Encoding": ACCEPT_ENCODING, **self._headers},
                auto_decompress=False,
                json_serialize=lambda o: json.dumps(o, ensure_ascii=False),
            )
        return self._session

    async def post_json(self, url: str, body: dict[str, Any], timeout: float) -> tuple[Any, dict[str, float], Any]:
        """POST JSON; return (parsed body, parsed rate-limit headers, raw headers) or raise
        ProviderError."""
        try:
            async with self.session().post(url, json=body, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                raw = await read_bounded(resp, self.max_bytes, url)
                info = parse_ratelimit_headers(resp.headers)
                if resp.status >= 400:
                    message, code = _error_message(raw)
                    raise classify_status(resp.status, message, retry_after=info.get("retry_after"),
                                          ratelimit=info, code=code)
                try:
                    data = json.loads(raw)
                except ValueError as exc:
                    raise ProviderError("transient", f"malformed response body from {url}: {exc}") from None
                return data, info, resp.headers
        except ProviderError:
            raise
        except BodyTooLarge as exc:
            raise ProviderError("fatal", str(exc)) from None
        except asyncio.TimeoutError:
            raise ProviderError("transient", f"no complete answer from {url} within --timeout {timeout:g}s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise ProviderError("transient", f"connection error to {url}: {type(exc).__name__}: {exc}") from None

    async def get_json(self, url: str, timeout: float = 10.0) -> dict[str, Any]:
        try:
            async with self.session().get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                raw = await read_bounded(resp, self.max_bytes, url)
                if resp.status >= 400:
                    message, code = _error_message(raw)
                    raise classify_status(resp.status, message, code=code)
                data = json.loads(raw)
                if not isinstance(data, dict):
                    raise ValueError(f"expected a JSON object, got {type(data).__name__}")
                return data
        except ProviderError:
            raise
        except (asyncio.TimeoutError, aiohttp.ClientError, OSError, ValueError, BodyTooLarge) as exc:
            raise ProviderError("transient", f"cannot reach {url}: {type(exc).__name__}: {exc}") from None

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()


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
    a failure to connect (aiohttp's ClientConnector errors); None for any other error. A
    down server is said as such before anything that follows from its silence."""
    if "ClientConnector" not in exc.message:
        return None
    found = re.search(r"\[([^\]()]*)", exc.message)  # "[Connect call failed ('127.0.0.1', 9)]"
    why = found.group(1).strip() if found else "no connection"
    return "connection refused" if why == "Connect call failed" else why
