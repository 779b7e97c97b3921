"""End to end: `asyncbench run longbench --adaptive` against the simulator on a generated
LongBench-format data directory, in a subprocess; then again from the cache."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from adaptive_data import make_longbench_dir


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "asyncbench"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_adaptive_run_stops_reports_and_reruns_free(tmp_path, shared_data):
    data = make_longbench_dir(tmp_path / "data", shared_data, per_dataset=4)
    args = ["run", "longbench", "--adaptive", "--target-se", "0.025", "--adaptive-batch", "8",
            "--model", "sim", "--data-dir", str(data), "--cache", str(tmp_path / "c.duckdb"),
            "--out", str(tmp_path / "o"), "--no-progress"]
    first = run(args, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "estimated full LongBench overall (adaptive)" in first.stdout.replace("\n", " ")
    summary = json.loads((tmp_path / "o" / "run.json").read_text())
    est = summary["scores"]["estimate"]
    assert est["available"] and est["method"] == "adaptive" and 0 < est["overall"] < 1
    assert est["ci95"][0] <= est["overall"] <= est["ci95"][1]
    assert est["stop_reason"] in ("target_se", "pool_exhausted")
    if est["stop_reason"] == "target_se":
        assert est["se"] <= 0.025 and est["samples_used"] < 84
    else:
        assert est["samples_used"] == 84
    # what was asked is what the ledger paid for; the rest is booked excluded
    assert est["tokens"] == summary["tokens"]["eval"]["prompt_tokens"] + summary["tokens"]["eval"]["completion_tokens"]
    assert est["tokens"] > 0 and summary["this_invocation"]["requests"] > 0
    samples = summary["samples"]
    assert samples["total"] == 84 and samples["excluded"] == 84 - est["samples_used"]
    assert len(est["trajectory"]) >= 1 and est["trajectory"][0]["samples"] == 21

    again = run(args, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    second = json.loads((tmp_path / "o" / "run.json").read_text())
    assert second["this_invocation"]["requests"] == 0 and second["this_invocation"]["cost_usd"] == 0
    assert second["scores"]["estimate"]["overall"] == est["overall"]
    assert second["scores"]["estimate"]["samples_used"] == est["samples_used"]


@pytest.mark.slow
def test_adaptive_stops_at_the_budget_and_needs_a_target(tmp_path, shared_data):
    data = make_longbench_dir(tmp_path / "data", shared_data, per_dataset=4)
    base = ["run", "longbench", "--model", "sim", "--data-dir", str(data), "--cache", str(tmp_path / "c.duckdb"),
            "--out", str(tmp_path / "o"), "--no-progress"]
    missing = run([*base, "--adaptive"], tmp_path)
    assert missing.returncode != 0 and "--target-se" in missing.stderr
    alone = run([*base, "--target-se", "0.01"], tmp_path)
    assert alone.returncode != 0 and "--adaptive" in alone.stderr
    capped = run([*base, "--adaptive", "--target-se", "0.001", "--max-cost", "0.0008"], tmp_path)
    assert capped.returncode == 3, capped.stderr[-3000:]  # partial: the budget left samples unsent
    est = json.loads((tmp_path / "o" / "run.json").read_text())["scores"]["estimate"]
    assert est["stop_reason"] == "budget" and est["samples_used"] < 84
