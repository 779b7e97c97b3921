"""A hostile HTTP server: each way a server's answer can try to hold a run or its memory.

`python -m asyncbench.sim.hostile --port-file F` serves every behaviour at once, by path
prefix: `http://127.0.0.1:PORT/<behaviour>/v1/chat/completions` (OpenAI),
`.../<behaviour>/v1/messages` (Anthropic), `.../<behaviour>/generate` (TGI). Every POST
gets the behaviour; `GET .../models` and `.../info` answer normally (a run asks them
first), anything else is 404. Written on raw asyncio streams, not a web framework, so
that it can send what no well-behaved framework would (an endless chunked body, a byte
every half second). Used by tests/test_hostile_servers.py and
bench/hostile_servers.py; `sent` counts the body bytes each behaviour got out
before the client hung up.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import zlib
from collections import Counter
from email.utils import formatdate
from pathlib import Path

# behaviour -> what it does (the table in bench/hostile_servers.md has one row each)
BEHAVIOURS = {
    "retry-after-huge": "429 with Retry-After: 1e9 (and retry-after-ms: 1e12)",
    "retry-after-unparsable": "429 with Retry-After: soon",
    "retry-after-date": "429 with Retry-After an HTTP-date one year ahead",
    "always-429": "429 with no Retry-After",
    "endless-body": "200, chunked, an endless JSON string as fast as the socket takes it",
    "gzip-bomb": "200, Content-Encoding: gzip, an endless stream inflating ~1000:1",
    "huge-json": "200, a valid 100 MB JSON answer with its Content-Length",
    "slow-drip": "200, then one body byte every 0.5 s, for ever",
    # issue 35, hostile peers round three: framing, nesting, back-off and redirects
    "chunk-negative": "200, chunked, a chunk-size line of -5, then the connection held open",
    "deep-json": "200, gzip, a valid answer beside a 200,000-deep array (2 KB on the wire)",
    "one-byte-chunks": "200, a valid ~1 MB answer in 1-byte chunks",
    "continue-flood": "100 Continue heads, endlessly",
    "retry-after-zero": "429 with Retry-After: 0",
    "retry-after-past": "429 with Retry-After an HTTP-date one year ago",
    "redirect-cross-origin": "307 to the same path on another origin (a second listener that answers well)",
    # -- issue 35 items 2 and 4: what an answer claims and says (answered in each wire
    # format: `_claims`). Kept together, apart from the transport behaviours above.
    "usage-huge": "200, a one-letter answer claiming 10^15 prompt and 10^15 completion tokens",
    "usage-other-model": "200, a one-letter answer claiming 900,000 prompt and 900,000 completion tokens",
    "usage-1e300": "200, a one-letter answer claiming completion_tokens 1e300",
    "error-and-choices": "200 with an `error` object beside its choices (content)",
    "content-null": "200 whose answer text is null",
    "escape-sequences": "ANSI/OSC escapes, bidi overrides and rich markup in the answer; in the error "
                        "message of a 400 for prompts that say `fail`",
    "echo-key": "200 echoing the request's key hex-encoded (both cases), \\u-escaped, spaced and reversed",
    # -- issue 38: streamed answers (text/event-stream), in each wire format's events
    "stream-stall": "200, an event stream: one token, then the stream held open for ever",
    "stream-no-usage": "200, an event stream: a whole answer that never says its usage",
    "stream-malformed": "200, an event stream: one token, then an event that is not JSON",
}
# The text `escape-sequences` answers with: clear the screen, set the window title, a
# fake progress line, an OSC 52 clipboard write, a right-to-left override, rich markup.
ESCAPES = ("\x1b[2J\x1b[H\x1b]0;pwned\x07\r20/20 complete\x1b]52;c;cm0gLXJmIH4=\x07"
           "\u202etxet desrever\u202c [bold red]markup[/bold red] \x9b31m\x7f done")
_CLAIMS = {"usage-huge": (10 ** 15, 10 ** 15), "usage-other-model": (900_000, 900_000), "usage-1e300": (5, 1e300)}
_CHUNK = 64 * 1024


# A valid answer in every transport's shape at once (OpenAI chat and completions,
# Anthropic messages, TGI generate), for the behaviours that hide one in hostile framing.
_ANSWER = {"id": "x", "object": "chat.completion", "type": "message", "role": "assistant", "model": "m",
           "choices": [{"index": 0, "finish_reason": "stop", "text": "ok",
                        "message": {"role": "assistant", "content": "ok"}}],
           "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
           "generated_text": "ok", "details": {"finish_reason": "eos_token", "generated_tokens": 1},
           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2, "input_tokens": 1,
                     "output_tokens": 1}}


class HostileServer:
    def __init__(self) -> None:
        self.sent: Counter[str] = Counter()  # body bytes written, per behaviour
        self.requests: Counter[str] = Counter()
        # the other origin `redirect-cross-origin` points at (`handle_other` listens there);
        # its requests are counted as requests["other-origin"]
        self.other_port = 0

    async def handle_other(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The second origin: every request gets a valid answer (which, followed, would be
        cached as the first origin's)."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(v) for k, _, v in (ln.partition(":") for ln in head.decode("latin-1").split("\r\n"))
                               if k.strip().lower() == "content-length"), 0)
                await reader.readexactly(length)
                self.requests["other-origin"] += 1
                await _send(writer, 200, {}, json.dumps(_ANSWER).encode())
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        length = int(headers.get("content-length", "0") or 0)
        body = await reader.readexactly(length) if length else b""
        behaviour = path.strip("/").split("/")[0]
        if method == "GET" and path.rstrip("/").endswith(("/models", "/info")):
            body = json.dumps({"data": [{"id": "m", "object": "model", "max_model_len": 8192}],
                               "model_id": "m", "max_input_tokens": 4000, "max_total_tokens": 8192}).encode()
            await _send(writer, 200, {"Content-Type": "application/json"}, body)
            return True
        if method != "POST" or behaviour not in BEHAVIOURS or path.endswith(("/tokenize", "/detokenize")):
            await _send(writer, 404, {"Content-Type": "application/json"}, b'{"error": {"message": "not found"}}')
            return True
        self.requests[behaviour] += 1
        error = b'{"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}'
        if behaviour == "retry-after-huge":
            await _send(writer, 429, {"Retry-After": "1e9", "retry-after-ms": "1e12"}, error)
        elif behaviour == "retry-after-unparsable":
            await _send(writer, 429, {"Retry-After": "soon"}, error)
        elif behaviour == "retry-after-date":
            await _send(writer, 429, {"Retry-After": formatdate(time.time() + 365 * 86400, usegmt=True)}, error)
        elif behaviour == "always-429":
            await _send(writer, 429, {}, error)
        elif behaviour in _ANSWERS:
            status, reply, extra = _answer(behaviour, path, headers, body)
            await _send(writer, status, {**extra}, json.dumps(reply).encode())
        elif behaviour == "retry-after-zero":
            await _send(writer, 429, {"Retry-After": "0"}, error)
        elif behaviour == "retry-after-past":
            await _send(writer, 429, {"Retry-After": formatdate(time.time() - 365 * 86400, usegmt=True)}, error)
        elif behaviour == "redirect-cross-origin":
            await _send(writer, 307, {"Location": f"http://127.0.0.1:{self.other_port}{path}"}, error)
        elif behaviour.startswith("stream-"):
            await self._stream(writer, behaviour, path)
            return False
        else:
            await getattr(self, "_" + behaviour.replace("-", "_"))(writer, behaviour)
            return False
        return True

    async def _stream(self, writer: asyncio.StreamWriter, name: str, path: str) -> None:
        """An event stream in `path`'s wire format (`_events`) that stalls, never says its
        usage, or breaks, as `name` says."""
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        head, token, tail = _events(path)
        writer.write(_chunk(head + token))
        await _drain(writer)
        self.sent[name] += len(head + token)
        if name == "stream-stall":
            while not writer.is_closing():  # held open: a client that waits, waits for ever
                await asyncio.sleep(0.5)
            return
        rest = b'data: {"choices": [{"delta": \n\n' if name == "stream-malformed" else token + tail
        writer.write(_chunk(rest) + b"0\r\n\r\n")
        self.sent[name] += len(rest)
        await _drain(writer)

    async def _endless_body(self, writer: asyncio.StreamWriter, name: str) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(_chunk(b'{"choices": [{"message": {"content": "'))
        block = _chunk(b"a" * _CHUNK)
        while not writer.is_closing():
            writer.write(block)
            await _drain(writer)
            self.sent[name] += _CHUNK

    async def _gzip_bomb(self, writer: asyncio.StreamWriter, name: str) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        first = packer.compress(b'{"choices": [{"message": {"content": "')
        spaces = b" " * (16 * 1024 * 1024)
        if first:
            writer.write(_chunk(first))
        while not writer.is_closing():
            piece = packer.compress(spaces) + packer.flush(zlib.Z_SYNC_FLUSH)
            writer.write(_chunk(piece))
            await _drain(writer)
            self.sent[name] += len(piece)

    async def _huge_json(self, writer: asyncio.StreamWriter, name: str) -> None:
        size = 100 * 1024 * 1024
        head = b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop", ' \
               b'"message": {"role": "assistant", "content": "'
        tail = b'"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}'
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     f"{len(head) + size + len(tail)}\r\n\r\n".encode() + head)
        block = b"a" * _CHUNK
        for _ in range(size // _CHUNK):
            if writer.is_closing():
                return
            writer.write(block)
            await _drain(writer)
            self.sent[name] += _CHUNK
        writer.write(tail)
        await writer.drain()

    async def _slow_drip(self, writer: asyncio.StreamWriter, name: str) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        while not writer.is_closing():
            writer.write(_chunk(b" "))
            await _drain(writer)
            self.sent[name] += 1
            await asyncio.sleep(0.5)


    async def _chunk_negative(self, writer: asyncio.StreamWriter, name: str) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"-5\r\nhello\r\n")
        await _drain(writer)
        while not writer.is_closing():  # held open: a client that waits, waits for ever
            await asyncio.sleep(0.5)
            writer.write(b"")
            await _drain(writer)

    async def _deep_json(self, writer: asyncio.StreamWriter, name: str) -> None:
        depth = 200_000
        raw = json.dumps(_ANSWER)[:-1].encode() + b', "x": ' + b"[" * depth + b"]" * depth + b"}"
        body = zlib.compress(raw, 9, wbits=zlib.MAX_WBITS | 16)  # gzip: ~2 KB on the wire
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await _drain(writer)
        self.sent[name] += len(body)

    async def _one_byte_chunks(self, writer: asyncio.StreamWriter, name: str) -> None:
        answer = dict(_ANSWER, pad="a" * 1_000_000)
        raw = json.dumps(answer).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        for at in range(0, len(raw), _CHUNK):
            writer.write(b"".join(b"1\r\n%c\r\n" % byte for byte in raw[at:at + _CHUNK]))
            await _drain(writer)
            self.sent[name] += min(_CHUNK, len(raw) - at)
        writer.write(b"0\r\n\r\n")
        await _drain(writer)

    async def _continue_flood(self, writer: asyncio.StreamWriter, name: str) -> None:
        block = b"HTTP/1.1 100 Continue\r\n\r\n" * 1000
        while not writer.is_closing():
            writer.write(block)
            await _drain(writer)
            self.sent[name] += len(block)


# -- answers in each wire format (the issue 35 block) ---------------------------------
_ANSWERS = ("usage-huge", "usage-other-model", "usage-1e300", "error-and-choices", "content-null",
            "escape-sequences", "echo-key")


def _answer(behaviour: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, object, dict[str, str]]:
    """(status, JSON body, headers) of one answer of `behaviour`, in the wire format of
    `path`: Anthropic's /v1/messages, TGI's /generate, else OpenAI chat or completions."""
    api = "anthropic" if path.endswith("/messages") else "tgi" if path.endswith(("/generate", "/generate_stream")) else "openai"
    key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
    text, prompt_tokens, completion_tokens = "a", 3, 1
    if behaviour in _CLAIMS:
        prompt_tokens, completion_tokens = _CLAIMS[behaviour]  # type: ignore[assignment]
    elif behaviour == "escape-sequences":
        if b"fail" in body:
            message = f"upstream failed: {ESCAPES}"
            error = ({"type": "error", "error": {"type": "invalid_request_error", "message": message}}
                     if api == "anthropic" else {"error": message, "error_type": "validation"} if api == "tgi"
                     else {"error": {"message": message, "type": "invalid_request_error"}})
            return 400, error, {}
        text = ESCAPES
    elif behaviour == "echo-key":
        text = "you sent " + " | ".join(echoes_of(key))
    reply = _render(api, path, text, prompt_tokens, completion_tokens)
    extra = {"x-prompt-tokens": str(prompt_tokens)} if api == "tgi" else {}
    if behaviour == "error-and-choices":
        reply["error"] = ({"type": "overloaded_error", "message": "Overloaded"} if api == "anthropic"
                          else "Model is overloaded" if api == "tgi" else
                          {"message": "The server had an error while processing your request", "type": "server_error"})
    elif behaviour == "content-null":
        if api == "anthropic":
            reply["content"] = None
        elif api == "tgi":
            reply["generated_text"] = None
        else:
            choice = reply["choices"][0]  # type: ignore[index]
            choice["message" if "message" in choice else "text"] = (
                {"role": "assistant", "content": None} if "message" in choice else None)
    return 200, reply, extra


def _render(api: str, path: str, text: str, prompt_tokens: object, completion_tokens: object) -> dict[str, object]:
    """A well-formed answer of `api` (as the simulator's formats.py renders one)."""
    if api == "anthropic":
        return {"id": "msg_h", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
                "content": [{"type": "text", "text": text}], "stop_sequence": None,
                "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens}}
    if api == "tgi":
        return {"generated_text": text, "details": {"finish_reason": "eos_token", "generated_tokens": completion_tokens}}
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    if path.endswith("/chat/completions"):
        choice: dict[str, object] = {"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}
        return {"id": "h", "object": "chat.completion", "model": "m", "choices": [choice], "usage": usage}
    return {"id": "h", "object": "text_completion", "model": "m", "usage": usage,
            "choices": [{"index": 0, "finish_reason": "stop", "text": text}]}


def _events(path: str) -> tuple[bytes, bytes, bytes]:
    """(head, one token, tail) of a streamed answer in `path`'s wire format, without usage
    anywhere (what `stream-no-usage` sends whole)."""
    if path.endswith("/messages"):
        start = {"type": "message_start", "message": {"id": "msg_h", "type": "message", "role": "assistant",
                                                      "model": "m", "content": [], "usage": {}}}
        block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}}
        end = [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
               ("message_stop", {"type": "message_stop"})]
        head = b"".join(f"event: {n}\ndata: {json.dumps(v)}\n\n".encode()
                        for n, v in (("message_start", start), ("content_block_start", block)))
        return (head, f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n".encode(),
                b"".join(f"event: {n}\ndata: {json.dumps(v)}\n\n".encode() for n, v in end))
    if path.endswith("/generate_stream"):
        token = {"index": 1, "token": {"id": 1, "text": "a", "special": False}, "generated_text": None, "details": None}
        last = {**token, "generated_text": "aa", "details": None}
        return b"", f"data:{json.dumps(token)}\n\n".encode(), f"data:{json.dumps(last)}\n\n".encode()
    token = {"id": "h", "choices": [{"index": 0, "delta": {"content": "a"}, "text": "a", "finish_reason": None}]}
    last = {"id": "h", "choices": [{"index": 0, "delta": {}, "text": "", "finish_reason": "stop"}]}
    return b"", f"data: {json.dumps(token)}\n\n".encode(), f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode()


def echoes_of(key: str) -> list[str]:
    """The key as `echo-key` repeats it: hex-encoded in lower and upper case, every
    character JSON-\\u-escaped, spaced out, and reversed."""
    raw = key.encode()
    return [raw.hex(), raw.hex().upper(), "".join(f"\\u{ord(c):04x}" for c in key), " ".join(key), key[::-1]]


async def _drain(writer: asyncio.StreamWriter) -> None:
    """drain() that ends the behaviour when the client has gone (asyncio's own drain
    returns at once on a closing transport, which would spin a loop for ever)."""
    await writer.drain()
    if writer.is_closing():
        raise ConnectionResetError


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _send(writer: asyncio.StreamWriter, status: int, headers: dict[str, str], body: bytes) -> None:
    reason = {200: "OK", 307: "Temporary Redirect", 400: "Bad Request", 404: "Not Found",
              429: "Too Many Requests"}[status]
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(body)}", "Content-Type: application/json",
             *(f"{k}: {v}" for k, v in headers.items())]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    await writer.drain()


