"""Live progress: done / failed / cached counts, tokens per second and spend.

Rich renders it on a terminal; elsewhere (CI, pipes) it stays silent and the final
summary says everything.
"""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

# Progress names for what became of each request; for the evaluated model's requests
# these are its samples' statuses, so the bar's final counts are the summary's.
LABELS = {"sent": "answered", "from_cache": "cached", "shared": "shared", "failed": "failed",
          "skipped_budget": "skipped"}


class RunProgress:
    def __init__(self, total: int | None, label: str, enabled: bool | None = None) -> None:
        self.total = total
        self.counts = dict.fromkeys(LABELS, 0)
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
            self._task = self._progress.add_task(label, total=total, completed=0, stats=self._stats())

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def _stats(self) -> str:
        elapsed = max(1e-6, time.monotonic() - self.t0)
        counts = "  ".join(f"{name} {self.counts[source]}" for source, name in LABELS.items())
        return f"{counts}  {self.tokens / elapsed:,.0f} tok/s  ${self.spend:,.4f}"

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

    def add(self, source: str, tokens: int = 0, cost: float = 0.0) -> None:
        """One request settled (ledger.REQUEST_SOURCES): its tokens and cost if it was paid."""
        self.counts[source] += 1
        self.tokens += tokens
        self.spend += cost
        now = time.monotonic()
        if self._progress and now - self._last > 0.1:  # rich refreshes itself; keep updates cheap
            self._last = now
            self._progress.update(self._task, completed=self.done, stats=self._stats())
