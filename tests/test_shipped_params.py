"""The parameters shipped in asyncbench/data/minilongbench: rebuilt bit-for-bit by the
command in their README, the release's anchors, and the estimate's calibrated interval."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asyncbench.cli import main
from asyncbench.estimators import build as B
from asyncbench.estimators import irt
from asyncbench.estimators.conformal import interval
from asyncbench.estimators.methods import DEFAULT_METHOD, METHODS
from asyncbench.estimators.minilongbench import load_estimator

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"
needs_data = pytest.mark.skipif(not (DATA / "longbench_scores.npz").exists(), reason="../shared/data missing")
FILES = ("irt_parameters.json", "anchors.json", "estimator.json", "category_irt.json")


@pytest.mark.slow
@needs_data
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the pinned kernels are x86-64's")
def test_shipped_parameters_rebuild_bit_for_bit(tmp_path):
    """The README's command, environment included, in a fresh process (the variables pin
    OpenBLAS's and numpy's kernels, read when numpy loads), gives the shipped bytes."""
    readme = (irt.SHIPPED / "README.md").read_text()
    block = readme.split("    OPENBLAS_CORETYPE=")[1].split("\n\n")[0]
    words = shlex.split(("OPENBLAS_CORETYPE=" + block).replace("\\\n", " "))
    env = dict(os.environ)
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[:3] == ["asyncbench", "minilongbench", "build"]
    args = words[3:]
    args[args.index("--out") + 1] = str(tmp_path)
    root = Path(__file__).resolve().parents[1]
    args = [str(root / a) if a.startswith("../") else a for a in args]
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "minilongbench", "build", *args], env=env,
                          cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (irt.SHIPPED / name).read_bytes(), name


@needs_data
def test_shipped_parameters_keep_the_release_anchors():
    shipped, release = load_estimator(irt.SHIPPED), load_estimator(DATA)
    assert np.array_equal(shipped.params.anchors, release.params.anchors)  # the prompts in samples/ are these
    assert shipped.params.method == DEFAULT_METHOD and shipped.methods() == METHODS
    assert set(shipped.params.conformal) == set(METHODS) and {len(v) for v in shipped.params.conformal.values()} == {30}
    assert {len(r) for cats in shipped.conformal_by_category.values() for r in cats.values()} == {30}
    assert release.params.method == "irt" and not release.params.conformal and release.methods() == METHODS[:3]


@needs_data
def test_estimate_has_a_90_percent_interval_by_default(tmp_path, capsys):
    scores = np.load(DATA / "longbench_scores.npz")["scores"]
    anchors = json.loads((DATA / "anchors.json").read_text())["sorted_anchors"]
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"scores": scores[5, anchors].tolist()}))
    assert main(["estimate", "minilongbench", "--anchor-scores", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    low, high = out["overall_ci90"]
    assert out["method"] == DEFAULT_METHOD and 0 <= low < out["overall"] < high <= 1 and high - low < 0.15
    assert all(out[m]["ci90"][0] <= out[m]["overall"] <= out[m]["ci90"][1] for m in METHODS)
    for cat, (lo, hi) in out["by_category_ci90"].items():
        assert lo <= out[DEFAULT_METHOD]["by_category"][cat] <= hi
    assert main(["estimate", "minilongbench", "--anchor-scores", str(path), "--params", "release",
                 "--data-dir", str(DATA.parent)]) == 0
    text = capsys.readouterr().out
    assert "estimated LongBench Overall (irt)" in text and "90% interval" not in text


def test_conformal_interval_uses_the_split_conformal_order_statistics():
    residuals = np.linspace(-0.05, 0.05, 101)  # sorted; n = 101
    low, high = interval(0.5, residuals)
    assert low == pytest.approx(0.5 + residuals[4]) and high == pytest.approx(0.5 + residuals[96])
    assert interval(0.5, [0.01, -0.02]) == pytest.approx([0.48, 0.51])  # few residuals: min and max
    assert interval(0.99, [0.0, 0.05]) == [0.99, 1.0]  # clipped to the scale


@needs_data
def test_cost_aware_counts_respect_the_budget():
    scores = np.load(DATA / "longbench_scores.npz")["scores"][:20]
    lengths = B.sample_lengths()
    for budget in (0.02, 0.03):
        counts = B.cost_aware_counts(scores, budget)
        per_sample = np.array([lengths[sl.start] for sl in irt.dataset_slices().values()])
        assert counts.min() >= 2 and counts @ per_sample <= budget * lengths.sum()
        assert counts[irt.DATASET_NAMES.index("lcc")] > counts[irt.DATASET_NAMES.index("narrativeqa")]  # cheap code
    params = irt.load_params(DATA)
    anchors = B.select_anchors(params.disc, params.diff, 0, "cost", scores=scores, budget=0.03)
    assert irt.token_cost(anchors)["fraction"] <= 0.03
