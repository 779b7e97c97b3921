"""LongBench aggregation against the numbers printed in the papers.

Per-dataset scores from LongBench Tables 2-3 (seed 001/003) and LongBench-E Table 9 are fed
in as one row per dataset; the category averages and Overall EN/ZH/All must come out as
the paper prints them (to its 1-decimal rounding).
"""

from __future__ import annotations

import pytest

from asyncbench.benchmarks.longbench.aggregate import CATEGORIES, aggregate_longbench, length_bin
from asyncbench.errors import UserError

ORDER = [d for ds in CATEGORIES.values() for d in ds]  # the papers' column order 1-1 .. 6-2

# LongBench Tables 2-3: per-dataset, then category averages, then EN / ZH / All.
PAPER = {
    "GPT-3.5-Turbo-16k": (
        [23.6, 43.3, 52.3, 61.2, 51.6, 37.7, 26.9, 28.7, 29.5, 23.4, 26.7, 16.0,
         68.0, 91.4, 41.7, 29.2, 4.5, 71.0, 77.5, 54.7, 53.6],
        [45.1, 36.2, 23.9, 57.6, 51.0, 54.1],
        (44.0, 44.5, 44.7),
    ),
    "ChatGLM2-6B-32k": (
        [21.1, 31.5, 46.2, 51.6, 45.1, 34.0, 21.9, 37.6, 32.4, 24.0, 26.5, 16.2,
         62.5, 78.7, 36.3, 27.7, 1.5, 77.0, 64.5, 55.6, 49.9],
        [37.6, 34.7, 24.8, 51.3, 47.7, 52.7],
        (40.9, 41.7, 41.4),
    ),
    "Llama2-7B-chat-4k": (
        [18.7, 19.2, 36.8, 11.9, 25.4, 32.8, 9.4, 5.2, 27.3, 20.8, 25.8, 0.2,
         61.5, 77.8, 40.7, 19.8, 2.1, 9.8, 0.5, 52.4, 43.8],
        [21.7, 18.2, 18.5, 49.9, 4.1, 48.1],
        (31.0, 14.3, 26.8),
    ),
}

# LongBench-E Table 9, GPT-3.5-Turbo-16k: bin -> (13 dataset scores, printed average).
E_DATASETS = ["qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "gov_report", "multi_news",
              "trec", "triviaqa", "samsum", "passage_count", "passage_retrieval_en", "lcc", "repobench-p"]
TABLE9 = {
    "0-4k": ([45.8, 57.4, 64.6, 49.8, 31.3, 26.9, 57.7, 88.1, 38.1, 9.8, 99.0, 58.8, 52.0], 51.5, 2000),
    "4-8k": ([41.1, 43.0, 53.0, 45.1, 29.6, 23.4, 71.7, 91.6, 37.1, 9.5, 90.7, 52.2, 46.9], 47.4, 6000),
    "8k+": ([27.9, 61.8, 50.9, 23.6, 28.4, 22.6, 75.3, 87.4, 40.6, 1.1, 66.7, 47.8, 42.4], 42.4, 12000),
}


def close_at_paper_precision(ours: float, printed: float) -> bool:
    """The paper's inputs and outputs are both rounded to 0.1 (inputs shift an average by
    up to 0.05, output rounding adds 0.05): e.g. ChatGLM2-6B-32k's All is 41.46 from the
    printed per-dataset scores, printed as 41.4."""
    return abs(ours - printed) <= 0.1 + 1e-9


@pytest.mark.parametrize("model", sorted(PAPER))
def test_longbench_tables_2_3(model):
    per_task, cats, (en, zh, all_) = PAPER[model]
    agg = aggregate_longbench([(d, v / 100) for d, v in zip(ORDER, per_task)])
    assert list(agg["by_task"]) == ORDER
    assert agg["by_task"] == pytest.approx(dict(zip(ORDER, per_task)), abs=1e-9)
    assert list(agg["by_category"]) == list(CATEGORIES)
    for ours, printed in zip(agg["by_category"].values(), cats):
        assert close_at_paper_precision(ours, printed), (model, agg["by_category"], cats)
    for key, printed in (("en", en), ("zh", zh), ("all", all_)):
        assert close_at_paper_precision(agg["overall"][key], printed), (model, key, agg["overall"])
    assert "by_length" not in agg


