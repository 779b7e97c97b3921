"""Endpoint URLs checked where the user gives them (--base-url, a fleet file, a base-URL
variable): an http(s) URL with a host and a valid port, or one line saying what is wrong.
A typo found here costs nothing; found by the scheduler, it costs a run's retries."""

from __future__ import annotations

from urllib.parse import urlsplit

from .errors import UserError
from .secrets import strip_userinfo


def validate_base_url(url: str, where: str = "--base-url") -> str:
    """`url` without a trailing slash, or UserError naming `where` it came from."""
    shown = strip_userinfo(url) if "@" in url else url
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError when out of range or not a number
    except ValueError as exc:
        raise UserError(f"{where}: {shown!r} is not a valid URL ({exc}); write e.g. http://127.0.0.1:8080") from None
    if parts.scheme not in ("http", "https"):
        raise UserError(f"{where}: {shown!r} is not an http(s) URL; endpoints speak HTTP, e.g. http://127.0.0.1:8080")
    if not parts.hostname:
        raise UserError(f"{where}: {shown!r} has no host; write e.g. http://127.0.0.1:8080")
    if port == 0:
        raise UserError(f"{where}: {shown!r} has port 0; give the port the server listens on (1-65535)")
    return url.rstrip("/")
