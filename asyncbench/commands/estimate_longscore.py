"""Estimate LongScore (100-LongBench): `asyncbench estimate longscore --scores FILE`.

Base ability is the mean score over the base lengths; LC at each longer length is the
relative change from it (see asyncbench/estimators/longscore.py).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..estimators.longscore import DEFAULT_BASE, cut_report, estimate, load_scores


def _table(report: dict[str, Any], decimals: int) -> str:
    rows = [("overall" if "by_task" in report else "scores", report)]
    rows += list(report.get("by_task", {}).items())
    lengths = list(report["lc"])
    head = ["", "base"] + [f"LC {k}" for k in lengths] + ["avg score", "avg LC"]
    lines = ["\t".join(head)]
    for name, r in rows:
        fmt = f"{{:.{decimals}f}}".format
        cells = [name, fmt(r["base_ability"])] + [fmt(r["lc"][k]) if k in r["lc"] else "-" for k in lengths]
        cells += [fmt(r["avg_score"]), fmt(r["avg_lc"])]
        lines.append("\t".join(cells))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scores", required=True, metavar="FILE.json", help='{"4k": 96.5, "8k": 95.8, ...} or {task: {length: score}}')
    parser.add_argument("--base", default=",".join(DEFAULT_BASE), metavar="LENGTHS", help="base lengths, comma-separated (default: 2k,4k,6k; RULER tables use 4k)")
    parser.add_argument("--json", action="store_true", help='print {"base_ability", "lc": {length: value}, "avg_lc", ...} as JSON')
    parser.add_argument("--decimals", type=int, default=None, metavar="N", help="cut (not round) values to N decimals as the paper does (default: full precision with --json, 1 otherwise)")


def main(args: argparse.Namespace) -> int:
    base = [b.strip() for b in args.base.split(",") if b.strip()]
    report = estimate(load_scores(Path(args.scores)), base)
    if args.json:
        if args.decimals is not None:
            report = cut_report(report, args.decimals)
        print(json.dumps(report, indent=2))
    else:
        decimals = 1 if args.decimals is None else args.decimals
        print(_table(cut_report(report, decimals), decimals))
    return 0
