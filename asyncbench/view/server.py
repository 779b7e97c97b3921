"""The viewer's web server: aiohttp (already the HTTP client's library) serving one page
of plain JavaScript (no build step) and the JSON it reads, over one cache file.

Bound to 127.0.0.1 unless told otherwise. Store reads run in a worker thread, one at a
time (the store's connection is one), so the event loop keeps answering while DuckDB
works. The page shows every stored string as text (`textContent`, never HTML), and its
Content-Security-Policy lets only its own script run: a model's answer is hostile text.
The report and leaderboard pages are the `report` command's HTML, made on request.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from aiohttp import web

from ..errors import UserError
from ..store import Store
from ..store.runs import SamplePage
from . import data
from .page import page_html

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(value: object, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(value, default=str), status=status, content_type="application/json",
                        headers={"Cache-Control": "no-store"})


def _int(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be a whole number, not {raw!r}") from None


class Viewer:
    """The routes over one store; `lock`: one store read at a time."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self.store = Store(cache)
        self.lock = asyncio.Lock()

    async def read(self, work: Callable[[], T]) -> T:
        async with self.lock:
            return await asyncio.to_thread(work)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[_user_errors])
        app.add_routes([
            web.get("/", self.index),
            web.get("/api/runs", self.api_runs),
            web.get("/api/runs/{run}", self.api_run),
            web.get("/api/runs/{run}/samples", self.api_samples),
            web.get("/api/compare", self.api_compare),
            web.get("/report/{run}", self.report),
            web.get("/leaderboard", self.leaderboard),
        ])
        return app

    async def index(self, request: web.Request) -> web.Response:
        nonce = secrets.token_urlsafe(16)
        csp = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; connect-src 'self'; "
               "img-src 'self' data:; frame-src 'self'; base-uri 'none'; form-action 'none'")
        return web.Response(text=page_html(nonce, str(self.cache)), content_type="text/html",
                            headers={"Content-Security-Policy": csp, "Cache-Control": "no-store"})

    async def api_runs(self, request: web.Request) -> web.Response:
        return _json(await self.read(lambda: data.runs(self.store)))

    async def api_run(self, request: web.Request) -> web.Response:
        wanted = request.match_info["run"]
        return _json(await self.read(lambda: data.run(self.store, wanted)))

    async def api_samples(self, request: web.Request) -> web.Response:
        wanted, q = request.match_info["run"], request.query
        page = SamplePage(_int(request, "offset", 0), _int(request, "limit", 50), q.get("status") or None,
                          q.get("q") or None)
        task = q.get("task") or None
        return _json(await self.read(lambda: data.samples(self.store, wanted, task, page)))

    async def api_compare(self, request: web.Request) -> web.Response:
        a, b = request.query.get("a", ""), request.query.get("b", "")
        if not a or not b:
            raise web.HTTPBadRequest(text="compare needs two runs: ?a=RUN&b=RUN")
        offset, limit = _int(request, "offset", 0), _int(request, "limit", 50)
        return _json(await self.read(lambda: data.side_by_side(self.store, a, b, offset, limit)))

    async def report(self, request: web.Request) -> web.Response:
        wanted = request.match_info["run"]
        return web.Response(text=await self.read(lambda: _report_html(self.cache, [wanted])), content_type="text/html")

    async def leaderboard(self, request: web.Request) -> web.Response:
        wanted = [r for r in request.query.get("runs", "").split(",") if r]
        return web.Response(text=await self.read(lambda: _leaderboard_html(self.cache, wanted)),
                            content_type="text/html")


@web.middleware
async def _user_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A user's error (an unknown run, a missing extra) is a 404 with its one line."""
    try:
        return await handler(request)
    except UserError as exc:
        if request.path.startswith("/api/"):
            return _json({"error": str(exc)}, status=404)
        return web.Response(text=str(exc), status=404, content_type="text/plain")


def _report_html(cache: Path, run_ids: list[str]) -> str:
    """The `report --format html` page of these runs (its sample viewer left out: the
    viewer's own samples page pages through them)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("the report page needs matplotlib: pip install 'asyncbench[report]'") from None
    from ..report.data import load_runs
    from ..report.html import render_html
    from ..report.model import build_report

    runs = load_runs([cache], run_ids, unfinished=True)
    return render_html(build_report(runs), runs, {})


def _leaderboard_html(cache: Path, run_ids: list[str]) -> str:
    """The leaderboard of these runs (none: every finished run), as `report --leaderboard`."""
    from ..report.data import load_runs
    from ..report.leaderboard import leaderboard_of, render_leaderboard

    return render_leaderboard(leaderboard_of(load_runs([cache], run_ids, unfinished=True)), "html")


async def serve(cache: Path, host: str, port: int, ready: Callable[[str], None]) -> None:
    """Serve until cancelled; `ready` is told the URL once the port is bound."""
    runner = web.AppRunner(Viewer(cache).app(), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; pass --port N (0: any free "
                            "port)") from None
        bound = runner.addresses[0][1] if runner.addresses else port
        ready(f"http://{host if ':' not in host else f'[{host}]'}:{bound}/")
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
