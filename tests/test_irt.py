"""MiniLongBench estimation against the release's data and method (../shared/data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from asyncbench.benchmarks.longbench.table import CATEGORIES
from asyncbench.errors import UserError
from asyncbench.estimators import irt
from asyncbench.estimators import minilongbench as mlb

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"
pytestmark = pytest.mark.skipif(not (DATA / "irt_parameters.json").exists(), reason="../shared/data missing")


@pytest.fixture(scope="module")
def params() -> irt.IrtParams:
    return irt.load_params(DATA)


@pytest.fixture(scope="module")
def table() -> tuple[np.ndarray, list[str]]:
    z = np.load(DATA / "longbench_scores.npz")
    return z["scores"], list(z["models"])


def release_estimate(params: irt.IrtParams, y: np.ndarray) -> dict:
    """The release's notebook, independently: finite-difference BFGS from 0 on the clipped curve."""
    from scipy.optimize import minimize

    a, b = params.disc[params.anchors], params.diff[params.anchors]

    def curve(theta, a, b):
        return 1 / (1 + np.exp(-np.clip(a * theta[None, :] - b[:, None], -30, 30).sum(axis=1)))

    def nll(x):
        p = curve(x, a, b)
        return -np.sum(y * np.log(p + 1e-10) + (1 - y) * np.log(1 - p + 1e-10))

    theta = minimize(nll, np.zeros(a.shape[1]), method="BFGS", options={"gtol": 1e-7}).x
    full = curve(theta, params.disc, params.diff)
    full[params.anchors] = y
    per_ds = [full[s].mean() for s in irt.dataset_slices().values()]
    cats = [np.mean([per_ds[irt.DATASET_NAMES.index(d)] for d in m]) for m in CATEGORIES.values()]
    return {"overall": float(np.mean(cats)), "by_dataset": dict(zip(irt.DATASET_NAMES, per_ds))}


@pytest.mark.parametrize("model", ["llama-30b", "gemma2-2b-hf", "qwen2.5-3b-instruct-hf", "tulu-7B-fp16"])
def test_irt_estimate_equals_release_method(params, table, model):
    scores, models = table
    y = scores[models.index(model), params.anchors]
    ours = mlb.estimate(mlb.Estimator(params), y)["irt"]
    ref = release_estimate(params, y)
    assert abs(ours["overall"] - ref["overall"]) < 1e-6
    for name, value in ref["by_dataset"].items():
        assert abs(ours["by_dataset"][name] - value) < 1e-6, name


def test_example_model_matches_release_notebook_output(params):
    """eval_new_llm_by_pred.ipynb prints these (2 decimals) for the example llama-30b scores."""
    y = json.loads((DATA / "example_reference_scores.json").read_text())["scores_in_sorted_anchor_order"]
    est = mlb.estimate(mlb.Estimator(params), y)["irt"]
    printed = {"narrativeqa": 0.03, "qasper": 0.07, "multifieldqa_en": 0.17, "multifieldqa_zh": 0.08,
               "hotpotqa": 0.06, "2wikimqa": 0.05, "musique": 0.02, "dureader": 0.02, "gov_report": 0.03,
               "qmsum": 0.01, "multi_news": 0.04, "vcsum": 0.0, "trec": 0.47, "triviaqa": 0.71,
               "samsum": 0.21, "lsht": 0.15, "passage_count": 0.0, "passage_retrieval_en": 0.04,
               "passage_retrieval_zh": 0.03, "lcc": 0.64, "repobench-p": 0.58}
    assert {k: round(v, 2) for k, v in est["by_dataset"].items()} == printed
    assert [round(v, 2) for v in est["by_category"].values()] == [0.09, 0.04, 0.02, 0.39, 0.02, 0.61]
    assert round(est["overall"], 2) == 0.20


def test_anchors_kept_and_direct_is_anchor_mean(params, table):
    scores, _ = table
    y = scores[3, params.anchors]
    full = irt.predict_items(params, y)
    assert np.array_equal(full[params.anchors], y)
    direct = mlb.estimate(mlb.Estimator(params), y)["direct"]
    lcc = irt.anchor_datasets(params.anchors) == irt.DATASET_NAMES.index("lcc")
    assert direct["by_dataset"]["lcc"] == pytest.approx(y[lcc].mean())
    assert direct["overall"] == pytest.approx(np.mean(list(direct["by_category"].values())))


def test_mapping_input_equals_list(params, table):
    scores, _ = table
    y = scores[7, params.anchors]
    which = irt.anchor_datasets(params.anchors)
    mapping = {name: y[which == k].tolist() for k, name in enumerate(irt.DATASET_NAMES)}
    assert mlb.estimate(mlb.Estimator(params), mapping)["irt"] == mlb.estimate(mlb.Estimator(params), y.tolist())["irt"]


@pytest.mark.parametrize("bad, message", [
    ([0.5] * 236, "expected 237 anchor scores"),
    ([50.0] * 237, "in [0, 1]"),
    ({"hotpot": [0.1]}, "unknown dataset"),
    ({"lcc": [0.1]}, "anchor scores for"),
])
def test_bad_inputs_are_user_errors(params, bad, message):
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")):
        mlb.estimate(mlb.Estimator(params), bad)


