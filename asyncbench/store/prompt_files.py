"""The prompts as sent, in plain files beside the cache: `<cache>.prompts/<host>-<pid>-<n>.txt`.

The per-sample view shows each answer beside the prompt that produced it, so every paid
prompt is kept once. In DuckDB that was the most expensive part of a run of long prompts:
a 40 KB prompt JSON-escaped into its journal line, parsed back by the batch's ingest and
then compressed into the table at checkpoint cost ~0.9 ms of CPU, more than the HTTP
request that sent it (issue 27; 1,000 x 40 KB prompts: 2.30 CPU-s with the table, 1.48
without). Here a prompt is appended to this process's file as UTF-8 bytes, unescaped, and
the store keeps only where it is (`prompt_refs`: key -> file, offset, length), which the
journal line carries and the batch ingests with the answer. Files are never rewritten; the
bytes of a prompt whose key was already stored stay unreferenced. They are as large as the
prompts themselves (DuckDB's compression kept about half): the price of not paying CPU for
it during the run. Moving a cache file means moving its `.prompts` folder with it, as its
`.journal` folder; a prompt whose file is gone reads as missing (None), nothing else fails.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import socket
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from ..errors import UserError

# File numbers unique in the process (the runs of an eval set each append to their own).
_NUMBERS = itertools.count(1)


def prompt_dir(cache: Path) -> Path:
    return cache.with_name(cache.name + ".prompts")


class PromptFile:
    """One process's (one run's) prompts, appended as they are sent."""

    def __init__(self, cache: Path) -> None:
        self.dir = prompt_dir(cache)
        self.name = f"{socket.gethostname()}-{os.getpid()}-{next(_NUMBERS)}.txt"
        self._fh: IO[bytes] | None = None
        self._size = 0

    def append(self, text: str) -> tuple[str, int, int]:
        """Write `text`, in the OS's hands when this returns (the file is unbuffered), before
        the journal line that points at it; returns (file name, byte offset, byte length)."""
        if self._fh is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._fh = (self.dir / self.name).open("ab", buffering=0)
            self._size = self._fh.tell()
        data = text.encode("utf-8", "surrogatepass")
        offset = self._size
        write_whole(self._fh, data, offset, self.dir / self.name)
        self._size += len(data)
        return self.name, offset, len(data)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def write_whole(fh: IO[bytes], data: bytes, at: int, path: Path) -> None:
    """`data` appended whole to the unbuffered file `fh` (now `at` bytes long), or the
    file cut back to `at` and a UserError: a disk that fills mid-write leaves no half
    line or half prompt behind, so what was written before stays readable."""
    view, done = memoryview(data), 0
    try:
        while done < len(data):
            n = fh.write(view[done:])
            if not n:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done += n
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fh.fileno(), at)
        raise write_failed(path, exc) from None


def write_failed(path: Path, exc: OSError) -> UserError:
    """One line for a write the disk refused; what was paid before it is kept."""
    why = "the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else (exc.strerror or str(exc))
    return UserError(f"cannot write {path}: {why}; the answers paid so far are kept (the cache and its journal): "
                     "free some space and run the same command again")


def read_prompts(cache: Path, refs: Iterable[tuple[str, int, int]]) -> dict[tuple[str, int, int], str | None]:
    """The prompts at `refs` ((file, offset, length) as `prompt_refs` keeps them), each file
    opened once; None where the file (or its bytes) is gone."""
    by_file: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for name, offset, length in refs:
        by_file[name].append((offset, length))
    out: dict[tuple[str, int, int], str | None] = {}
    folder = prompt_dir(cache)
    for name, spans in by_file.items():
        path = folder / name
        if path.parent != folder:  # a name from the store is a file name, nothing more
            continue
        try:
            with path.open("rb") as fh:
                for offset, length in sorted(spans):
                    fh.seek(offset)
                    data = fh.read(length)
                    out[(name, offset, length)] = (data.decode("utf-8", "surrogatepass")
                                                   if len(data) == length else None)
        except OSError:
            for offset, length in spans:
                out[(name, offset, length)] = None
    return out
