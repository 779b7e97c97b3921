"""Estimate full-LongBench scores from a model's 237 MiniLongBench anchor scores.

Input: `{"scores": [237 floats in sorted-anchor order]}` or `{"scores": {dataset:
[floats]}}` (or the mapping at top level), the release's example file
(`{"scores_in_sorted_anchor_order": [...]}`), or the `asyncbench samples RUN --out
FILE.jsonl|.csv|.parquet` export of a MiniLongBench run in any row order; scores on the 0-1 scale. Prints every
method's estimate (estimators/minilongbench.py) per dataset, per category and Overall, the
headline Overall with its 90% interval (`overall_ci90`) and the headline's category
intervals, and the anchors' share of the full benchmark's length. The parameters are the
shipped ones unless `--params release` or `--params DIR`.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..estimators.methods import DEFAULT_METHOD, METHODS
from ..json_values import as_object


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--anchor-scores", required=True, metavar="FILE.json", help="the model's anchor scores: JSON, or a `samples` export (.jsonl/.csv/.parquet)")
    parser.add_argument("--method", choices=METHODS,
                        help=f"headline method (default: the parameters', {DEFAULT_METHOD} for the shipped ones; "
                             "the release's have irt, direct and blend)")
    parser.add_argument("--params", default="shipped", metavar="shipped|release|DIR",
                        help="shipped (default: the improved fit on 30 models), release (<data-dir>/minilongbench, "
                             "else downloaded) or a directory from `asyncbench minilongbench build`")
    parser.add_argument("--data-dir", metavar="DIR", help="data directory (or ASYNCBENCH_DATA_DIR) for --params release")
    parser.add_argument("--json", action="store_true", help="print JSON")


def read_anchor_scores(path: Path) -> Sequence[float] | Mapping[str, Sequence[float]]:
    """The anchor scores in FILE: a `scores` list or {dataset: [scores]} mapping, the
    release's example file (`scores_in_sorted_anchor_order`), or a `samples` export of a
    MiniLongBench run (.jsonl, .csv, .parquet or a JSON list of records with `sample_id` and
    `score`). UserError naming the problem."""
    from ..errors import UserError
    from ..jsonl_io import parse_json, read_json_file, read_text_file

    if not path.is_file():
        raise UserError(f"{path}: no such file; pass --anchor-scores FILE.json")
    hint = 'expected {"scores": [237 numbers]} or a `asyncbench samples RUN --out FILE.jsonl` export'
    if path.suffix.lower() == ".parquet":
        return scores_from_samples(_parquet_records(path), path)
    if path.suffix.lower() not in (".csv", ".jsonl"):
        raw = read_json_file(path, hint=hint, what="anchor scores")
        if isinstance(raw, list) and raw and isinstance(raw[0], dict):
            return scores_from_samples(raw, path)
        if isinstance(raw, dict):
            for key in ("scores", "scores_in_sorted_anchor_order"):
                if key in raw:
                    raw = raw[key]
                    break
        if not isinstance(raw, (list, dict)):
            raise UserError(f'{path}: expected {{"scores": [237 numbers]}}, {{"scores": {{dataset: [numbers]}}}} '
                            "or a `asyncbench samples RUN --out FILE.jsonl` export")
        return raw  # its numbers are checked where they are read (irt.anchor_vector)
    text = read_text_file(path, what="anchor scores")
    if path.suffix.lower() == ".csv":
        # a `samples` export carries each prompt, far over the csv module's 128 KiB field default
        csv.field_size_limit(2**31 - 1)
        return scores_from_samples(list(csv.DictReader(io.StringIO(text))), path)
    rows = [parse_json(line, f"{path} line {lineno}", hint)  # .jsonl
            for lineno, line in enumerate(text.splitlines(), 1) if line.strip()]
    return scores_from_samples(rows, path)


def _parquet_records(path: Path) -> list[dict[str, object]]:
    """`sample_id`, `score` and `status` of a `samples --out FILE.parquet` export."""
    from ..errors import UserError
    from ..store.parquet import read_parquet_columns

    try:
        return read_parquet_columns(path, ("sample_id", "score", "status"), ("sample_id", "score"))
    except UserError as exc:
        raise UserError(f"{exc}; expected a `asyncbench samples RUN --out FILE.parquet` export") from None


def _id_order(sample_id: str) -> tuple[str, int]:
    """("2wikimqa", 2) from "2wikimqa/2": within a dataset the anchors are in ascending
    LongBench order, so ids sort by number ("/2" before "/10"), never as text."""
    dataset, _, key = sample_id.rpartition("/")
    return dataset, int(key)


def scores_from_samples(rows: Sequence[object], path: Path) -> dict[str, list[float]]:
    """{dataset: scores in ascending id order} from a `samples` export, in any row order."""
    from ..errors import UserError

    by_dataset: dict[str, list[tuple[int, float]]] = {}
    for n, row in enumerate(rows, 1):
        record = as_object(row)
        sample_id = record.get("sample_id")
        if not isinstance(sample_id, str):
            raise UserError(f"{path} record {n}: no sample_id; expected a `asyncbench samples RUN` export")
        try:
            dataset, key = _id_order(sample_id)
        except ValueError:
            raise UserError(f"{path} record {n}: sample id {sample_id!r} is not DATASET/NUMBER, "
                            "as a MiniLongBench run's are") from None
        score = record.get("score")
        if score in (None, ""):
            raise UserError(f"{path}: sample {sample_id} has no score (status {record.get('status') or 'unknown'}); "
                            "the estimate needs all 237 anchors: finish the run with `asyncbench run --resume`")
        try:
            if not isinstance(score, (int, float, str)):
                raise TypeError(score)
            by_dataset.setdefault(dataset, []).append((key, float(score)))
        except (TypeError, ValueError):
            raise UserError(f"{path}: sample {sample_id}: score {score!r} is not a number") from None
    out = {}
    for dataset, pairs in by_dataset.items():
        pairs.sort()
        if len({k for k, _ in pairs}) != len(pairs):
            raise UserError(f"{path}: {dataset} has the same sample id twice; export one run")
        out[dataset] = [v for _, v in pairs]
    return out


LABELS = {"category_irt": "cat-irt"}  # the table's column titles, to fit 80 columns


def render(result: dict[str, Any]) -> str:
    """A plain-text table within 80 columns: dataset/category/Overall rows, one column per
    method (x100), then the headline with its 90% intervals (Overall and categories)."""
    methods = [m for m in METHODS if m in result]

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.2f}"

    lines = [f"{'':21s}" + "".join(f"{LABELS.get(m, m):>9s}" for m in methods)]
    for name in result["irt"]["by_dataset"]:
        lines.append(f"{name:21s}" + "".join(f"{fmt(result[m]['by_dataset'].get(name)):>9s}" for m in methods))
    lines.append("")
    for cat in result["irt"]["by_category"]:
        lines.append(f"{cat:21s}" + "".join(f"{fmt(result[m]['by_category'][cat]):>9s}" for m in methods))
    lines.append(f"{'Overall':21s}" + "".join(f"{fmt(result[m]['overall']):>9s}" for m in methods))
    cost = result["token_cost"]
    lines.append("")
    ci = result.get("overall_ci90")
    lines.append(f"estimated LongBench Overall ({result['method']}): {100 * result['overall']:.2f}"
                 + (f" (90% interval {100 * ci[0]:.2f} to {100 * ci[1]:.2f})" if ci else ""))
    cat_ci = result.get("by_category_ci90") or {}
    if cat_ci:
        head = result[result["method"]]["by_category"]
        lines += [f"  {cat:19s} {100 * head[cat]:6.2f} (90% interval {100 * lo:.2f} to {100 * hi:.2f})"
                  for cat, (lo, hi) in cat_ci.items()]
    lines.append(f"cost: {cost['anchor_samples']} of {cost['full_samples']} samples, "
                 f"{100 * cost['fraction']:.1f}% of the full benchmark's length ({100 * cost['saved_fraction']:.1f}% saved)")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from ..datadir import resolve_data_dir
    from ..estimators.minilongbench import estimate_from_anchor_scores

    scores = read_anchor_scores(Path(args.anchor_scores))
    result = estimate_from_anchor_scores(scores, args.params, args.method, data_dir=resolve_data_dir(args.data_dir))
    print(json.dumps(result, indent=1) if args.json else render(result))
    return 0
