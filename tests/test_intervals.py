"""Bootstrap intervals and paired comparisons (estimators.intervals) on synthetic scores
whose truth is known: coverage, clustering, the hierarchy, determinism."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from asyncbench.benchmarks.bamboo.metrics import precision_recall_f1
from asyncbench.benchmarks.longbench.aggregate import aggregate_longbench, resampling_plan
from asyncbench.estimators.intervals import Plan, compare, f1_stratum, intervals, mean_stratum


def _mean_of_tasks(stats: Mapping[str, Any]) -> dict[str, Any]:
    return {"overall": sum(stats.values()) / len(stats), "by_task": dict(stats)}


def test_95_interval_covers_the_true_mean_in_about_95_percent_of_datasets() -> None:
    rng = np.random.default_rng(2024)
    a, b, n, trials = 2.0, 5.0, 100, 500
    truth = 100 * a / (a + b)
    covered = 0
    for i in range(trials):
        scores = rng.beta(a, b, size=n)
        lo, hi = intervals(Plan({"t": mean_stratum(scores.tolist())}, _mean_of_tasks), seed=i)["overall"]
        covered += lo <= truth <= hi
    assert 0.93 <= covered / trials <= 0.97, covered / trials


def test_clustered_resampling_is_wider_when_scores_correlate_within_contexts() -> None:
    rng = np.random.default_rng(7)
    contexts, per = 40, 5  # 40 papers, 5 questions each; a paper is easy or hard for the model
    level = rng.uniform(0, 1, size=contexts)
    scores = np.clip(np.repeat(level, per) + rng.normal(0, 0.05, size=contexts * per), 0, 1).tolist()
    labels = np.repeat(np.arange(contexts), per).tolist()
    naive = intervals(Plan({"t": mean_stratum(scores)}, _mean_of_tasks))["overall"]
    clustered = intervals(Plan({"t": mean_stratum(scores, labels)}, _mean_of_tasks))["overall"]
    assert (clustered[1] - clustered[0]) > 1.8 * (naive[1] - naive[0])
    # both are about the same mean: clustering changes the spread, not the centre
    assert abs(sum(clustered) / 2 - sum(naive) / 2) < 2


def test_macro_average_intervals_are_resampled_through_the_scores_own_averaging() -> None:
    rng = np.random.default_rng(3)
    rows = [(task, float(rng.uniform())) for task, n in (("hotpotqa", 150), ("qasper", 200), ("dureader", 120),
                                                           ("lcc", 300), ("trec", 90)) for _ in range(n)]
    scores = aggregate_longbench(rows)
    plan = resampling_plan(rows)
    observed = plan.combine({t: np.asarray(s.value()) for t, s in plan.strata.items()})
    assert round(float(observed["overall"]), 2) == scores["overall"]["all"]
    assert round(float(observed["overall_zh"]), 2) == scores["overall"]["zh"]
    assert {k: round(float(v), 2) for k, v in observed["by_category"].items()} == scores["by_category"]
    ci = intervals(plan)
    assert set(ci) == {"overall", "overall_en", "overall_zh", "by_category", "by_task"}
    assert set(ci["by_task"]) == set(scores["by_task"]) and set(ci["by_category"]) == set(scores["by_category"])
    for key in ("overall", "overall_en", "overall_zh"):
        lo, hi = ci[key]
        assert lo < scores["overall"][key.removeprefix("overall_") if key != "overall" else "all"] < hi
    # averaging independent tasks narrows the interval: overall is narrower than any task
    width = {t: hi - lo for t, (lo, hi) in ci["by_task"].items()}
    assert ci["overall"][1] - ci["overall"][0] < min(width.values())
    assert intervals(plan) == ci  # seeded: run.json is reproducible
    assert intervals(plan, seed=1) != ci


def test_f1_stratum_is_the_bamboo_f1() -> None:
    rng = np.random.default_rng(5)
    predicted, gold = (rng.uniform(size=60) < 0.5).tolist(), (rng.uniform(size=60) < 0.4).tolist()
    assert f1_stratum(predicted, gold).value() == pytest.approx(100 * precision_recall_f1(predicted, gold)[2])
    assert f1_stratum([False, False], [True, False]).value() == 0.0


def test_compare_finds_a_real_difference_and_none_between_equal_runs() -> None:
    rng = np.random.default_rng(11)
    a = rng.uniform(0, 1, size=200)
    b = np.clip(a + 0.08 + rng.normal(0, 0.05, size=200), 0, 1)
    plan = lambda s: Plan({"t": mean_stratum(s.tolist())}, _mean_of_tasks)
    better = compare(plan(a), plan(b))["overall"]
    assert better["diff"] > 5 and better["ci"][0] > 0 and better["p"] < 0.01 and better["distinguishable"]
    worse = compare(plan(b), plan(a))["overall"]
    assert worse["diff"] == -better["diff"] and worse["ci"][1] < 0
    same = compare(plan(a), plan(a))["overall"]
    assert same["diff"] == 0 and same["ci"] == [0, 0] and same["p"] == 1 and not same["distinguishable"]
    with pytest.raises(ValueError):
        compare(plan(a), plan(a[:-1]))


def test_blocked_draws_are_the_one_matrix_draws_whatever_the_block_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Draws are made a block of resamples at a time (memory flat in the number of
    samples); the intervals must be those of one (resamples, clusters) index matrix per
    stratum in name order, the definition, and must not move with the block size."""
    import asyncbench.estimators.intervals as iv

    rng = np.random.default_rng(5)
    scores = {"a": rng.random(37), "b": rng.random(501)}  # odd cluster counts: words split across blocks
    other = {k: np.clip(v + rng.normal(0, 0.2, len(v)), 0, 1) for k, v in scores.items()}

    def plan(values: Mapping[str, Any]) -> Plan:
        return Plan({k: mean_stratum(list(v)) for k, v in values.items()},
                    lambda st: {"overall": (st["a"] + st["b"]) / 2, "a": st["a"]})

    draw = np.random.default_rng(iv.SEED)
    boot = {k: 100 * scores[k][draw.integers(0, len(scores[k]), size=(iv.N_RESAMPLES, len(scores[k])))].mean(axis=1)
            for k in sorted(scores)}
    expected = {"overall": [round(float(x), 2) for x in np.quantile((boot["a"] + boot["b"]) / 2, [0.025, 0.975])]}
    got = intervals(plan(scores))
    assert got["overall"] == pytest.approx(expected["overall"], abs=0.011)

    whole_a, whole_c = intervals(plan(scores)), compare(plan(scores), plan(other))
    for elements in (2, 1000, 3 * 501):  # blocks of 2 rows up to many rows
        monkeypatch.setattr(iv, "BLOCK_ELEMENTS", elements)
        assert intervals(plan(scores)) == whole_a
        assert compare(plan(scores), plan(other)) == whole_c


def test_quantile_is_numpys_bit_for_bit() -> None:
    """intervals.quantile replaces np.quantile (which imports numpy.ma on first use): the
    same float for every kind of bootstrap column, bounds and ties included."""
    import numpy as np

    from asyncbench.estimators.intervals import quantile

    rng = np.random.default_rng(7)
    for trial in range(400):
        n = int(rng.integers(1, 2500))
        kinds = (rng.normal(size=n) * 100, rng.integers(0, 5, size=n) / 3.0, rng.random(n),
                 np.round(rng.random(n) * 100, 2))
        values = kinds[trial % 4]
        ordered = np.sort(values)
        for q in (0.025, 0.975, 0.05, 0.95, 0.5, 0.0, 1.0, 1 / 3):
            assert quantile(ordered, q) == float(np.quantile(values, q))
    assert np.isnan(quantile(np.array([1.0, np.nan]), 0.5))
