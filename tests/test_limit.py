"""`--limit N` runs the first N samples of each task, on every benchmark.

A dry run prices exactly what the run would send, so its sample count is the check: a
benchmark that ignored the limit (BAMBOO once priced and sent all 200 of altqa for
`--limit 4`) sends, and bills, far more than the user asked for.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from adaptive_data import make_longbench_dir

from asyncbench.cli import main

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not (SHARED / "minilongbench").is_dir(), reason="../shared/data not available")


def _dry_run(capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: str, data_dir: Path, *extra: str) -> dict:
    rc = main(["run", spec, "--model", "sim", "--dry-run", "--json", "--data-dir", str(data_dir),
               "--cache", str(tmp_path / "cache.duckdb"), "--out", str(tmp_path / "out"), *extra])
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


def _longbench_dir(tmp_path: Path) -> Path:
    root = make_longbench_dir(tmp_path / "data", SHARED, per_dataset=5)
    data = root / "longbench" / "data"
    for path in list(data.glob("*.jsonl")):  # LongBench-E's files are the same rows under <dataset>_e
        shutil.copy(path, data / f"{path.stem}_e.jsonl")
    return root


def _shared(tmp_path: Path) -> Path:
    return SHARED


CASES: list[tuple[str, Callable[[Path], Path], tuple[str, ...], int]] = [
    # (spec, data directory, extra flags, tasks the spec selects)
    ("bamboo:altqa", _shared, ("--length", "4k"), 1),
    ("bamboo:altqa,private_eval", _shared, ("--length", "4k"), 2),
    ("minilongbench:trec,lsht", _shared, (), 2),
    ("longbench:hotpotqa,trec", _longbench_dir, (), 2),
    ("longbench-e:hotpotqa,trec", _longbench_dir, (), 2),
    ("100-longbench:kv_retrieval", _shared, ("--lengths", "2k", "--rows", "5"), 2),  # base set + 2k
]


@pytest.mark.parametrize("spec,data,extra,tasks", CASES, ids=[c[0] for c in CASES])
def test_limit_holds_on_every_benchmark(spec: str, data: Callable[[Path], Path], extra: tuple[str, ...], tasks: int,
                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = data(tmp_path)
    limited = _dry_run(capsys, tmp_path, spec, data_dir, "--limit", "2", *extra)
    full = _dry_run(capsys, tmp_path, spec, data_dir, *extra)
    assert full["n_samples"] > limited["n_samples"]  # the limit had something to cut
    assert 0 < limited["n_samples"] <= 2 * tasks
    assert limited["by_purpose"]["eval"]["requests"] <= 2 * tasks  # and nothing beyond it is priced


def test_limit_holds_on_a_jsonl_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "prompt": f"say {i}", "answers": [str(i)]}) + "\n"
                            for i in range(10)))
    limited = _dry_run(capsys, tmp_path, f"jsonl:{path}", tmp_path, "--limit", "4")
    assert limited["n_samples"] == 4
