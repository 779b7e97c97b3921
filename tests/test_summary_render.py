"""The end-of-run summary as a user sees it: 80 columns, no Python reprs, no long floats,
and the simulator's dollars labelled notional. Rendered from a real run.json (a small
100-LongBench run against the simulator: it has list, nested and interval scores)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from rich.console import Console

from asyncbench.cli import main as cli_main
from asyncbench.pricing import NOTIONAL
from asyncbench.report.summary import print_summary, readable
from asyncbench.run_summary import RunSummary

REPR = re.compile(r"\{'|\['|': |\bNone\b|\bTrue\b|\bFalse\b")
LONG_FLOAT = re.compile(r"\d\.\d{5,}")


def render(summary: dict, width: int = 80) -> str:
    out = io.StringIO()
    print_summary(RunSummary.from_json(summary), Console(file=out, width=width, no_color=True, force_terminal=False))
    return out.getvalue()


def test_a_100_longbench_summary_fits_80_columns_in_plain_words(tmp_path: Path, shared_data: Path) -> None:
    assert cli_main(["run", "100-longbench", "--model", "sim", "--judge", "sim", "--lengths", "2k", "--rows", "2",
                     "--data-dir", str(shared_data), "--cache", str(tmp_path / "c.duckdb"), "--out",
                     str(tmp_path / "o"), "--no-progress"]) == 0
    summary = json.loads((tmp_path / "o" / "run.json").read_text())
    assert isinstance(summary["scores"]["overall_tasks"], list) and isinstance(summary["scores"]["longscore"], dict)
    text = render(summary)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert not REPR.search(text), REPR.search(text)
    assert not LONG_FLOAT.search(text), LONG_FLOAT.search(text)
    assert "…" not in text  # nothing in the table was cropped to fit
    assert " ".join(NOTIONAL.split()) in " ".join(text.split())
    assert f"overall tasks: {', '.join(summary['scores']['overall_tasks'])}" in text


def test_readable_formats_nested_scores_with_their_intervals() -> None:
    value = {"base": 20.833333333333332, "lc": {"2k": 32.98701298701299}, "n": 3}
    ci = {"base": [8.33, 33.33]}
    assert readable(value, ci) == "base 20.83 ±12.50, lc (2k 32.99), n 3"
    assert readable(["a_b", "c"]) == "a_b, c"
