"""Estimate full-LongBench scores from a model's 237 MiniLongBench anchor scores.

Input: `{"scores": [237 floats in sorted-anchor order]}` or `{"scores": {dataset:
[floats]}}` (or the mapping at top level), scores on the 0-1 scale. Prints the IRT,
direct and blended estimates per dataset, per category and Overall, the headline Overall
with its 90% interval (`overall_ci90`), and the anchors' share of the full benchmark's
length. The parameters are the shipped ones unless `--params release` or `--params DIR`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--anchor-scores", required=True, metavar="FILE.json", help="the model's anchor scores")
    parser.add_argument("--method", choices=("irt", "direct", "blend"),
                        help="headline method (default: the parameters', blend for the shipped ones)")
    parser.add_argument("--params", default="shipped", metavar="shipped|release|DIR",
                        help="shipped (default: the improved fit on 30 models), release (<data-dir>/minilongbench, "
                             "else downloaded) or a directory from `asyncbench minilongbench build`")
    parser.add_argument("--data-dir", metavar="DIR", help="data directory (or ASYNCBENCH_DATA_DIR) for --params release")
    parser.add_argument("--json", action="store_true", help="print JSON")


def read_anchor_scores(path: Path) -> Any:
    """The `scores` list or mapping from FILE.json (UserError naming the problem)."""
    from ..errors import UserError
    from ..jsonl_io import read_json_file

    if not path.is_file():
        raise UserError(f"{path}: no such file; pass --anchor-scores FILE.json")
    raw = read_json_file(path, hint='expected {"scores": [237 numbers]}', what="anchor scores")
    scores = raw.get("scores", raw) if isinstance(raw, dict) else raw
    if not isinstance(scores, (list, dict)):
        raise UserError(f'{path}: expected {{"scores": [237 numbers]}} or {{"scores": {{dataset: [numbers]}}}}')
    return scores


def render(result: dict[str, Any]) -> str:
    """A plain-text table: dataset/category/Overall rows, one column per method (x100)."""
    methods = ("irt", "direct", "blend")

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.2f}"

    lines = [f"{'':28s} " + " ".join(f"{m:>7s}" for m in methods)]
    for name in result["irt"]["by_dataset"]:
        lines.append(f"{name:28s} " + " ".join(f"{fmt(result[m]['by_dataset'].get(name)):>7s}" for m in methods))
    lines.append("")
    for cat in result["irt"]["by_category"]:
        lines.append(f"{cat:28s} " + " ".join(f"{fmt(result[m]['by_category'][cat]):>7s}" for m in methods))
    lines.append(f"{'Overall':28s} " + " ".join(f"{fmt(result[m]['overall']):>7s}" for m in methods))
    cost = result["token_cost"]
    lines.append("")
    ci = result.get("overall_ci90")
    lines.append(f"estimated LongBench Overall ({result['method']}): {100 * result['overall']:.2f}"
                 + (f" (90% interval {100 * ci[0]:.2f} to {100 * ci[1]:.2f})" if ci else ""))
    lines.append(f"cost: {cost['anchor_samples']} of {cost['full_samples']} samples, "
                 f"{100 * cost['fraction']:.1f}% of the full benchmark's length ({100 * cost['saved_fraction']:.1f}% saved)")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    from ..datadir import resolve_data_dir
    from ..estimators.irt import estimate_from_anchor_scores

    scores = read_anchor_scores(Path(args.anchor_scores))
    result = estimate_from_anchor_scores(scores, args.params, args.method, data_dir=resolve_data_dir(args.data_dir))
    print(json.dumps(result, indent=1) if args.json else render(result))
    return 0
