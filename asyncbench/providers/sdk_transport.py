"""The official SDKs' HTTP transport (httpx2) with bounded, piecewise-decoded bodies and
no redirect to another origin.

The SDKs read a response whole, and httpx2 inflates gzip itself; this transport asks for
`gzip, deflate`, inflates here through `bounded.BoundedDecoder`, and gives the SDK an
identity body that stops with BodyTooLarge at the cap (the SDK wraps it in its
connection error; `refusal_cause` finds it again). A batch's result file is a
download, capped at BATCH_DOWNLOAD_MAX_BYTES instead; a streamed answer at its own cap,
which grows with the tokens asked (`stream_headers`), as on our HTTP/1.1 client.

The SDKs' clients follow redirects. One to another origin (scheme, host or port) is
refused here, before httpx2 follows it: httpx2 drops the Authorization header on the way
but not the prompt (nor Anthropic's x-api-key), and the other origin's answer would be
cached as this endpoint's (issue 35). A redirect within the origin is followed: the same
server answers, to the same key, as behind a proxy that adds a trailing slash.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Protocol, TypeVar

import httpx2

from .bounded import (
    ACCEPT_ENCODING,
    BATCH_DOWNLOAD_MAX_BYTES,
    MAX_PIECES,
    AnswerTooCostly,
    BodyTooLarge,
    BoundedDecoder,
    Refused,
    declared_too_large,
    refusal_cause,
)

# A streamed request's own body cap (stream_reply.stream_caps: it grows with the tokens
# asked, as a stream repeats its envelope per token), set by the provider on the call
# and taken off here before the request leaves: the server never sees it.
BODY_CAP_HEADER = "x-asyncbench-body-cap"


def stream_headers(cap: int) -> dict[str, str]:
    """The `extra_headers` of an SDK call whose body may take `cap` bytes."""
    return {BODY_CAP_HEADER: str(cap)}


def _is_download(path: str) -> bool:
    """A batch's result file (OpenAI files/{id}/content, Anthropic batches/{id}/results)."""
    return (path.endswith("/content") and "/files/" in path) or (path.endswith("/results") and "/batches/" in path)


class RedirectRefused(Refused):
    """A 3xx to another origin than the request's."""


def _origin(url: httpx2.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, url.port or default


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, decoder: BoundedDecoder) -> None:
        self.inner, self.decoder = inner, decoder

    async def __aiter__(self) -> AsyncIterator[bytes]:
        # one piece per chunk h11 read, or per read of a sized body (a TLS record is 16 KB):
        # a batch download's cap of gigabytes allows it a piece per KB more
        pieces, cap = 0, MAX_PIECES + self.decoder.limit // 1024
        async for chunk in self.inner:
            pieces += 1
            if pieces > cap:
                raise AnswerTooCostly(f"{self.decoder.url} sent its answer in over {cap:,} pieces "
                                      "(a broken or hostile server?)")
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
        own_cap = request.headers.pop(BODY_CAP_HEADER, None)
        response = await self.inner.handle_async_request(request)
        url = f"{request.url.scheme}://{request.url.netloc.decode()}{request.url.path}"
        if response.is_redirect and "location" in response.headers:
            try:
                target = request.url.join(response.headers["location"])
            except httpx2.InvalidURL:
                target = None
            if target is None or _origin(target) != _origin(request.url):
                await response.aclose()
                raise RedirectRefused(f"{url} answered {response.status_code}, a redirect to another origin "
                                      f"({response.headers['location'][:200]}); asyncbench does not send a prompt "
                                      "there: give the URL that answers as the base URL")
        limit = max(self.limit, BATCH_DOWNLOAD_MAX_BYTES) if _is_download(request.url.path) else \
            max(self.limit, int(own_cap)) if own_cap and own_cap.isdigit() else self.limit
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


def connection_reason(exc: BaseException) -> str:
    """What an SDK's "Connection error." was: the innermost cause it wraps (h11's
    "illegal chunk header", a refused connection), so that a failed sample says why."""
    inner = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    return str(inner) or type(inner).__name__


class ByteStream(Protocol):
    """An SDK's raw streamed response (openai's and anthropic's AsyncAPIResponse): its body
    as it comes."""

    def iter_bytes(self) -> AsyncIterator[bytes]: ...


C = TypeVar("C")


async def stream_into(raw: ByteStream, feed: Callable[[bytes], None]) -> None:
    """A streamed answer's bytes from an SDK's raw response (`with_streaming_response`)
    to `feed` as they come. The SDKs wrap errors of the request in their own, not those
    of reading its body: a cap met (`Refused`) is fatal, a dropped or timed-out read
    transient, said as the SDKs say a connection error."""
    from ..errors import ProviderError

    try:
        async for piece in raw.iter_bytes():
            feed(piece)
    except httpx2.TimeoutException:  # the SDK's timeout is per read: a stream that stalls
        raise ProviderError("transient", "timed out: the stream stalled past --timeout") from None
    except httpx2.HTTPError as exc:
        if (refused := refusal_cause(exc)) is not None:
            raise ProviderError("fatal", str(refused)) from None
        raise ProviderError("transient", f"connection error: {connection_reason(exc)}") from None


def sdk_http_client(default_client: Callable[..., C], limit: int) -> C:
    """The SDK's own default client class (its timeouts, redirects) over a bounded
    transport with the SDKs' pool limits."""
    pool = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
    return default_client(transport=BoundedTransport(httpx2.AsyncHTTPTransport(limits=pool), limit))
