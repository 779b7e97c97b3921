"""The official SDKs' HTTP transport (httpx2) with bounded, piecewise-decoded bodies.

The SDKs read a response whole, and httpx2 inflates gzip itself; this transport asks for
`gzip, deflate`, inflates here through `bounded.BoundedDecoder`, and gives the SDK an
identity body that stops with BodyTooLarge at the cap (the SDK wraps it in its
connection error; `body_too_large_cause` finds it again). A batch's result file is a
download, capped at BATCH_DOWNLOAD_MAX_BYTES instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2

from .bounded import ACCEPT_ENCODING, BATCH_DOWNLOAD_MAX_BYTES, BodyTooLarge, BoundedDecoder, declared_too_large


def _is_download(path: str) -> bool:
    """A batch's result file (OpenAI files/{id}/content, Anthropic batches/{id}/results)."""
    return (path.endswith("/content") and "/files/" in path) or (path.endswith("/results") and "/batches/" in path)


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, decoder: BoundedDecoder) -> None:
        self.inner, self.decoder = inner, decoder

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            for piece in self.decoder.feed(chunk):
                if piece:
                    yield piece
        for piece in self.decoder.flush():
            if piece:
                yield piece

    async def aclose(self) -> None:
        await self.inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """The SDKs' transport with every response body decoded here, in pieces, under the
    cap: httpx2 then sees an identity body (Content-Encoding removed)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
        self.inner, self.limit = inner, limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        response = await self.inner.handle_async_request(request)
        url = f"{request.url.scheme}://{request.url.netloc.decode()}{request.url.path}"
        limit = max(self.limit, BATCH_DOWNLOAD_MAX_BYTES) if _is_download(request.url.path) else self.limit
        try:
            declared_too_large(response.headers, limit, url)
            decoder = BoundedDecoder(response.headers.get("content-encoding"), limit, url)
        except BodyTooLarge:
            await response.aclose()
            raise
        headers = [(k, v) for k, v in response.headers.raw if k.lower() not in (b"content-encoding", b"content-length")]
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(response.status_code, headers=headers,
                               stream=_BoundedStream(response.stream, decoder), extensions=response.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()


def sdk_http_client(default_client: Any, limit: int) -> Any:
    """The SDK's own default client class (its timeouts, redirects) over a bounded
    transport with the SDKs' pool limits."""
    pool = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
    return default_client(transport=BoundedTransport(httpx2.AsyncHTTPTransport(limits=pool), limit))
