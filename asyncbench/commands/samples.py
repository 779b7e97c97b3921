"""Show or export every sample of a run: `asyncbench samples RUN_ID [--task T] [--failed]
[--format table|jsonl|csv|parquet] [--out FILE]`.

Each sample with its prompt as sent, references, prediction, parsed answer, score, judge
calls, status, tokens, USD, latency and attempts (asyncbench.report.samples). The table
shortens long texts to one line; the files keep everything.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from ..report.samples import SampleRecord

_SUFFIX_FORMAT = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", metavar="RUN_ID", help="run id or a unique prefix (`asyncbench cache runs` lists them)")
    p.add_argument("--task", help="only this task")
    p.add_argument("--failed", action="store_true", help="only samples that did not settle (failed, skipped)")
    p.add_argument("--format", choices=("table", "jsonl", "csv", "parquet"),
                   help="default: from --out's suffix, else table")
    p.add_argument("--out", help="write to this file instead of stdout")
    p.add_argument("--cache", help="DuckDB cache file (default: $ASYNCBENCH_CACHE or ~/.cache/asyncbench/cache.duckdb)")


def _one_line(text: object, width: int) -> str:
    flat = " ".join(str(text).split()) if text is not None else ""
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def main(args: argparse.Namespace) -> int:
    from ..errors import UserError
    from ..report.samples import load_samples, write_samples
    from ..store import Store, default_cache_path

    fmt = args.format or (_SUFFIX_FORMAT.get(Path(args.out).suffix.lower(), "") if args.out else "table")
    if not fmt:
        raise UserError(f"cannot tell the format from {args.out!r}; pass --format jsonl|csv|parquet")
    path = Path(args.cache).expanduser() if args.cache else default_cache_path()
    if not path.is_file():
        raise UserError(f"no cache file at {path}; run a benchmark first or pass --cache FILE")
    records = load_samples(Store(path), args.run_id, task=args.task, failed=args.failed)
    if fmt == "table":
        if args.out:
            with open(Path(args.out).expanduser(), "w", encoding="utf-8") as fh:
                _print_table(records, fh)
        else:
            _print_table(records, None)
        return 0
    out = Path(args.out).expanduser() if args.out else None
    write_samples(records, fmt, out)
    if args.out:
        print(f"wrote {len(records)} samples to {out}", file=sys.stderr)
    return 0


def _print_table(records: list[SampleRecord], file: TextIO | None) -> None:
    """One line per sample; sample, status, score, USD and ms keep their width and the
    prediction and reference share the rest (a file is 200 columns wide)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file, width=200, no_color=True) if file is not None else Console()
    table = Table(title=f"{len(records)} samples (the files hold every field)")
    widest = min(max((len(r.sample_id) for r in records), default=6), 24)
    free = max(console.width - (widest + 8 + 5 + 7 + 5) - 3 * 7 - 1, 12)
    table.add_column("sample", no_wrap=True, min_width=widest)
    table.add_column("status", no_wrap=True, min_width=8)
    table.add_column("score", no_wrap=True, justify="right", min_width=5)
    table.add_column("prediction", no_wrap=True, overflow="ellipsis", max_width=free * 2 // 3)
    table.add_column("reference", no_wrap=True, overflow="ellipsis", max_width=free - free * 2 // 3)
    table.add_column("USD", no_wrap=True, justify="right", min_width=7)
    table.add_column("ms", no_wrap=True, justify="right", min_width=5)
    for r in records:
        table.add_row(r.sample_id, r.status, "" if r.score is None else f"{r.score:.3f}",
                      _one_line(r.prediction, 80), _one_line(r.references[0] if r.references else "", 60),
                      f"{r.usd:.5f}", "" if r.latency_ms is None else f"{r.latency_ms:.0f}")
    console.print(table)
