"""Files written whole or not at all: into a temporary file beside the target, renamed over it.

A report, an export or run.json written in place is a 0-byte or half file if the process
is killed mid-write (SIGKILL while `report` wrote a 2.7 MB HTML once left 0 bytes where
the previous report had been). The rename is atomic on POSIX file systems, so a reader,
or a later run, sees the old file or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def temporary_beside(path: Path) -> Path:
    """A name in `path`'s folder (a rename stays in one file system) no one else uses."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """Yield a temporary path to write `path`'s new content to (by any writer: DuckDB's
    COPY, pyarrow); it replaces `path` when the block ends without an error, and is
    removed otherwise."""
    tmp = temporary_beside(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


@contextlib.contextmanager
def open_replacing(path: Path, newline: str | None = None) -> Iterator[IO[str]]:
    """A text file (UTF-8) whose content replaces `path` when the block ends without an error."""
    with replacing(path) as tmp, tmp.open("w", encoding="utf-8", newline=newline) as fh:
        yield fh
        fh.flush()


def write_text(path: Path, text: str) -> None:
    """`path.write_text(text)`, whole or not at all."""
    with open_replacing(path) as fh:
        fh.write(text)
