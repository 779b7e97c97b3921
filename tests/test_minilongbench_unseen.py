"""The default MiniLongBench estimate on models it never saw: the whole build learnt
inside each fold of a leave-one-family-out cross-validation over the release's 30 models
(bench/minilongbench_unseen.py runs it and leave-one-model-out for every method)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from asyncbench.estimators import unseen as U
from asyncbench.estimators.build import Recipe
from asyncbench.estimators.methods import DEFAULT_METHOD

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "longbench_scores.npz").exists(), reason="../shared/data missing")
def test_the_default_estimate_holds_on_families_it_never_saw():
    """Leave one family out (every model of a maker held out at once, the build on the
    others: 15 training models when Meta's are out) is harder than leaving one model out,
    and still meets the issue's bar for the default: Spearman >= 0.95, MAE <= 0.012 on the
    Overall, its 90% interval covering >= 85% of the held-out models (~4 min on 2 cores)."""
    z = np.load(DATA / "longbench_scores.npz")
    scores, models = z["scores"].astype(float), list(z["models"])
    anchors = np.array(json.loads((DATA / "anchors.json").read_text())["sorted_anchors"])
    folds = U.lofo(models)
    assert sorted(np.concatenate(folds).tolist()) == list(range(30))
    held = U.held_out(scores, np.load(DATA / "embeddings_pca.npy"), anchors, folds, Recipe.improved(), jobs=2)
    truth = U.truth_vectors(scores)
    est = np.array([U.aggregate_vector(v) for v in held.estimates[DEFAULT_METHOD]])
    bounds = held.intervals[DEFAULT_METHOD]
    assert spearmanr(est[:, 0], truth[:, 0])[0] >= 0.95
    assert np.abs(est[:, 0] - truth[:, 0]).mean() <= 0.012
    assert np.mean((bounds[:, 0, 0] <= truth[:, 0]) & (truth[:, 0] <= bounds[:, 0, 1])) >= 0.85
    # better than the release's own method (the IRT estimate) on the same folds
    irt = np.array([U.aggregate_vector(v) for v in held.estimates["irt"]])
    assert np.abs(est[:, 0] - truth[:, 0]).mean() < np.abs(irt[:, 0] - truth[:, 0]).mean()
