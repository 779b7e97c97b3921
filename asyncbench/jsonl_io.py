"""Reading JSON-lines files with errors a user can act on: file and line, what is wrong,
and how to fix it (one UserError line, never a traceback)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from .errors import UserError

# Python's parser recurses per nesting level: a file nested ~1,000 deep (a hostile one
# 100,000 deep) ends in RecursionError, which must read as bad input, not a crash.
_TOO_DEEP = "nested too deeply (JSON arrays/objects inside each other over ~900 levels)"


def parse_json(text: str, where: str, hint: str) -> object:
    """json.loads with every way a user's text can fail as one UserError line naming
    `where` (a path, or path:line)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON at line {exc.lineno} ({exc.msg}); {hint}") from None
    except RecursionError:
        raise UserError(f"{where}: {_TOO_DEEP}; {hint}") from None


def read_text_file(path: Path, *, what: str = "file", kind: str = "file") -> str:
    """A whole UTF-8 file's text; an unreadable or binary file is one UserError line
    (`kind` names what the file must be: "JSON file", "file")."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                        f"the {what} must be a UTF-8 {kind}") from None


def read_json_file(path: Path, *, hint: str, what: str = "file") -> object:
    """A whole JSON file, any top-level type; one UserError line for every failure."""
    return parse_json(read_text_file(path, what=what, kind="JSON file"), str(path), hint)


def _lone_surrogate(row: dict[str, object]) -> bool:
    """Whether a parsed row holds a string no UTF-8 encoder takes (an escaped lone
    surrogate such as "\\ud800": valid JSON, but not text a request can carry)."""
    try:
        json.dumps(row, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def iter_json_objects(path: Path, *, hint: str = "write one JSON object per line",
                      what: str = "file") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of `path`."""
    try:
        fh = path.open("rb", buffering=1 << 20)  # 40 KB prompt lines: a few reads each, not one per 8 KB
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    with fh:
        for lineno, raw in enumerate(fh, 1):
            try:  # orjson takes the bytes (UTF-8, no lone surrogate) at a third of json's cost
                fast = orjson.loads(raw) if not raw.isspace() else None  # (strip() would copy the line)
            except ValueError:  # ... the json module then says what is wrong, as it did
                fast = None
            if isinstance(fast, dict):
                yield lineno, fast
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UserError(f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                                f"{exc.start + 1}); save the {what} as UTF-8") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{lineno}: not valid JSON ({exc.msg}); {hint}") from None
            except RecursionError:
                raise UserError(f"{path}:{lineno}: {_TOO_DEEP}; {hint}") from None
            if not isinstance(row, dict):
                raise UserError(f"{path}:{lineno}: expected a JSON object; {hint}")
            if "\\u" in line and _lone_surrogate(row):
                raise UserError(f"{path}:{lineno}: holds a lone UTF-16 surrogate escape (such as \\ud800), "
                                "which is not text; remove it or write the character it was meant to be")
            yield lineno, row


def read_json_object(path: Path, *, hint: str) -> dict[str, Any]:
    """A whole-file JSON object (prompt tables, MiniLongBench sample files)."""
    data = read_json_file(path, hint=hint)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object; {hint}")
    return data
