"""Secrets never reach the cache, logs or reports.

The values of every key variable asyncbench reads (and any other value registered here,
such as a password in a base URL) are replaced by `[REDACTED]`, and user-info is cut out
of URLs, wherever text from a server or a URL is about to be stored or printed: error
messages (a server that echoes the key in its error body), response texts, run summaries,
run.json, the run's stored configuration.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# Environment variables whose values are secrets, by name or prefix.
SECRET_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ASYNCBENCH_API_KEY", "HF_TOKEN", "RAY_AUTH_TOKEN")
SECRET_PREFIXES = ("ASYNCBENCH_API_KEY_",)
# Shorter values are not redacted: they would match ordinary text ("local", "sk").
MIN_SECRET_LEN = 8
MASK = "[REDACTED]"
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s\"']+@")
_registered: set[str] = set()


def register(value: str | None) -> None:
    """Treat `value` as a secret from now on (a URL password, a key given another way)."""
    if value and len(value) >= MIN_SECRET_LEN:
        _registered.add(value)


def secret_values() -> list[str]:
    """Every known secret, longest first (so a key that contains another is masked whole)."""
    found = set(_registered)
    for name, value in os.environ.items():
        if (name in SECRET_VARS or name.startswith(SECRET_PREFIXES)) and len(value) >= MIN_SECRET_LEN:
            found.add(value)
    return sorted(found, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with URL user-info removed and every secret masked."""
    if "@" in text:
        text = _USERINFO.sub(r"\g<scheme>", text)
    for secret in secret_values():
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_json(value: Any) -> Any:
    """A JSON-shaped value (a run summary, a stored configuration) with every string
    redacted, keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(k)) if isinstance(k, str) else k: redact_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_json(v) for v in value]
    return value


def strip_userinfo(url: str) -> str:
    """The URL as stored and shown: without `user:password@`."""
    if "@" not in url:  # the common case, once per response: no parsing
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
