"""Score LongBench / LongBench-E / MiniLongBench predictions with the official metrics.

Input: JSON lines `{"dataset", "pred", "answers", "all_classes"?, "length"?}` (LongBench's
own pred/*.jsonl plus a dataset field; LongBench-E datasets are named `<dataset>_e`).
Prints per-dataset scores (x100), category averages and Overall EN/ZH/All, plus
per-length-bin results when lines carry `length`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..jsonl_io import iter_json_objects

if TYPE_CHECKING:  # the benchmark loads when a command runs, not for `--help`
    from ..benchmarks.longbench.aggregate import Aggregate, Summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--predictions", required=True, type=Path, metavar="FILE.jsonl",
                        help="one JSON object per line: dataset, pred, answers, all_classes?, length?")
    parser.add_argument("--per-sample", type=Path, metavar="OUT.jsonl",
                        help="write every input line back with its \"score\" in [0, 1] added")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="scoring processes (default: all cores; 1 = in this process)")


def read_predictions(path: Path) -> list[dict[str, Any]]:
    """Parse and validate the predictions file; UserError names the file and line."""
    from ..benchmarks.longbench.score import check_sample

    records = []
    for lineno, record in iter_json_objects(path, hint="write one JSON object with dataset, pred, answers per line",
                                           what="predictions file"):
        where = f"{path}:{lineno}"
        missing = [k for k in ("dataset", "pred", "answers") if k not in record]
        if missing:
            raise UserError(f"{where}: missing field(s) {', '.join(missing)}; each line needs dataset, pred, answers")
        if not isinstance(record["dataset"], str) or not isinstance(record["pred"], str):
            raise UserError(f"{where}: 'dataset' and 'pred' must be strings")
        length = record.get("length")
        if length is not None and (isinstance(length, bool) or not isinstance(length, (int, float))):
            raise UserError(f"{where}: 'length' must be a number (context length in words)")
        try:
            check_sample(record["dataset"], record["answers"], record.get("all_classes"))
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None
        except (ValueError, TypeError) as exc:
            raise UserError(f"{where}: {exc}") from None
        records.append(record)
    if not records:
        raise UserError(f"{path}: no predictions found; write one JSON object per line")
    return records


def format_report(agg: Aggregate) -> str:
    """Plain-text tables: per dataset, per category, overall, then per length bin."""
    lines: list[str] = []

    def block(title: str, part: Summary) -> None:
        lines.append(title)
        for name, value in part["by_task"].items():
            lines.append(f"  {name:<24}{value:>8.2f}")
        lines.append("  categories:")
        for name, value in part["by_category"].items():
            lines.append(f"  {name:<24}{value:>8.2f}")
        overall = "  ".join(
            f"{k.upper() if k != 'all' else 'All'} {'-' if v is None else f'{v:.2f}'}"
            for k, v in part["overall"].items()
        )
        lines.append(f"  Overall  {overall}")

    block("LongBench scores (x100)", agg)
    for name, part in agg.get("by_length", {}).items():
        lines.append("")
        block(f"Length {name}", part)
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from ..benchmarks.longbench.aggregate import aggregate_longbench
    from ..benchmarks.longbench.score import score_many

    if args.jobs is not None and args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    records = read_predictions(args.predictions)
    scores = score_many(
        [r["dataset"] for r in records],
        [r["pred"] for r in records],
        [r["answers"] for r in records],
        [r.get("all_classes") for r in records],
        jobs=args.jobs,
    )
    if args.per_sample:
        try:
            with args.per_sample.open("w", encoding="utf-8") as out:
                for record, score in zip(records, scores):
                    out.write(json.dumps({**record, "score": score}, ensure_ascii=False) + "\n")
        except OSError as exc:
            raise UserError(f"cannot write {args.per_sample}: {exc.strerror or exc}") from None
    agg = aggregate_longbench(
        (r["dataset"], s, r.get("length")) for r, s in zip(records, scores)
    )
    print(json.dumps(agg, ensure_ascii=False) if args.json else format_report(agg))
    return 0
