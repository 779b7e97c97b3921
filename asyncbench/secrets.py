"""Secrets never reach the cache, logs or reports.

The values of every key variable asyncbench reads (and any other value registered here,
such as a password in a base URL) are replaced by `[REDACTED]`, and user-info is cut out
of URLs, wherever text from a server or a URL is about to be stored or printed: error
messages (a server that echoes the key in its error body), response texts, run summaries,
run.json, the run's stored configuration.

A server that echoes a key need not echo it verbatim: the key upper- or lower-cased,
base64-encoded (an `Authorization: Basic` header echoed back, at any byte alignment
inside a longer encoded text), URL-encoded, hex-encoded (either case), JSON-`\\u`-escaped
character by character, reversed, or spelt out with spaces or other separators between
its characters is masked too.

It runs on every stored answer, so each set of secrets is compiled once (`_Redactor`):
plain substring tests on the lower-cased text, and on the text with everything but
letters and digits taken out (the spaced form), decide whether the one regex runs at all
(a typical answer with no secret costs a few microseconds: docs/internals.md).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable
from functools import lru_cache
from typing import overload
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
    # the named variables by lookup, the prefixed ones by their names alone: decoding every
    # value of the environment cost ~30 us a call, and this runs on every stored answer
    names = [*SECRET_VARS, *(n for n in os.environ if n.startswith(SECRET_PREFIXES))]
    for name in names:
        value = os.environ.get(name)
        if value is not None and len(value) >= MIN_SECRET_LEN:
            found.add(value)
    return sorted(found, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with URL user-info removed and every secret (and its simple transforms)
    masked."""
    return _redact(text, _current())


def redactor() -> Callable[[str], str]:
    """`redact` for the secrets known now, built once: what a run applies to every
    answer it stores (reading the environment again for each answer cost ~25 us)."""
    compiled = _current()
    return lambda text: _redact(text, compiled)


def _current() -> _Redactor | None:
    """The redactor of the secrets known now (built once per set of secrets)."""
    secrets = secret_values()
    return _redactor(tuple(secrets)) if secrets else None


def _redact(text: str, redactor: _Redactor | None) -> str:
    if "@" in text:
        text = _USERINFO.sub(r"\g<scheme>", text)
    return redactor.sub(text) if redactor is not None else text


# What may stand between the characters of a key spelt out: anything but letters and digits
# (the prefilter takes out the ASCII ones, with bytes.translate: ~1 us for an answer).
_SEPARATORS = re.compile(r"[\W_]+")
_ASCII_SEPARATORS = bytes(b for b in range(128) if not chr(b).isalnum())


class _Redactor:
    """One set of secrets, compiled once: substring tests that rule out most texts, then
    one regex of every variant (longest first, so a longer variant is masked whole)."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.pattern = _pattern(secrets)
        self.lowered = tuple(sorted({v.lower() for s in secrets for v in _caseless_variants(s)}))
        self.encoded = tuple(sorted({v for s in secrets for v in _base64_cores(s)}))
        # the spaced form is found in the text with separators taken out
        self.compact = tuple(sorted({c.encode() for s in secrets
                                     if len(c := _SEPARATORS.sub("", s.lower())) >= MIN_SECRET_LEN}))

    def sub(self, text: str) -> str:
        lowered = text.lower()
        if any(v in lowered for v in self.lowered) or any(v in text for v in self.encoded):
            return self.pattern.sub(MASK, text)
        if self.compact:
            compact = lowered.encode("utf-8", "surrogatepass").translate(None, _ASCII_SEPARATORS)
            if any(v in compact for v in self.compact):
                return self.pattern.sub(MASK, text)
        return text


@lru_cache(maxsize=16)
def _redactor(secrets: tuple[str, ...]) -> _Redactor:
    return _Redactor(secrets)


def _caseless_variants(secret: str) -> set[str]:
    """The secret as a careless or hostile server repeats it, matched in any letter case:
    as is, URL-encoded, hex-encoded, `\\u`-escaped character by character, reversed."""
    raw = secret.encode()
    return {secret, quote(secret, safe=""), quote_plus(secret), raw.hex(),
            "".join(f"\\u{ord(c):04x}" for c in secret), secret[::-1]}


def _spaced(secret: str) -> str | None:
    """A regex for the secret's letters and digits with separators (spaces, dashes, dots:
    anything else, up to 3 at a time) between them; None for a secret too short for it."""
    chars = [c for c in secret if c.isalnum()]
    if len(chars) < MIN_SECRET_LEN:
        return None
    return "(?i:" + r"[\W_]{0,3}".join(re.escape(c) for c in chars) + ")"


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


def _pattern(secrets: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for every secret: its caseless variants (as is, URL-encoded, hex, `\\u`-
    escaped, reversed: any letter case), base64-encoded (case kept: base64 is
    case-sensitive), and spelt out with separators."""
    plain = {v for s in secrets for v in _caseless_variants(s)}
    encoded = {v for s in secrets for v in _base64_cores(s)} - plain
    parts = [(v, f"(?i:{re.escape(v)})") for v in plain] + [(v, re.escape(v)) for v in encoded]
    parts.sort(key=lambda p: len(p[0]), reverse=True)  # a longer variant is masked whole
    spaced = [p for s in secrets if (p := _spaced(s)) is not None]  # last: the exact forms first
    return re.compile("|".join([p for _, p in parts] + spaced))


@overload
def redact_json(value: dict[str, object]) -> dict[str, object]: ...
@overload
def redact_json(value: object) -> object: ...
def redact_json(value: object) -> object:
    """A JSON-shaped value (a run summary, a stored configuration) with every string
    redacted, keys included (the secrets are read from the environment once for all)."""
    return _redact_json(value, _current())


def _redact_json(value: object, pattern: _Redactor | None) -> object:
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
