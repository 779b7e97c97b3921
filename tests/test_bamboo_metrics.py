"""Hand-checked cases for BAMBOO's metrics and the release's answer parsing."""

from __future__ import annotations

import pytest

from asyncbench.benchmarks.bamboo import metrics as M

KW = {"numpy": "beatnum", "np": "bn", "array": "numset", "sum": "total_count", "all": "total"}


def test_altqa_normalised_exact_match():
    assert M.altqa(" 1964. ", "1964").score == 1.0
    assert M.altqa("1964 AD", "1964").score == 0.0
    assert M.altqa("1964 AD", "1964").format_error  # not a number
    assert not M.altqa("1,200", "1200").format_error and M.altqa("1,200", "1200").score == 0.0


@pytest.mark.parametrize("pred,answer,score,error", [
    ("B", "B", 1.0, False),
    ("b) because", "B", 1.0, False),
    ("\n  C.\nD", "C", 1.0, False),
    ("Answer: B", "B", 0.0, False),  # the release reads the first character only: "A"
    ("The answer is B", "B", 0.0, True),
    ("", "A", 0.0, True),
])
def test_choice_letter(pred, answer, score, error):
    j = M.choice(pred, answer)
    assert (j.score, j.format_error) == (score, error)


def test_speaker_first_line():
    assert M.speaker("Sharon.\nbecause she spoke last", "Sharon").score == 1.0
    assert M.speaker("sharon", "Sharon").score == 1.0
    lead = M.speaker("\nSharon", "Sharon")  # the raw first line is empty
    assert lead.score == 0.0 and lead.format_error
    assert M.speaker("Chance", "Sharon").score == 0.0


def test_hallucination_prf():
    preds = ["Yes.", "yes, entailed", "No.", "No", "Maybe yes", "YES"]
    gold = [True, False, True, False, True, True]
    js = [M.hallucination(p, g) for p, g in zip(preds, gold)]
    assert [j.parsed for j in js] == [True, True, False, False, False, True]
    assert [j.format_error for j in js] == [False, False, False, False, True, False]
    s = M.summarise("senhallu", js, gold)
    # tp=2 (0,5) fp=1 (1) fn=2 (2,4): P=2/3, R=2/4, F1=4/7
    assert s["precision"] == pytest.approx(200 / 3)
    assert s["recall"] == pytest.approx(50.0)
    assert s["f1"] == pytest.approx(400 / 7) and s["score"] == s["f1"]
    assert s["format_errors"] == 1
    assert M.precision_recall_f1([False, False], [True, False]) == (0.0, 0.0, 0.0)


def test_concordance_index():
    answer = [4, 1, 3, 2, 0]
    assert M.concordance("[4] > [1] > [3] > [2] > [0]", answer).score == 1.0
    # 1-based identifiers (ReportSumSort numbers events from 1) are shifted down
    assert M.concordance("[5] > [2] > [4] > [3] > [1]", answer).score == 1.0
    assert M.concordance([0, 2, 3, 1, 4], answer).score == 0.0  # exact reverse: no pair agrees
    # one adjacent swap breaks one of the ten pairs
    assert M.concordance("[1] > [4] > [3] > [2] > [0]", answer).score == pytest.approx(0.9)
    short = M.concordance("[4] > [1] > [3]", answer)
    assert short.format_error and short.score == 0.0
    assert M.concordance("no idea", answer).format_error
    assert M.summarise("showssort", [M.concordance("[1] > [4] > [3] > [2] > [0]", answer), short])["score"] == pytest.approx(45.0)


def test_convert_back_and_program():
    assert M.convert_back("bn.numset([1]).total_count()", KW) == "np.array([1]).sum()"
    assert M.convert_back("np.array([1])", KW) is None  # original names are a format error
    assert M.domain_of("PandasEval/3") == "pandas" and M.domain_of("TorchDataEval/1") == "torchdata"
    problem = {"task_id": "NumpyEval/1", "prompt": "import numpy as np\nc =", "test": "def check():\n    assert c == 3\n", "entry_point": "none"}
    program = M.private_eval_program(problem, " 1 + 2", {"numpy": KW})
    # split at the trust boundary: the model's module, the benchmark's test
    assert program is not None and program.module == "import numpy as np\nc = 1 + 2\n"
    assert (program.test, program.entry_point) == (problem["test"], None)
    # the checker runs the prompt's complete statements and takes only what the reference binds
    problem["canonical_solution"] = [" 1 + 2"]
    assert (M.build_program(problem, "").setup, M.build_program(problem, "").outputs) == ("import numpy as np", ("c",))
    problem["entry_point"] = "f"
    assert M.build_program(problem, "").entry_point == "f"


def test_levels_and_diff():
    rep = M.level_report({"paperqa_4k": 50.0, "paperqa_16k": 40.0, "altqa_4k": 10.0, "showssort_16k": 20.0, "showssort_4k": 30.0})
    assert rep["by_length"] == {"4k": 30.0, "16k": 30.0}
    assert rep["diff_16k_minus_4k"] == {"datasets": {"paperqa": -10.0, "showssort": -10.0}, "average": -10.0}
    with pytest.raises(ValueError):
        M.split_task("paperqa_8k")