def test_calibration_and_prior_change_the_estimate(params, table):
    scores, _ = table
    y = scores[0, params.anchors]
    plain = irt.estimate_irt(params, y)
    calibrated = irt.IrtParams(params.disc, params.diff, params.anchors, calibration={"qmsum": (0.1, 2.0)})
    got = irt.estimate_irt(calibrated, y)["by_dataset"]
    assert got["qmsum"] == pytest.approx(0.1 + 2.0 * plain["by_dataset"]["qmsum"])
    assert got["lcc"] == pytest.approx(plain["by_dataset"]["lcc"])
    shrunk = irt.IrtParams(params.disc, params.diff, params.anchors, theta_prior=10.0)
    theta_plain = irt.fit_theta(y, params.disc[params.anchors], params.diff[params.anchors])
    theta_prior = irt.fit_theta(y, params.disc[params.anchors], params.diff[params.anchors], shrunk.theta_prior)
    assert np.linalg.norm(theta_prior) < np.linalg.norm(theta_plain)


def test_token_cost(params):
    cost = irt.token_cost(params.anchors, anchor_tokens=[1000] * len(params.anchors))
    assert cost["anchor_samples"] == 237 and cost["full_samples"] == 4750
    assert 0.03 < cost["fraction"] < 0.06  # Table 1: ~5% of samples, similar lengths
    assert cost["anchor_prompt_tokens"] == 237_000
    assert cost["full_prompt_tokens_estimate"] > 15 * cost["anchor_prompt_tokens"]


def test_save_load_roundtrip(params, tmp_path):
    extra = irt.IrtParams(params.disc, params.diff, params.anchors, theta_prior=0.5, calibration={"lcc": (0.0, 1.1)})
    extra.save(tmp_path)
    back = irt.load_params(tmp_path)
    assert np.allclose(back.disc, params.disc) and np.array_equal(back.anchors, params.anchors)
    assert back.theta_prior == 0.5 and back.calibration == {"lcc": (0.0, 1.1)}


def test_load_errors(tmp_path):
    with pytest.raises(UserError, match="irt_parameters.json not found"):
        irt.load_params(tmp_path)
    (tmp_path / "irt_parameters.json").write_text('{"disc": [[1]], "diff": [[0]]}')
    (tmp_path / "anchors.json").write_text('{"anchors": [1]}')
    with pytest.raises(UserError, match="expected disc"):
        irt.load_params(tmp_path)


def test_cli_json_and_errors(tmp_path, capsys):
    from asyncbench.cli import main

    y = json.loads((DATA / "example_reference_scores.json").read_text())["scores_in_sorted_anchor_order"]
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"scores": y}))
    assert main(["estimate", "minilongbench", "--anchor-scores", str(path), "--json", "--params", "release",
                 "--data-dir", str(DATA.parent)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["irt"]) == {"overall", "by_category", "by_dataset"} and out["method"] == "irt"
    assert out["overall"] == out["irt"]["overall"] and "token_cost" in out
    path.write_text("{not json")
    assert main(["estimate", "minilongbench", "--anchor-scores", str(path), "--data-dir", str(DATA.parent)]) == 2
    assert "not valid JSON at line 1" in capsys.readouterr().err


def test_blend_is_the_per_dataset_mean_of_irt_and_direct():
    from asyncbench.estimators.minilongbench import estimate_from_anchor_scores

    data = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    if not (data / "minilongbench").is_dir():
        pytest.skip("../shared/data not available")
    anchors = json.loads((data / "minilongbench" / "anchors.json").read_text())["sorted_anchors"]
    scores = np.load(data / "minilongbench" / "longbench_scores.npz")["scores"][3][anchors]
    out = estimate_from_anchor_scores(scores.tolist(), data_dir=data, method="blend")
    assert out["method"] == "blend" and out["overall"] == out["blend"]["overall"]
    for name, value in out["blend"]["by_dataset"].items():
        assert value == pytest.approx((out["irt"]["by_dataset"][name] + out["direct"]["by_dataset"][name]) / 2)
    assert min(out["irt"]["overall"], out["direct"]["overall"]) <= out["overall"] <= max(
        out["irt"]["overall"], out["direct"]["overall"])


def test_the_release_layout_is_longbench_s_datasets_and_categories() -> None:
    """layout.json (read by the estimators, which import no benchmark) says what LongBench's
    table says: the same categories in the paper's order, every dataset once in the columns."""
    from asyncbench.benchmarks.longbench.table import CATEGORY_OF, NAMES

    assert irt.CATEGORIES == CATEGORIES and list(irt.CATEGORIES) == list(CATEGORIES)
    assert irt.CATEGORY_OF == CATEGORY_OF
    assert sorted(irt.DATASET_NAMES) == sorted(NAMES) == sorted(irt.AVG_LENGTH)
    assert irt.N_ITEMS == 4750
