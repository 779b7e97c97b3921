"""Reading JSON-lines files with errors a user can act on: file and line, what is wrong,
and how to fix it (one UserError line, never a traceback)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import UserError


def iter_json_objects(path: Path, *, hint: str = "write one JSON object per line",
                      what: str = "file") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of `path`."""
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    with fh:
        for lineno, raw in enumerate(fh, 1):
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
            if not isinstance(row, dict):
                raise UserError(f"{path}:{lineno}: expected a JSON object; {hint}")
            yield lineno, row


def read_json_object(path: Path, *, hint: str) -> dict[str, Any]:
    """A whole-file JSON object (prompt tables, MiniLongBench sample files)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: invalid JSON at line {exc.lineno} ({exc.msg}); {hint}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object; {hint}")
    return data
