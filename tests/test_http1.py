"""The self-hosted providers' HTTP/1.1 client (asyncbench/providers/http1.py) against a
real server on 127.0.0.1 that writes each framing RFC 9112 allows byte for byte: chunked
bodies with extensions and trailers, bodies ended by the close, interim 1xx answers,
keep-alive and `Connection: close`, and the broken answers a client must refuse. The
hostile behaviours (endless bodies, gzip bombs, slow drips) are in test_hostile_servers.py,
the real servers (llama.cpp, the simulator's aiohttp) in their own tests."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from asyncbench.errors import ProviderError
from asyncbench.providers.http import HTTPClient
from asyncbench.providers.http1 import HTTP1Client

OK = json.dumps({"ok": True}).encode()


def _framed(path: str) -> tuple[bytes, bool]:
    """The canned answer for `path`, and whether the server closes after writing it."""
    if path == "/length":
        return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(OK), OK), False
    if path == "/chunked":
        return (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5;ext=1\r\n" + OK[:5] + b"\r\n" + b"%x\r\n" % (len(OK) - 5) + OK[5:] + b"\r\n"
                b"0\r\nX-Trailer: yes\r\n\r\n"), False
    if path == "/gzip-chunked":
        body = gzip.compress(OK)
        return (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"), False
    if path == "/until-close":
        return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + OK, True
    if path == "/length-then-close":  # keep-alive by default, then closed unsaid (llama.cpp after a stream)
        return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(OK), OK), True
    if path == "/close":
        return b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(OK), OK), True
    if path == "/continue":
        return (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(OK), OK)), False
    if path == "/repeated":
        return (b"HTTP/1.1 200 OK\r\nX-Ratelimit-Remaining-Requests: 7\r\nX-Multi: a\r\nX-Multi: b\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(OK), OK)), False
    if path == "/error":
        err = json.dumps({"error": {"message": "context too long", "code": "context_length_exceeded"}}).encode()
        return b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(err), err), False
    if path == "/surrogate":  # valid JSON, but "\ud800" is no text: orjson refuses it, json takes it
        body = b'{"choices": [{"text": "a\\ud800b", "finish_reason": "stop"}]}'
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body), False
    if path == "/not-http":
        return b"SSH-2.0-OpenSSH_9.6\r\n\r\n", True
    if path == "/bad-header":
        return b"HTTP/1.1 200 OK\r\nno colon here\r\nContent-Length: 2\r\n\r\n{}", True
    if path == "/huge-head":
        return b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 70_000 + b"\r\n\r\n", True
    if path == "/cut":
        return b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"ok\":", True
    if path == "/bad-chunk":
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", True
    raise AssertionError(path)


class Server:
    """Reads each request (head and Content-Length body), answers it per its path."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[tuple[bytes, dict[str, str], bytes]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append((lines[0].encode(), headers, body))
                answer, close = _framed(lines[0].split(" ")[1])
                writer.write(answer)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def serve(test: Callable[[HTTPClient, str, Server], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        server = Server()
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        client = HTTPClient({"Authorization": "Bearer k"})
        try:
            return await test(client, f"http://127.0.0.1:{port}", server)
        finally:
            await client.aclose()
            listener.close()

    return asyncio.run(main())


@pytest.mark.parametrize("path", ["/length", "/chunked", "/gzip-chunked", "/until-close", "/close", "/continue"])
def test_every_framing_gives_the_body(path: str) -> None:
    async def go(client: HTTPClient, url: str, server: Server) -> None:
        data, _, _ = await client.post_json(url + path, {"prompt": "héllo"}, 5)
        assert data == {"ok": True}
        line, headers, body = server.requests[0]
        assert line == f"POST {path} HTTP/1.1".encode()
        assert headers["host"] == url.removeprefix("http://") and headers["authorization"] == "Bearer k"
        assert headers["content-type"] == "application/json" and headers["accept-encoding"] == "gzip, deflate"
        assert json.loads(body) == {"prompt": "héllo"}

    serve(go)


@pytest.mark.parametrize("path,reused", [("/length", True), ("/chunked", True), ("/continue", True),
                                          ("/close", False), ("/until-close", False)])
def test_keep_alive_reuses_the_connection_unless_the_answer_ends_it(path: str, reused: bool) -> None:
    async def go(client: HTTPClient, url: str, server: Server) -> None:
        for _ in range(3):
            data, _, _ = await client.post_json(url + path, {}, 5)
            assert data == {"ok": True}
        assert server.connections == (1 if reused else 3)

    serve(go)


def test_concurrent_calls_each_get_their_own_answer_on_their_own_connection() -> None:
    async def go(client: HTTPClient, url: str, server: Server) -> None:
        answers = await asyncio.gather(*(client.post_json(url + "/length", {"i": i}, 5) for i in range(20)))
        assert all(a[0] == {"ok": True} for a in answers)
        assert sorted(json.loads(b)["i"] for _, _, b in server.requests) == list(range(20))
        assert server.connections == 20
        await client.post_json(url + "/length", {}, 5)  # an idle one is taken
        assert server.connections == 20

    serve(go)


def test_headers_are_lower_cased_and_repeats_joined() -> None:
    async def go(client: HTTPClient, url: str, server: Server) -> None:
        _, info, headers = await client.post_json(url + "/repeated", {}, 5)
        assert headers["x-multi"] == "a, b" and info["remaining_requests"] == 7.0

    serve(go)


def test_an_error_status_is_classified_with_the_servers_message() -> None:
    async def go(client: HTTPClient, url: str, server: Server) -> None:
        with pytest.raises(ProviderError) as err:
            await client.post_json(url + "/error", {}, 5)
        assert err.value.kind == "fatal" and err.value.status == 400 and "context too long" in err.value.message
        await client.post_json(url + "/length", {}, 5)  # the connection survived a 400
        assert server.connections == 1

    serve(go)


@pytest.mark.parametrize("path,says", [
    ("/not-http", "did not answer in HTTP/1.x"),
    ("/bad-header", "malformed answer (Invalid header token)"),
    ("/huge-head", "response head over 65,536 bytes"),
    ("/cut", "closed the connection before its answer was complete"),
    ("/bad-chunk", "malformed answer (Invalid character in chunk size)"),
])
def test_a_broken_answer_is_a_transient_error_naming_it(path: str, says: str) -> None:
    async def go(client: HTTPClient, url: str, server: Server) -> None:
        with pytest.raises(ProviderError) as err:
            await client.post_json(url + path, {}, 5)
        assert err.value.kind == "transient" and says in err.value.message, err.value.message
        assert f"connection error to {url}{path}" in err.value.message and err.value.unreachable is None
        data, _, _ = await client.post_json(url + "/length", {}, 5)  # a fresh connection serves the next
        assert data == {"ok": True}

    serve(go)


def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def go(client: HTTPClient, url: str, server: Server) -> None:
        await client.post_json(url + "/length", {}, 5)
        # the server ends the idle connection (as a keep-alive timeout does)
        await client.post_json(url + "/close", {}, 5)
        await asyncio.sleep(0.05)
        data, _, _ = await client.post_json(url + "/length", {}, 5)
        assert data == {"ok": True} and server.connections == 2

    serve(go)


def test_a_kept_connection_closed_unsaid_goes_again_on_a_new_one() -> None:
    """The server closes a connection its answer left open (llama.cpp's server does after
    a streamed answer): the next call, sent at once on it, gets no byte back and is sent
    again on a new connection within the same call, not failed (issue 38)."""
    async def go(client: HTTPClient, url: str, server: Server) -> None:
        for _ in range(5):
            data, _, _ = await client.post_json(url + "/length-then-close", {}, 5)
            assert data == {"ok": True}
        assert server.connections == 5 and len(server.requests) == 5

    serve(go)


def test_nothing_listening_is_said_as_unreachable() -> None:
    async def go() -> None:
        with socket_closed() as port:
            client = HTTPClient()
            with pytest.raises(ProviderError) as err:
                await client.get_json(f"http://127.0.0.1:{port}/v1/models", 5)
            await client.aclose()
        assert err.value.kind == "transient" and err.value.unreachable == "connection refused"
        assert err.value.message.startswith(f"cannot reach http://127.0.0.1:{port}/v1/models: cannot connect")

    asyncio.run(go())


def test_url_credentials_go_as_basic_auth_in_place_of_the_clients_own() -> None:
    async def go(client: HTTPClient, url: str, server: Server) -> None:
        await client.post_json(url.replace("//", "//evaluator:s%3Acret@") + "/length", {}, 5)
        await client.post_json(url + "/length", {}, 5)
        (_, with_creds, _), (_, without, _) = server.requests
        assert with_creds["authorization"] == "Basic " + base64.b64encode(b"evaluator:s:cret").decode()
        assert without["authorization"] == "Bearer k"

    serve(go)


def test_an_answer_with_a_lone_surrogate_is_kept_with_a_replacement_character() -> None:
    """A paid answer whose JSON escapes a lone surrogate is parsed (the json module after
    orjson) and kept, the surrogate made U+FFFD: no UTF-8 journal or store takes it."""
    from asyncbench.scheduler import _validated
    from asyncbench.types import Request, Response, Usage

    async def go(client: HTTPClient, url: str, server: Server) -> str:
        data, _, _ = await client.post_json(url + "/surrogate", {}, 5)
        return str(data["choices"][0]["text"])

    text = serve(go)
    assert text == "a\ud800b"
    kept = _validated(Response(text=text, usage=Usage(1, 1), latency_ms=1.0, finish_reason="st\udc00op"),
                     Request("openai-compat", "m", "", prompt="p"))
    assert kept.text == "a\ufffdb" and kept.finish_reason == "st\ufffdop"
    kept.text.encode("utf-8")


def test_a_header_that_could_split_the_request_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot go in an HTTP header"):
        HTTP1Client({"Authorization": "Bearer k\r\nX-Evil: 1"})


class socket_closed:
    """A port on 127.0.0.1 that was just bound and released: nothing listens there."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        return None


def test_the_tokenizers_blocking_client_keeps_alive_and_reconnects() -> None:
    """`SyncClient` (the server tokenizers', from worker threads) against the same server."""
    import threading

    from asyncbench.providers.http import SyncCallError, SyncClient

    server, loop = Server(), asyncio.new_event_loop()
    listener = loop.run_until_complete(asyncio.start_server(server.handle, "127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        client = SyncClient(url, {"Authorization": "Bearer k"}, 5)
        for path in ("/length", "/chunked", "/length", "/until-close", "/length"):
            assert client.call("POST", url + path, {"inputs": "é"}) == {"ok": True}
        # /until-close ended its connection: the next call made a new one, no error
        assert server.connections == 2 and all(h["authorization"] == "Bearer k" for _, h, _ in server.requests)
        assert json.loads(server.requests[0][2]) == {"inputs": "é"}
        with_url_password = SyncClient(url.replace("//", "//u:p%40ss@"), {"Authorization": "Bearer k"}, 5)
        assert with_url_password.call("GET", url + "/length") == {"ok": True}
        assert server.requests[-1][1]["authorization"] == "Basic " + base64.b64encode(b"u:p@ss").decode()
        with pytest.raises(SyncCallError, match="HTTP 400: context too long"):
            client.call("POST", url + "/error", {})
        with pytest.raises(SyncCallError, match="RemoteDisconnected|connection error|BadStatusLine"):
            client.call("POST", url + "/not-http", {})
    finally:
        async def stop() -> None:
            listener.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
