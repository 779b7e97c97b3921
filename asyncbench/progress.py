"""Live progress: done / total, what became of each request (answered, cached, shared,
failed, skipped), retries and 429s, tokens per second, spend and the time left.

On a terminal rich draws a bar that fits its width: fields are dropped, least useful
first, before any number would be cut. Elsewhere (CI logs, pipes) one plain line goes to
stderr every 10 seconds, so a long run is never silent; `--progress` forces the bar and
`--no-progress` silences both. The counts are the ledger's (types.RequestSource), so
the last line agrees with the summary.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from .types import RequestSource

# Progress names for what became of each request; for the evaluated model's requests
# these are its samples' statuses, so the bar's final counts are the summary's.
LABELS = {RequestSource.SENT: "answered", RequestSource.FROM_CACHE: "cached", RequestSource.SHARED: "shared",
          RequestSource.FAILED: "failed", RequestSource.SKIPPED_BUDGET: "skipped"}
PLAIN_EVERY_S = 10.0
# the one live display the bars made now share (an eval set's: a row per run), if any
_SHARED: Progress | None = None


def _display(console: Console) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(bar_width=None), MofNCompleteColumn(),
                    TextColumn("{task.fields[stats]}"), console=console, transient=False, refresh_per_second=8)


@contextmanager
def one_display(enabled: bool) -> Iterator[None]:
    """Every bar made inside is a row of one live display (an eval set on a terminal: one
    bar per run, each redrawn over the others, was why sets once showed none at all)."""
    global _SHARED
    if not enabled:
        yield
        return
    _SHARED = _display(Console(stderr=True, emoji=False))
    _SHARED.start()
    try:
        yield
    finally:
        _SHARED.stop()
        _SHARED = None
# the runner's event counts (retries, 429s), read when the line is drawn
Stats = Callable[[], tuple[int, int]]


class RunProgress:
    def __init__(self, total: int | None, label: str, enabled: bool | None = None,
                 stats: Stats | None = None) -> None:
        self.total = total
        self.label = label
        self.counts = dict.fromkeys(LABELS, 0)
        self.tokens = 0
        self.spend = 0.0
        self.t0 = time.monotonic()
        self.stats = stats
        tty = sys.stderr.isatty()
        self.enabled = tty if enabled is None else enabled
        self.plain = enabled is None and not tty  # no terminal: a line every 10 s
        self._last = 0.0
        self._last_plain = time.monotonic()
        self._progress: Progress | None = None
        self._own = _SHARED is None  # a bar of its own, or a row of the shared display
        if self.enabled:
            self._progress = _display(Console(stderr=True, emoji=False)) if _SHARED is None else _SHARED
            self.console = self._progress.console
            self._task = self._progress.add_task(escape(label), total=total, completed=0, stats=self._stats())

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def fields(self) -> list[tuple[int, str]]:
        """(priority, text) of every field; lower priority is dropped first when short of room."""
        elapsed = max(1e-6, time.monotonic() - self.t0)
        n = self.counts
        out = [(9, f"answered {n[RequestSource.SENT]}"), (8, f"failed {n[RequestSource.FAILED]}"),
               (6, f"cached {n[RequestSource.FROM_CACHE]}"), (3, f"shared {n[RequestSource.SHARED]}"),
               (4, f"skipped {n[RequestSource.SKIPPED_BUDGET]}"), (7, f"${self.spend:,.4f}"),
               (2, f"{self.tokens / elapsed:,.0f} tok/s")]
        if self.stats is not None:
            retries, limited = self.stats()
            out += [(5, f"retries {retries}"), (5, f"429s {limited}")]
        if self.total and self.done:
            left = elapsed / self.done * (self.total - self.done)
            out.append((6, f"ETA {int(left) // 60}:{int(left) % 60:02d}"))
        return out

    def _stats(self, width: int | None = None) -> str:
        """The fields that fit in `width` characters (all of them without a width)."""
        fields = self.fields()
        keep = list(range(len(fields)))
        if width is not None:
            while keep and len("  ".join(fields[i][1] for i in keep)) > width:
                keep.remove(min(keep, key=lambda i: fields[i][0]))
        return "  ".join(fields[i][1] for i in keep)

    def _room(self) -> int | None:
        """Characters left for the fields beside the label, a 10-wide bar and done/total."""
        if self._progress is None:
            return None
        used = len(self.label) + 10 + 2 * len(str(self.total or self.done)) + 6
        return max(0, self.console.width - used)

    def __enter__(self) -> RunProgress:
        if self._progress and self._own:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress:
            self._progress.update(self._task, completed=self.done, stats=self._stats(self._room()))
            if self._own:
                self._progress.stop()

    def set_total(self, total: int) -> None:
        """The total, once a streamed source has been read to the end."""
        self.total = total
        if self._progress:
            self._progress.update(self._task, total=total)

    def add(self, source: RequestSource, tokens: int = 0, cost: float = 0.0) -> None:
        """One request settled: its tokens and cost if it was paid."""
        self.counts[source] += 1
        self.tokens += tokens
        self.spend += cost
        now = time.monotonic()
        if self._progress and now - self._last > 0.1:  # rich refreshes itself; keep updates cheap
            self._last = now
            self._progress.update(self._task, completed=self.done, stats=self._stats(self._room()))
        elif self.plain and now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            total = f"/{self.total}" if self.total else ""
            print(f"{self.label}: {self.done}{total}  {self._stats()}", file=sys.stderr, flush=True)


class StepProgress:
    """A bar over a step that is not requests (building samples, pricing them): done /
    total and the time left. Shown as RunProgress shows its bar: rich on a terminal (or
    with --progress), a plain line every 10 s elsewhere, nothing with --no-progress."""

    def __init__(self, total: int | None, label: str, enabled: bool | None = None) -> None:
        self.total = total
        self.label = label
        self.done = 0
        self.t0 = time.monotonic()
        tty = sys.stderr.isatty()
        self.plain = enabled is None and not tty
        self._last_plain = self.t0
        self._last = 0.0
        self._progress: Progress | None = None
        if tty if enabled is None else enabled:
            self._progress = Progress(TextColumn(f"[bold]{label}"), BarColumn(bar_width=None), MofNCompleteColumn(),
                                      TextColumn("{task.fields[eta]}"), console=Console(stderr=True, emoji=False),
                                      transient=False, refresh_per_second=4)
            self._task = self._progress.add_task(label, total=total, completed=0, eta="")

    def _eta(self) -> str:
        if not self.total or not self.done:
            return ""
        left = (time.monotonic() - self.t0) / self.done * (self.total - self.done)
        return f"ETA {int(left) // 60}:{int(left) % 60:02d}"

    def __enter__(self) -> StepProgress:
        if self._progress:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress:
            self._progress.update(self._task, completed=self.done, eta="")
            self._progress.stop()

    def advance(self) -> None:
        """One more done."""
        self.done += 1
        now = time.monotonic()
        if self._progress and now - self._last > 0.1:
            self._last = now
            self._progress.update(self._task, completed=self.done, eta=self._eta())
        elif self.plain and now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            total = f"/{self.total}" if self.total else ""
            print(f"{self.label}: {self.done}{total}  {self._eta()}", file=sys.stderr, flush=True)
