"""A recording reverse proxy on 127.0.0.1: every request is forwarded unchanged to an
upstream server (the simulator, a real llama-server, vLLM, TGI) and its method, path and
JSON body are kept, so a test sees exactly what reached the server, byte for byte."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import ClientSession, TCPConnector, web
from local_server import LocalServer


class CaptureProxy(LocalServer):
    """`with CaptureProxy("http://127.0.0.1:PORT") as proxy:` point the client at
    `proxy.url`; `proxy.requests` is [(method, path, raw body bytes)] in arrival order."""

    def __init__(self, upstream: str) -> None:
        super().__init__()
        self.upstream = upstream.rstrip("/")
        self.requests: list[tuple[str, str, bytes]] = []
        self._session: ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        self.requests.append((request.method, request.path, raw))
        if self._session is None:
            # a new upstream connection for each request: llama.cpp's server closes one after
            # a streamed answer without saying so, which a pooled one would meet as a 500
            self._session = ClientSession(connector=TCPConnector(force_close=True))
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "authorization")}
        async with self._session.request(request.method, self.upstream + request.path_qs, data=raw or None,
                                         headers=headers) as resp:
            body = await resp.read()
            return web.Response(body=body, status=resp.status,
                                content_type=resp.content_type or "application/json")

    def bodies(self, method: str = "POST") -> list[tuple[str, dict[str, Any]]]:
        """(path, parsed JSON body) of every request with that method."""
        return [(path, json.loads(raw)) for m, path, raw in self.requests if m == method and raw]

    def __exit__(self, *exc: object) -> None:
        if self._session is not None:
            import asyncio

            asyncio.run_coroutine_threadsafe(self._session.close(), self._loop).result(10)
        super().__exit__(*exc)
