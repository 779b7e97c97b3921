"""Adaptive testing: selection and stopping on synthetic item parameters, and the offline
replay on the 30 models' real LongBench scores."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from asyncbench.errors import UserError
from asyncbench.estimators.adaptive import AdaptiveTest, Prior, overall_weights, run_replay
from asyncbench.estimators.irt import N_ITEMS, IrtParams, aggregate, dataset_index, item_curve

REPO = Path(__file__).resolve().parents[1]


def synthetic(d: int = 3, seed: int = 0) -> tuple[IrtParams, np.ndarray, np.ndarray]:
    """Item parameters for the 4,750 LongBench columns, a true θ and Bernoulli answers."""
    rng = np.random.default_rng(seed)
    disc = np.abs(rng.normal(0.6, 0.3, (N_ITEMS, d)))
    diff = rng.normal(0.0, 0.3, N_ITEMS) / d
    theta = rng.normal(0.0, 1.0, d)
    answers = (rng.random(N_ITEMS) < item_curve(theta, disc, diff)).astype(float)
    return IrtParams(disc, diff, np.arange(10)), theta, answers


def test_weights_give_longbench_overall():
    x = np.random.default_rng(1).random(N_ITEMS)
    assert abs(float(overall_weights() @ x) - aggregate(x)["overall"]) < 1e-12


def test_stops_at_target_se_and_estimate_is_close():
    params, _, answers = synthetic()
    cost = np.full(N_ITEMS, 1000.0)
    test = run_replay(AdaptiveTest(params, np.arange(N_ITEMS), cost, 0.02, Prior.isotropic(3)), answers)
    est = test.estimate()
    assert test.stop_reason == "target_se" and est.se <= 0.02
    assert test.trajectory[-1]["se"] <= 0.02 < test.trajectory[0]["se"] or len(test.trajectory) == 1
    assert len(test.asked) < N_ITEMS // 10  # far fewer than all
    assert abs(est.overall - aggregate(answers)["overall"]) < 4 * 0.02
    lo, hi = est.interval
    assert lo < est.overall < hi
    # the start set: one sample from each of the 21 datasets
    assert sorted(dataset_index()[test.asked[:21]]) == list(range(21))
    report = test.report()
    assert report["samples_used"] == len(test.asked) and report["stop_reason"] == "target_se"


def test_tighter_target_asks_more():
    params, _, answers = synthetic(seed=2)
    cost = np.full(N_ITEMS, 1000.0)
    used = [len(run_replay(AdaptiveTest(params, np.arange(N_ITEMS), cost, t, Prior.isotropic(3)), answers).asked)
            for t in (0.03, 0.015)]
    assert used[0] < used[1]


def test_information_per_token_prefers_the_cheap_item():
    params, _, _ = synthetic()
    params.disc[1] = params.disc[0]
    params.diff[1] = params.diff[0]
    cost = np.ones(N_ITEMS)
    cost[0] = 100.0
    test = AdaptiveTest(params, np.array([0, 1]), cost, 1e-6, Prior.isotropic(3), start_per_dataset=0, batch_size=1)
    assert test.next_batch() == [1]
    # the same costs: the more informative item wins (item 2 has much larger discrimination)
    params.disc[2] = params.disc[0] * 3
    params.diff[2] = params.diff[0] * 3
    cost[:] = 1.0
    test = AdaptiveTest(params, np.array([0, 2]), cost, 1e-6, Prior.isotropic(3), start_per_dataset=0, batch_size=1)
    assert test.next_batch() == [2]


def test_pool_end_max_samples_and_failures():
    params, _, answers = synthetic()
    cost = np.ones(N_ITEMS)
    pool = np.arange(0, N_ITEMS, 200)  # 24 items
    test = run_replay(AdaptiveTest(params, pool, cost, 1e-6, Prior.isotropic(3), batch_size=5), answers)
    assert test.stop_reason == "pool_exhausted" and sorted(test.asked) == list(pool)
    capped = run_replay(AdaptiveTest(params, np.arange(N_ITEMS), cost, 1e-6, Prior.isotropic(3),
                                     max_items=40), answers)
    assert capped.stop_reason == "max_samples" and len(capped.asked) == 40
    failing = AdaptiveTest(params, pool, cost, 1e-6, Prior.isotropic(3), batch_size=5)
    first = failing.next_batch()
    failing.observe(first, [None] * len(first))  # failed requests: not asked again
    assert failing.asked == [] and not set(first) & set(failing.next_batch())
    with pytest.raises(UserError):
        AdaptiveTest(params, pool, cost, 0.0, Prior.isotropic(3))


def test_replay_on_real_scores(shared_data):
    sys.path.insert(0, str(REPO / "bench"))
    import adaptive_replay

    rows = {r["method"]: r for r in adaptive_replay.main(["--quick", "--data", str(shared_data)])}
    anchors = rows["237 anchors, release estimator"]
    assert anchors["samples"] == 237 and anchors["mae"] < 0.05
    loose, tight = rows["adaptive, target SE 0.03"], rows["adaptive, target SE 0.015"]
    assert 21 <= loose["samples"] <= tight["samples"] < 4750
    assert tight["tokens"] < anchors["tokens"] and tight["mean_se"] <= 0.015
    assert tight["mae"] < 0.15