async def serve(port: int = 0, port_file: Path | None = None) -> None:
    server = HostileServer()
    other = await asyncio.start_server(server.handle_other, "127.0.0.1", 0)
    server.other_port = other.sockets[0].getsockname()[1]
    listener = await asyncio.start_server(server.handle, "127.0.0.1", port)
    chosen = listener.sockets[0].getsockname()[1]
    if port_file is not None:
        tmp = port_file.with_name(port_file.name + ".tmp")
        tmp.write_text(f"{chosen}\n")
        tmp.replace(port_file)
    print(f"hostile server listening on 127.0.0.1:{chosen}", flush=True)
    async with listener:
        await listener.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """`python -m asyncbench.sim.hostile [--port N] [--port-file PATH]`: a test double
    started by the hostile-server benchmark, not a user command (argparse stays in
    commands/)."""
    args = list(sys.argv[1:] if argv is None else argv)
    options = {"--port": "0", "--port-file": ""}
    while args:
        flag = args.pop(0)
        if flag not in options or not args:
            raise SystemExit(f"usage: python -m asyncbench.sim.hostile [--port N] [--port-file PATH] (got {flag!r})")
        options[flag] = args.pop(0)
    asyncio.run(serve(int(options["--port"]), Path(options["--port-file"]) if options["--port-file"] else None))


if __name__ == "__main__":
    main()
