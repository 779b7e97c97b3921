"""`asyncbench estimate minilongbench` reads the release's example file and a `samples`
export in any row order, with the real MiniLongBench data (../shared/data)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from asyncbench.cli import main as cli_main
from asyncbench.estimators.irt import DATASET_NAMES, anchor_datasets
from asyncbench.estimators.minilongbench import estimate_from_anchor_scores


def _estimate(capsys: pytest.CaptureFixture[str], path: Path) -> float:
    capsys.readouterr()
    assert cli_main(["estimate", "minilongbench", "--anchor-scores", str(path), "--json"]) == 0
    return float(json.loads(capsys.readouterr().out)["overall"])


def _records(shared_data: Path) -> tuple[list[dict[str, object]], list[float]]:
    """llama-30b's 237 real anchor scores as `samples` export records (ids DATASET/KEY,
    the keys of the release's samples/ files), and the same scores in sorted-anchor order."""
    root = shared_data / "minilongbench"
    table = np.load(root / "longbench_scores.npz")
    anchors = np.array(json.loads((root / "anchors.json").read_text())["sorted_anchors"])
    truth = table["scores"][list(table["models"]).index("llama-30b"), anchors].astype(float).tolist()
    which = anchor_datasets(anchors)
    records = []
    for k, name in enumerate(DATASET_NAMES):
        keys = sorted(json.loads((root / "samples" / f"MiniLongBench_{name}.json").read_text()), key=int)
        values = [v for v, d in zip(truth, which) if d == k]
        assert len(keys) == len(values)
        records += [{"sample_id": f"{name}/{key}", "task": name, "status": "answered", "score": v}
                    for key, v in zip(keys, values)]
    return records, truth


def test_the_release_example_file_is_accepted(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_data / "minilongbench" / "example_reference_scores.json"
    scores = json.loads(path.read_text())["scores_in_sorted_anchor_order"]
    assert _estimate(capsys, path) == pytest.approx(estimate_from_anchor_scores(scores)["overall"], abs=1e-12)


def test_a_samples_export_in_any_order_sorts_ids_by_number(shared_data: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    records, truth = _records(shared_data)
    want = estimate_from_anchor_scores(truth)["overall"]
    ids = [str(r["sample_id"]) for r in records]
    assert "2wikimqa/2" in ids and "2wikimqa/10" in ids  # text order would put /10 first
    text_order = sorted(records, key=lambda r: str(r["sample_id"]))
    assert [r["sample_id"] for r in text_order] != ids
    jsonl = tmp_path / "text_order.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in text_order))
    assert _estimate(capsys, jsonl) == pytest.approx(want, abs=1e-12)
    # reversed, as CSV (what `samples --out FILE.csv` writes: the score as text)
    out = tmp_path / "reversed.csv"
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["sample_id", "task", "status", "score"])
        writer.writeheader()
        writer.writerows(reversed(records))
    assert _estimate(capsys, out) == pytest.approx(want, abs=1e-12)


def test_a_sample_without_score_is_one_clear_line(shared_data: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    records, _ = _records(shared_data)
    records[5] = {**records[5], "score": None, "status": "failed"}
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert cli_main(["estimate", "minilongbench", "--anchor-scores", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"sample {records[5]['sample_id']} has no score (status failed)" in err and "Traceback" not in err


def test_every_format_samples_writes_is_read(shared_data: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A real MiniLongBench run on the simulator, exported by `samples` as CSV, JSON lines
    and parquet: each gives the same estimate. The CSV carries every prompt (over the csv
    module's 128 KiB field default: a traceback once), and parquet was refused."""
    cache = tmp_path / "c.duckdb"
    assert cli_main(["run", "minilongbench", "--model", "sim", "--data-dir", str(shared_data), "--cache", str(cache),
                     "--out", str(tmp_path / "run"), "--no-progress", "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    overall = []
    for fmt in ("csv", "jsonl", "parquet"):
        out = tmp_path / f"samples.{fmt}"
        assert cli_main(["samples", run_id, "--cache", str(cache), "--out", str(out)]) == 0
        overall.append(_estimate(capsys, out))
    with open(tmp_path / "samples.csv", newline="") as fh:
        assert max(len(v) for r in csv.DictReader(fh) for v in r.values()) > 131072
    assert overall[0] == pytest.approx(overall[1], abs=1e-12) and overall[1] == pytest.approx(overall[2], abs=1e-12)
