"""`asyncbench view [--cache FILE] [--port N] [--host H]`: every run of a cache in the
browser, live while runs go (asyncbench/view). Ctrl-C stops the server."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_PORT = 8765


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cache", help="DuckDB cache file (default: $ASYNCBENCH_CACHE or ~/.cache/asyncbench/cache.duckdb)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT}; 0: any free one)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; the pages show prompts and answers)")


def main(args: argparse.Namespace) -> int:
    import asyncio

    from ..errors import UserError
    from ..store import default_cache_path
    from ..view.server import serve

    cache = Path(args.cache).expanduser() if args.cache else default_cache_path()
    if not cache.is_file():
        raise UserError(f"no cache file {cache}; run an evaluation first, or pass --cache FILE.duckdb")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} is not a port number (0-65535)")

    def ready(url: str) -> None:
        print(f"asyncbench view: {url} (cache {cache}); Ctrl-C stops", file=sys.stderr, flush=True)

    try:
        asyncio.run(serve(cache, args.host, args.port, ready))
    except KeyboardInterrupt:
        return 0
    return 0
