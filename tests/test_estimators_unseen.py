"""The learnt MiniLongBench estimators (anchor regression, per-category IRT, stacking), their
build, and what a build writes and a run reads back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from asyncbench.estimators import anchor_regression as R
from asyncbench.estimators import minilongbench as mlb
from asyncbench.estimators import unseen as U
from asyncbench.estimators.build import Recipe
from asyncbench.estimators.category_irt import CategoryIrt, category_columns, estimate_category_irt
from asyncbench.estimators.irt import CATEGORIES, DATASET_NAMES, N_ITEMS, aggregate
from asyncbench.estimators.stacking import choose_weights, simplex

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"
needs_data = pytest.mark.skipif(not (DATA / "longbench_scores.npz").exists(), reason="../shared/data missing")


def _planted(n: int = 24, p: int = 40, k: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.random((n, p))
    y = x @ rng.normal(0, 0.1, (p, k)) + rng.normal(0, 0.01, (n, k))
    return x, y


def test_ridge_leave_one_out_in_closed_form_equals_refitting():
    x, y = _planted()
    for lam in (0.1, 3.0):
        xc, yc = x - x.mean(axis=0), y - y.mean(axis=0)
        coef, hat = R._ridge_path(xc, yc, lam)
        closed = (yc - xc @ coef) / (1 - hat)[:, None]
        for i in (0, 7, 23):
            keep = np.arange(len(x)) != i
            xm, ym = x[keep].mean(axis=0), y[keep].mean(axis=0)
            c, _ = R._ridge_path(x[keep] - xm, y[keep] - ym, lam)
            assert np.allclose(y[i] - ym - (x[i] - xm) @ c, closed[i], atol=1e-10)


def test_ridge_chooses_a_small_penalty_for_a_clean_signal_and_predicts_it():
    x, y = _planted(n=60, p=10, k=2)
    fit = R.fit_ridge(x[:50], y[:50], np.array([0.5, 0.5]))
    assert fit.complexity <= 0.1
    assert np.abs(np.stack([fit.correction(row) for row in x[50:]]) - y[50:]).max() < 0.05
    back = R.AnchorRegression.from_json(json.loads(json.dumps(fit.to_json())))
    assert np.allclose(back.correction(x[55]), fit.correction(x[55]), atol=1e-8)


def test_pls_equals_scikit_learn():
    pytest.importorskip("sklearn")
    from sklearn.cross_decomposition import PLSRegression

    x, y = _planted()
    ours = R._pls(x - x.mean(axis=0), y - y.mean(axis=0), 4)
    for c in (1, 2, 4):
        ref = PLSRegression(n_components=c, scale=False, tol=1e-14, max_iter=5000).fit(x, y)
        got = (x - x.mean(axis=0)) @ ours[c - 1] + y.mean(axis=0)
        assert np.allclose(got, ref.predict(x), atol=1e-8), c


def test_stacking_finds_the_mixture_that_cancels_two_biases():
    truth = np.random.default_rng(2).random((30, 4))
    w = np.full(4, 0.25)
    preds = {"high": truth + 0.06, "low": truth - 0.02, "noise": truth + np.random.default_rng(3).normal(0, 0.1, (30, 4))}
    weights = choose_weights(preds, truth, w)
    assert weights == pytest.approx({"high": 0.25, "low": 0.75, "noise": 0.0})
    grid = simplex(3)
    assert np.allclose(grid.sum(axis=1), 1) and len(grid) == 231 and (grid >= 0).all()


def test_category_irt_keeps_the_anchors_and_uses_each_category_s_own():
    rng = np.random.default_rng(4)
    model = CategoryIrt(rng.normal(0.5, 0.2, (N_ITEMS, 3)), rng.normal(0, 0.2, N_ITEMS))
    cols = category_columns()
    assert sorted(np.concatenate(list(cols.values())).tolist()) == list(range(N_ITEMS))
    anchors = np.sort(np.concatenate([c[::40] for c in cols.values()]))
    y = rng.random(len(anchors))
    base = estimate_category_irt(model, anchors, y)
    last = list(CATEGORIES)[-1]
    moved = y.copy()
    moved[np.isin(anchors, cols[last])] = 1.0  # that category's anchors alone change
    after = estimate_category_irt(model, anchors, moved)
    assert after["by_category"][last] > base["by_category"][last]
    assert all(after["by_category"][c] == pytest.approx(base["by_category"][c]) for c in list(CATEGORIES)[:-1])


@needs_data
def test_a_build_writes_every_method_and_a_run_reads_them_back(tmp_path):
    """A small build (few iterations, 3 folds) round-trips: every method, its intervals."""
    z = np.load(DATA / "longbench_scores.npz")
    scores, emb = z["scores"][:12].astype(float), np.load(DATA / "embeddings_pca.npy")
    anchors = np.array(json.loads((DATA / "anchors.json").read_text())["sorted_anchors"])
    learnt = U.learn(scores, emb, anchors, Recipe.improved(max_iter=30), folds=3)
    assert sum(learnt.stack.values()) == pytest.approx(1.0)
    learnt.estimator("stack").save(tmp_path)
    back = mlb.load_estimator(tmp_path)
    assert back.methods() == ("irt", "direct", "blend", "category_irt", "ridge", "stack")
    y = z["scores"][20, anchors]
    out = mlb.estimate(back, y)
    assert out["method"] == "stack" and out["overall"] == out["stack"]["overall"]
    stacked = {d: sum(w * out[m]["by_dataset"][d] for m, w in back.stack.items()) for d in DATASET_NAMES}
    assert out["stack"]["by_dataset"] == pytest.approx(stacked)
    for m in back.methods():
        lo, hi = out[m]["ci90"]
        assert lo <= out[m]["overall"] <= hi and len(back.params.conformal[m]) == 12
        assert set(out[m]["by_category_ci90"]) == set(CATEGORIES)
    assert out["by_category_ci90"] == out["stack"]["by_category_ci90"]
    assert out["ridge"]["by_dataset"] == pytest.approx(
        mlb.estimate(back, y, method="ridge")["ridge"]["by_dataset"])  # the same numbers whatever the headline
    truth = aggregate(z["scores"][20])["overall"]
    assert abs(out["overall"] - truth) < 0.1


@needs_data
def test_release_parameters_have_only_the_release_s_methods(capsys):
    from asyncbench.cli import main
    from asyncbench.errors import UserError

    est = mlb.load_estimator(DATA)
    assert est.methods() == ("irt", "direct", "blend")
    with pytest.raises(UserError, match="not available with these parameters"):
        mlb.estimate(est, [0.5] * 237, method="stack")
    path = Path("a.json")
    path.write_text(json.dumps({"scores": [0.5] * 237}))
    assert main(["estimate", "minilongbench", "--anchor-scores", str(path), "--params", "release",
                 "--data-dir", str(DATA.parent), "--method", "ridge"]) == 2
    assert "not available with these parameters; choose one of irt, direct, blend" in capsys.readouterr().err


def test_families_cover_the_release_s_thirty_models_once():
    members = [m for group in U.FAMILIES.values() for m in group]
    assert len(members) == len(set(members)) == 30
    if (DATA / "longbench_scores.json").exists():
        assert sorted(members) == sorted(json.loads((DATA / "longbench_scores.json").read_text())["models"])
