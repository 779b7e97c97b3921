"""Algorithm 1 (threshold, 2PL fit, K-Means anchors) on the release's data (../shared/data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from asyncbench.benchmarks.longbench.table import CATEGORY_OF
from asyncbench.estimators import build as B
from asyncbench.estimators import crossval as C
from asyncbench.estimators import irt
from asyncbench.estimators import minilongbench as mlb

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"
pytestmark = pytest.mark.skipif(not (DATA / "longbench_scores.npz").exists(), reason="../shared/data missing")


@pytest.fixture(scope="module")
def table() -> tuple[np.ndarray, np.ndarray, list[str]]:
    z = np.load(DATA / "longbench_scores.npz")
    models = list(z["models"])
    train = json.loads((DATA / "longbench_scores.json").read_text())["irt_train_models"]
    return z["scores"], np.array([models.index(m) for m in train]), models


def test_threshold_matches_release(table):
    scores, train, _ = table
    assert B.best_threshold(scores[train]) == pytest.approx(0.366364, abs=1e-6)
    labels, cs = B.make_labels(scores[train], "per-dataset")
    assert set(np.unique(labels)) == {0.0, 1.0} and len(cs) == 21
    assert cs["qmsum"] < B.best_threshold(scores[train])  # ROUGE-L needs a lower bar


def test_fit_irt_recovers_a_planted_model():
    rng = np.random.default_rng(1)
    theta, disc = rng.standard_normal((40, 2)), rng.standard_normal((300, 2))
    diff = 0.3 * rng.standard_normal(300)
    p = 1 / (1 + np.exp(-(theta @ disc.T - 2 * diff)))
    labels = (rng.random(p.shape) < p).astype(float)
    a, b, t, loss = B.fit_irt(labels, disc + 0.5 * rng.standard_normal(disc.shape), max_iter=200)
    fitted = 1 / (1 + np.exp(-(t @ a.T - 2 * b)))
    assert np.corrcoef(fitted.ravel(), p.ravel())[0, 1] > 0.85
    assert loss < np.mean(np.logaddexp(0, 0) * np.ones(1))  # better than p = 0.5 everywhere


def test_select_anchors_counts():
    params = irt.load_params(DATA)
    by_cat = B.select_anchors(params.disc, params.diff, 237, "category")
    assert len(by_cat) == 237 == len(np.unique(by_cat)) and np.all(np.diff(by_cat) > 0)
    cat_of = np.array([CATEGORY_OF[irt.DATASET_NAMES[k]] for k in irt.anchor_datasets(by_cat)])
    assert (cat_of == "Code").sum() == 237 - sum(
        int(n / 4750 * 237) for n in (750, 800, 800, 800, 600))  # the release's remainder rule
    by_ds = B.select_anchors(params.disc, params.diff, 237, "dataset")
    counts = np.bincount(irt.anchor_datasets(by_ds), minlength=21)
    assert len(by_ds) == 237 and counts.min() >= 2
    assert counts[irt.DATASET_NAMES.index("lcc")] > counts[irt.DATASET_NAMES.index("qmsum")]


def test_build_save_and_estimate(table, tmp_path):
    scores, train, _ = table
    emb = np.load(DATA / "embeddings_pca.npy")
    result = B.build(scores[train], emb, B.Recipe(labels="soft", max_iter=40, calibrate=True))
    result.params.save(tmp_path)
    loaded = irt.load_params(tmp_path)
    assert len(loaded.anchors) == 237 and set(loaded.calibration) == set(irt.DATASET_NAMES)
    est = mlb.estimate(mlb.Estimator(loaded), scores[0, loaded.anchors])
    assert 0 < est["irt"]["overall"] < 1 and est["calibrated"]


def test_crossval_two_splits_improved_beats_chance(table):
    scores, _, _ = table
    emb = np.load(DATA / "embeddings_pca.npy")
    res = [C.evaluate(scores, emb, B.Recipe(labels="soft", max_iter=60), tr, te) for tr, te in C.splits(30, 10, 2)]
    summary = C.summarise(res)
    assert summary["irt"]["spearman"]["overall"] > 0.8
    assert summary["irt"]["mae"]["overall"] < 0.05


def test_build_cli_errors(tmp_path, capsys):
    from asyncbench.cli import main

    np.save(tmp_path / "bad.npy", np.zeros((3, 10)))
    assert main(["minilongbench", "build", "--scores", str(tmp_path / "bad.npy"), "--out", str(tmp_path / "o"),
                 "--embeddings", str(DATA / "embeddings_pca.npy")]) == 2
    assert "expected `scores` of shape" in capsys.readouterr().err
    (tmp_path / "t.jsonl").write_text('{"text": "a"}\nnot json\n')
    assert main(["minilongbench", "build", "--scores", str(DATA / "longbench_scores.npz"), "--out",
                 str(tmp_path / "o"), "--texts", str(tmp_path / "t.jsonl")]) == 2
    assert "t.jsonl:2:" in capsys.readouterr().err
