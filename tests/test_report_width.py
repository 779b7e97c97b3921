"""The terminal report at 80 and 120 columns: a table wider than the terminal is printed in
parts, each number whole, and no column twice (issue 36: at 80 columns "14." sat over
"86" in every cell, and "estimated overall (blend)" was shown twice)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from asyncbench.estimators.methods import DEFAULT_METHOD

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not (SHARED / "minilongbench").is_dir(), reason="../shared/data not available")


def _cli(*args: str, cwd: Path, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": str(columns), "ASYNCBENCH_DATA_DIR": str(SHARED)}
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("columns", [80, 120])
def test_the_terminal_report_fits_its_width_with_every_number_whole(tmp_path: Path, columns: int) -> None:
    cache = str(tmp_path / "c.duckdb")
    done = _cli("run", "minilongbench", "--model", "sim", "--cache", cache, "--no-progress", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    shown = _cli("report", summary["run_id"], "--cache", cache, cwd=tmp_path, columns=columns)
    assert shown.returncode == 0, shown.stderr[-2000:]
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    text = "\n".join(lines)
    for value in (100 * summary["scores"]["estimate"]["overall"], summary["scores"]["anchor_average"]):
        assert f"{value:.2f}" in text  # on one line, not wrapped inside its cell
    assert not [line for line in lines if re.search(r"│\s+\d+\.\s+│", line)]  # no "14." cut from its "86"
    flat = " ".join(text.split())  # headers wrap at spaces: compare their words
    head = f"({DEFAULT_METHOD})"
    assert head + "*" in flat and head + " " not in flat.replace(head + "*", "")
