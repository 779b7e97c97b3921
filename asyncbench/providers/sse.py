"""Server-sent events read as they arrive: the `text/event-stream` format of the WHATWG
HTML standard (section 9.2.6, "Interpreting an event stream"), which every streaming API
asyncbench speaks uses (OpenAI and every OpenAI-compatible server, Anthropic, TGI).

What is kept of the standard: a line ends in CRLF, LF or CR; a line starting with `:` is a
comment (Anthropic and llama.cpp keep-alives); `field: value` with one leading space of
the value dropped; `data` lines of one event joined by LF; `event` names it (default
"message"); a blank line dispatches it; an event still open when the stream ends is
dropped; `id` and `retry` are read and ignored (a client that never reconnects). The data
stay bytes: the JSON parser takes them as they are.

A broken or hostile server can make one event endless (a `data:` line that never ends)
or make millions of tiny ones: one event's bytes are capped (`max_event`, the answer's
byte cap), and the caller caps the events (stream_reply.py).
"""

from __future__ import annotations

from .bounded import AnswerTooCostly


class SSEDecoder:
    """Bytes in (any split), (event name, data) pairs out, in order."""

    __slots__ = ("_buf", "_cr", "_data", "_event", "_size", "max_event", "url")

    def __init__(self, max_event: int, url: str) -> None:
        self.max_event, self.url = max_event, url
        self._buf = b""
        self._cr = False  # the last piece ended in CR: an LF opening the next one ends no line
        self._data: list[bytes] | None = None
        self._event = b""
        self._size = 0

    def feed(self, data: bytes) -> list[tuple[str, bytes]]:
        if self._cr and data.startswith(b"\n"):
            data = data[1:]
        self._cr = data.endswith(b"\r")
        buf = self._buf + data if self._buf else data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        if len(self._buf) + self._size > self.max_event:
            raise AnswerTooCostly(f"{self.url} sent a stream event over {self.max_event:,} bytes "
                                  "(a broken or hostile server?)")
        out: list[tuple[str, bytes]] = []
        for line in lines:
            if not line:  # a blank line: dispatch
                if self._data is not None:
                    out.append((self._event.decode("utf-8", "replace") or "message", b"\n".join(self._data)))
                self._data, self._event, self._size = None, b"", 0
                continue
            if line[0] == 58:  # ":" a comment
                continue
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._size += len(value) + 1
                if self._size > self.max_event:
                    raise AnswerTooCostly(f"{self.url} sent a stream event over {self.max_event:,} bytes "
                                          "(a broken or hostile server?)")
                if self._data is None:
                    self._data = [value]
                else:
                    self._data.append(value)
            elif name == b"event":
                self._event = value
        return out
