"""Secrets never reach the cache, logs or reports.

The values of every key variable asyncbench reads (and any other value registered here,
such as a password in a base URL) are replaced by `[REDACTED]`, and user-info is cut out
of URLs, wherever text from a server or a URL is about to be stored or printed: error
messages (a server that echoes the key in its error body), response texts, run summaries,
run.json, the run's stored configuration.

A server that echoes a key need not echo it verbatim: the key upper- or lower-cased,
base64-encoded (an `Authorization: Basic` header echoed back, at any byte alignment
inside a longer encoded text) or URL-encoded is masked too.
"""

from __future__ import annotations

import base64
import os
import re
from functools import lru_cache
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

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
    """`text` with URL user-info removed and every secret (and its simple transforms)
    masked."""
    return _redact(text, _current_pattern())


def _current_pattern() -> re.Pattern[str] | None:
    secrets = secret_values()
    return _pattern(tuple(secrets)) if secrets else None


def _redact(text: str, pattern: re.Pattern[str] | None) -> str:
    if "@" in text:
        text = _USERINFO.sub(r"\g<scheme>", text)
    return pattern.sub(MASK, text) if pattern is not None else text


def _base64_cores(secret: str) -> set[str]:
    """What every base64 encoding of a text holding `secret` contains, whatever the byte
    offset it starts at: the encoding of the secret's whole 3-byte groups from each of
    the three alignments (standard and URL-safe alphabets)."""
    raw, out = secret.encode(), set()
    for start in range(3):
        n = (len(raw) - start) // 3 * 3
        if n >= 6:  # 8 characters at least: shorter ones would match ordinary text
            core = base64.b64encode(raw[start:start + n]).decode()
            out |= {core, core.translate(str.maketrans("+/", "-_"))}
    return out


@lru_cache(maxsize=16)
def _pattern(secrets: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for every secret: as is, in any letter case, URL-encoded (hex digits of
    any case), and base64-encoded (case kept: base64 is case-sensitive)."""
    plain = {v for s in secrets for v in (s, quote(s, safe=""), quote_plus(s))}
    encoded = {v for s in secrets for v in _base64_cores(s)} - plain
    parts = [(v, f"(?i:{re.escape(v)})") for v in plain] + [(v, re.escape(v)) for v in encoded]
    parts.sort(key=lambda p: len(p[0]), reverse=True)  # a longer variant is masked whole
    return re.compile("|".join(p for _, p in parts))


def redact_json(value: Any) -> Any:
    """A JSON-shaped value (a run summary, a stored configuration) with every string
    redacted, keys included (the secrets are read from the environment once for all)."""
    return _redact_json(value, _current_pattern())


def _redact_json(value: Any, pattern: re.Pattern[str] | None) -> Any:
    if isinstance(value, str):
        return _redact(value, pattern)
    if isinstance(value, dict):
        return {_redact(k, pattern) if isinstance(k, str) else k: _redact_json(v, pattern) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact_json(v, pattern) for v in value]
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
