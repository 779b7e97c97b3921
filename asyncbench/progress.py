"""Live progress: done / failed / cached counts, tokens per second and spend.

Rich renders it on a terminal; elsewhere (CI, pipes) it stays silent and the final
summary says everything.
"""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class RunProgress:
    def __init__(self, total: int | None, cached: int, label: str, enabled: bool | None = None) -> None:
        self.total = total
        self.cached = cached
        self.done = cached
        self.failed = 0
        self.tokens = 0
        self.spend = 0.0
        self.t0 = time.monotonic()
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._last = 0.0
        self._progress: Progress | None = None
        if self.enabled:
            self._progress = Progress(
                TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"), TimeElapsedColumn(),
                console=Console(stderr=True), transient=False, refresh_per_second=8,
            )
            self._task = self._progress.add_task(label, total=total, completed=cached, stats=self._stats())

    def _stats(self) -> str:
        elapsed = max(1e-6, time.monotonic() - self.t0)
        return (f"failed {self.failed}  cached {self.cached}  "
                f"{self.tokens / elapsed:,.0f} tok/s  ${self.spend:,.4f}")

    def __enter__(self) -> RunProgress:
        if self._progress:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress:
            self._progress.update(self._task, completed=self.done, stats=self._stats())
            self._progress.stop()

    def set_total(self, total: int) -> None:
        """The total, once a streamed source has been read to the end."""
        self.total = total
        if self._progress:
            self._progress.update(self._task, total=total)

    def add_cached(self) -> None:
        """One more answer served from the cache (found while the run streams)."""
        self.cached += 1
        self.done += 1

    def advance(self, ok: bool, tokens: int, cost: float) -> None:
        self.done += 1
        self.failed += 0 if ok else 1
        self.tokens += tokens
        self.spend += cost
        now = time.monotonic()
        if self._progress and now - self._last > 0.1:  # rich refreshes itself; keep updates cheap
            self._last = now
            self._progress.update(self._task, completed=self.done, stats=self._stats())