def test_en_zh_definitions_are_not_interchangeable():
    """EN and ZH differ from All exactly as the paper defines them; a plain average of the
    21 datasets (a common mistake) is not the LongBench overall."""
    per_task = PAPER["Llama2-7B-chat-4k"][0]
    agg = aggregate_longbench([(d, v / 100) for d, v in zip(ORDER, per_task)])
    plain = sum(per_task) / len(per_task)
    assert abs(agg["overall"]["all"] - plain) > 0.5
    assert agg["overall"]["en"] - agg["overall"]["zh"] > 15


def test_longbench_e_table_9_by_length():
    rows = []
    for _bin_name, (values, _, length) in TABLE9.items():
        rows += [(f"{d}_e", v / 100, length) for d, v in zip(E_DATASETS, values)]
    agg = aggregate_longbench(rows)
    assert list(agg["by_length"]) == ["0-4k", "4-8k", "8k+"]
    for bin_name, (values, printed, _) in TABLE9.items():
        part = agg["by_length"][bin_name]
        assert part["by_task"] == pytest.approx({f"{d}_e": v for d, v in zip(E_DATASETS, values)}, abs=1e-9)
        assert close_at_paper_precision(part["overall"]["en"], printed), (bin_name, part["overall"])
        assert part["overall"]["zh"] is None  # LongBench-E is English only
        assert part["overall"]["all"] == part["overall"]["en"]
    # The whole-benchmark numbers average the three bins' samples per dataset.
    assert agg["by_task"]["qasper_e"] == pytest.approx((45.8 + 41.1 + 27.9) / 3, abs=0.005)


def test_length_bins_follow_eval_py():
    assert [length_bin(x) for x in (0, 3999, 4000, 7999, 7999.5, 8000, 10**6)] == [
        "0-4k", "0-4k", "4-8k", "4-8k", "4-8k", "8k+", "8k+"]
    agg = aggregate_longbench([("qasper", 1.0, 100), ("qasper", 0.0, None), ("lcc", 0.5, 9000)])
    assert agg["by_task"]["qasper"] == 50.0  # rows without a length still count overall
    assert agg["by_length"]["0-4k"]["by_task"] == {"qasper": 100.0}
    assert set(agg["by_length"]) == {"0-4k", "8k+"}


def test_per_task_mean_and_rounding():
    rows = [("trec", 1.0), ("trec", 0.0), ("trec", 0.0), ("lsht", 0.123456)]
    agg = aggregate_longbench(rows)
    assert agg["by_task"] == {"trec": 33.33, "lsht": 12.35}
    # Few-shot only: EN = trec, ZH = lsht, All = mean of both (unrounded 33.333 and 12.3456)
    assert agg["overall"] == {"en": 33.33, "zh": 12.35, "all": 22.84}
    assert agg["by_category"] == {"Few-shot Learning": 22.84}


def test_code_counts_for_both_languages():
    agg = aggregate_longbench([("lcc", 0.6), ("repobench-p", 0.4), ("vcsum", 0.1), ("trec", 0.2)])
    assert agg["overall"]["en"] == pytest.approx((50.0 + 20.0) / 2)  # Code + Few-shot (trec)
    assert agg["overall"]["zh"] == pytest.approx((50.0 + 10.0) / 2)  # Code + Summarization (vcsum)
    assert agg["overall"]["all"] == pytest.approx(round((50.0 + 10.0 + 20.0) / 3, 2))
    # Code alone gives no language score
    assert aggregate_longbench([("lcc", 0.6)])["overall"] == {"en": None, "zh": None, "all": 60.0}


def test_errors():
    with pytest.raises(UserError, match="unknown LongBench dataset 'hotpot'"):
        aggregate_longbench([("hotpot", 1.0)])
    with pytest.raises(ValueError, match="no rows"):
        aggregate_longbench([])
