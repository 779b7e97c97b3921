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
from typing import IO, TYPE_CHECKING

from ..atomic import open_replacing

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
    from ..terminal import shown

    # no need to split a whole context; server and model text reaches the terminal escaped
    flat = shown(" ".join(str(text)[: 4 * width].split())) if text is not None else ""
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
    records = load_samples(Store(path), args.run_id, task=args.task, failed=args.failed, prompts=fmt != "table")
    if fmt == "table":
        if args.out:
            with open_replacing(Path(args.out).expanduser()) as fh:
                _print_table(records, fh)
        else:
            _print_table(records, None)
        return 0
    out = Path(args.out).expanduser() if args.out else None
    write_samples(records, fmt, out)
    if args.out:
        print(f"wrote {len(records)} samples to {out}", file=sys.stderr)
    return 0


def _print_table(records: list[SampleRecord], file: IO[str] | None) -> None:
    """One line per sample; sample, status, score, USD and ms keep their width and the
    prediction and reference share the rest of the terminal (a file is 200 columns wide).
    Plain fixed-width text, written in one go: a rich table measures every cell and took
    ~10 s for 20,000 rows (bench/report_20k.md)."""
    import shutil

    width = 200 if file is not None else shutil.get_terminal_size((80, 24)).columns
    out = file or sys.stdout
    ids = min(max((len(r.sample_id) for r in records), default=6), 24)
    fixed = ids + 8 + 6 + 8 + 6 + 6  # sample, status, score, USD, ms and the spaces between the columns
    free = max(width - fixed, 12)
    pred, ref = free * 2 // 3, free - free * 2 // 3
    head = (f"{'sample':<{ids}} {'status':<8} {'score':>6} {'prediction':<{pred}} {'reference':<{ref}} "
            f"{'USD':>8} {'ms':>6}")
    lines = [f"{len(records)} samples (the files hold every field)", head, "-" * len(head)]
    for r in records:
        lines.append(f"{_one_line(r.sample_id, ids):<{ids}} {r.status:<8} "
                     f"{'' if r.score is None else f'{r.score:.3f}':>6} {_one_line(r.prediction, pred):<{pred}} "
                     f"{_one_line(r.references[0] if r.references else '', ref):<{ref}} {r.usd:>8.5f} "
                     f"{'' if r.latency_ms is None else f'{r.latency_ms:.0f}':>6}".rstrip())
        if r.usage_flag:  # its tokens and USD are booked at our bound, not as the server claimed
            lines.append(f"{'':<{ids}} ^ {_one_line(r.usage_flag, width - ids - 3)}")
    out.write("\n".join(lines) + "\n")
