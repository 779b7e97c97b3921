"""Show stored runs side by side: `asyncbench report [RUN_ID ...]`.

With no RUN_ID, every finished run in the cache (re-running a command continues
the same run, so this is the latest of each model and setting). Scores
are as each run recorded them, with the papers' published numbers as reference rows;
cost, tokens and latency are per run, per task and per endpoint. Formats: table
(terminal), md, json, html (one self-contained file with plots; needs matplotlib).

`--leaderboard` (or `--set DIR/set.json`, the eval-set runner's list of runs) shows the
runs as a leaderboard instead (report/leaderboard): per benchmark the models ranked with
95% intervals, which pairs are distinguishable, the papers' rows, cost and latency.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..atomic import open_replacing, write_text

FORMATS = ("table", "md", "json", "html")
_SUFFIX_FORMAT = {".md": "md", ".markdown": "md", ".json": "json", ".html": "html", ".htm": "html"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="run ids or unique prefixes (default: every finished run)")
    p.add_argument("--format", choices=FORMATS, help="output format (default: from --out's suffix, else table)")
    p.add_argument("--out", help="write the report to this file instead of stdout")
    p.add_argument("--cache", action="append",
                   help="DuckDB cache file; repeat to report runs from several (default: $ASYNCBENCH_CACHE or "
                        "~/.cache/asyncbench/cache.duckdb)")
    p.add_argument("--no-references", action="store_false", dest="references",
                   help="leave out the papers' published reference rows")
    p.add_argument("--leaderboard", action="store_true",
                   help="rank the runs' models per benchmark with 95%% intervals and paired comparisons")
    p.add_argument("--set", metavar="SET_JSON", dest="eval_set",
                   help="leaderboard of an eval set: its set.json (or the folder holding it); implies --leaderboard")


def _format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    if args.out:
        return _SUFFIX_FORMAT.get(Path(args.out).suffix.lower(), "table")
    return "table"


def main(args: argparse.Namespace) -> int:
    from ..errors import UserError
    from ..report.data import load_runs
    from ..report.model import build_report
    from ..store import default_cache_path

    fmt = _format(args)
    if args.leaderboard or args.eval_set:
        return _leaderboard(args, fmt)
    runs = load_runs(args.cache or [default_cache_path()], args.run_ids)
    report = build_report(runs, with_references=args.references)
    if fmt == "table":
        from rich.console import Console

        from ..report.tables import print_tables

        if not args.out:
            print_tables(report)
            return 0
        with open_replacing(Path(args.out).expanduser()) as fh:
            print_tables(report, Console(file=fh, width=200, no_color=True, emoji=False))
        return 0
    if fmt == "md":
        from ..report.tables import render_markdown

        text = render_markdown(report)
    elif fmt == "json":
        from ..report.tables import render_json

        text = render_json(report)
    else:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UserError("the HTML report needs matplotlib: pip install 'asyncbench[report]'") from None
        from ..report.html import render_html
        from ..report.samples import load_samples
        from ..store import Store

        samples = {r.run_id: load_samples(Store(r.cache or default_cache_path()), r.run_id) for r in runs}
        text = render_html(report, runs, samples)
    return _write(args, text)


def _write(args: argparse.Namespace, text: str) -> int:
    if args.out:
        out = Path(args.out).expanduser()
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text(out, text)  # whole or not at all: a kill mid-write keeps the previous report
        print(f"wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _leaderboard(args: argparse.Namespace, fmt: str) -> int:
    """`--leaderboard` / `--set`: the runs named (and the set's) as one leaderboard."""
    import dataclasses

    from ..report.data import load_runs
    from ..report.leaderboard import leaderboard_of, render_leaderboard
    from ..report.leaderboard.eval_set import read_set
    from ..store import default_cache_path

    run_ids: list[str] = list(args.run_ids)
    notes: tuple[str, ...] = ()
    if args.eval_set:
        wanted, notes = read_set(Path(args.eval_set).expanduser())
        run_ids += [r for r in wanted if r not in run_ids]
    runs = load_runs(args.cache or [default_cache_path()], run_ids, unfinished=True)
    board = dataclasses.replace(leaderboard_of(runs, with_references=args.references), notes=notes)
    return _write(args, render_leaderboard(board, fmt))
