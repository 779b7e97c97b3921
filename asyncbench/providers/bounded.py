"""Response bodies read in pieces, decompressed in pieces, and cut off at a size cap.

A server's answer is a few kilobytes; a hostile or broken one can send an endless
chunked body (1.1 GB in 5 s), a gzip bomb (1 MB on the wire, 1 GB inflated) or a 100 MB
JSON document. Every transport asyncbench uses reads through here:

- our HTTP/1.1 client (`openai-compat:`, `tgi:`; `http1.py`) feeds each piece of the
  body to a `BoundedDecoder` as it arrives;
- httpx2 under the official SDKs (`openai:`, `anthropic:`): `sdk_transport.BoundedTransport`
  wraps the SDK's transport and hands it a stream that is already decoded and bounded.

Both ask for `gzip, deflate` only and inflate with zlib in pieces of at most `_PIECE`
bytes (`decompressobj.decompress(data, max_length)`), so memory stays under the cap plus
one piece whatever the compression ratio. A body over the cap is refused as soon as it
passes it (at once when its Content-Length says so), and its connection dropped.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

# Default cap on one response's decoded body (--max-response-bytes). A long-context
# answer of 16k tokens is ~64 KB of JSON; 4 MiB leaves room for anything real, and a
# hostile server can make a run hold at most concurrency x this (32 x 4 MiB = 128 MiB).
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
# Batch result files are answers by the thousand, read whole by the SDKs: their own cap.
BATCH_DOWNLOAD_MAX_BYTES = 4 * 1024 ** 3
ACCEPT_ENCODING = "gzip, deflate"
_PIECE = 64 * 1024


class Refused(Exception):
    """An answer asyncbench will not take: a fatal error for the sample, never retried (the
    server would send the same again). The SDKs wrap it in their connection error;
    `refusal_cause` finds it again."""


class BodyTooLarge(Refused):
    """A response body over its cap, or in an encoding asyncbench did not ask for."""


class AnswerTooCostly(Refused):
    """An answer framed to cost more to read than any real one: more chunks, reads, wire
    bytes or interim (1xx) heads than its caps allow (a valid 1 MB answer dripped as a
    million one-byte chunks took 3 CPU-s to parse, issue 35)."""


# Pieces one body may come in (chunks, or the reads that carry them): a JSON answer comes
# with a Content-Length or in a few large chunks, never in thousands.
MAX_PIECES = 16_384


class BoundedDecoder:
    """One response body's bytes as they arrive: decoded per its Content-Encoding and
    counted; `feed` raises BodyTooLarge once the decoded size passes `limit`."""

    def __init__(self, encoding: str | None, limit: int, url: str) -> None:
        self.limit, self.url, self.size = limit, url, 0
        enc = (encoding or "identity").strip().lower()
        if enc in ("", "identity"):
            self._inflate: zlib._Decompress | None = None
        elif enc in ("gzip", "x-gzip"):
            self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif enc == "deflate":
            self._inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # zlib header, detected
        else:
            raise BodyTooLarge(f"{url} answered in Content-Encoding {enc!r}, not one asked for ({ACCEPT_ENCODING})")

    def _count(self, piece: bytes) -> bytes:
        self.size += len(piece)
        if self.size > self.limit:
            raise BodyTooLarge(too_large(self.url, self.limit))
        return piece

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._inflate is None:
            return [self._count(chunk)] if chunk else []
        out, data = [], chunk
        try:
            while data:
                out.append(self._count(self._inflate.decompress(data, _PIECE)))
                data = self._inflate.unconsumed_tail
        except zlib.error as exc:
            raise BodyTooLarge(f"{self.url} sent a body that does not inflate ({exc})") from None
        return out

    def flush(self) -> list[bytes]:
        if self._inflate is None:
            return []
        return self.feed(b"") + [self._count(self._inflate.flush(_PIECE))]


def too_large(url: str, limit: int) -> str:
    return (f"the answer from {url} is over --max-response-bytes {limit:,} bytes (a broken or hostile server?); "
            "raise --max-response-bytes if its answers are really that large")


def declared_too_large(headers: Mapping[str, str], limit: int, url: str) -> None:
    """Refuse before reading when the Content-Length already says the body is too large
    (only for an identity body: a compressed one is counted once decoded)."""
    length = headers.get("content-length")
    encoding = (headers.get("content-encoding") or "identity").strip().lower()
    if encoding == "identity" and length is not None and length.isdigit() and int(length) > limit:
        raise BodyTooLarge(too_large(url, limit))


def refusal_cause(exc: BaseException) -> Refused | None:
    """The Refused an SDK wrapped in its connection error, if that is what it was."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, Refused):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
