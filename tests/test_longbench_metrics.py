"""Parity of asyncbench.benchmarks.longbench.metrics with LongBench's official scorer.

`official_score` below re-states THUDM/LongBench v1 `metrics.py` + `eval.py` with the
reference packages (rouge 1.0.1, jieba, fuzzywuzzy + python-Levenshtein), and is called
the way eval.py calls it: as if from eval.py's `scorer` frame under CPython's default
recursion limit, because the rouge package's recursive LCS back-trace can exceed it (see
`RECON_FRAME_BUDGET`). Our scorer must agree with it to |diff| < 1e-9 on real model
outputs and on adversarial inputs (empty, whitespace, leading newlines, casing,
punctuation and article noise, Chinese, code with comment lines).
"""

from __future__ import annotations

import ast
import json
import random
import re
import string
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

jieba = pytest.importorskip("jieba")
fuzz = pytest.importorskip("fuzzywuzzy.fuzz")
Rouge = pytest.importorskip("rouge").Rouge

from asyncbench.benchmarks.longbench import metrics as lb  # noqa: E402
from asyncbench.benchmarks.longbench import score as lbs  # noqa: E402
from asyncbench.benchmarks.longbench import table  # noqa: E402
from asyncbench.errors import UserError  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench"
# The release's order of datasets (and of example_reference_scores.json).
RELEASE_ORDER = ["2wikimqa", "dureader", "gov_report", "hotpotqa", "lcc", "lsht", "multifieldqa_en", "multifieldqa_zh", "multi_news", "musique", "narrativeqa", "passage_count", "passage_retrieval_en", "passage_retrieval_zh", "qasper", "qmsum", "repobench-p", "samsum", "trec", "triviaqa", "vcsum"]
ROUGE_DATASETS = {"dureader", "gov_report", "qmsum", "multi_news", "vcsum", "samsum"}
SLOW_REFERENCE = {"gov_report", "multi_news", "qmsum", "vcsum", "dureader"}  # long summaries

# ---------------------------------------------------------------------------------------
# The official scorer, re-stated (THUDM/LongBench v1 metrics.py / eval.py)
# ---------------------------------------------------------------------------------------
jieba.setLogLevel(60)


def _normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def _normalize_zh_answer(s):
    cn_punctuation = (
        "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿"
        "–—‘’‛“”„‟…‧﹏."
    )
    all_punctuation = set(string.punctuation + cn_punctuation)
    return "".join("".join(ch for ch in s.lower() if ch not in all_punctuation).split())


def _count_score(prediction, ground_truth, **kwargs):
    numbers = re.findall(r"\d+", prediction)
    right = sum(1 for n in numbers if str(n) == str(ground_truth))
    return float(0.0 if len(numbers) == 0 else right / len(numbers))


def _retrieval(pattern):
    def score(prediction, ground_truth, **kwargs):
        gid = re.findall(pattern, ground_truth)[0]
        numbers = re.findall(r"\d+", prediction)
        right = sum(1 for n in numbers if str(n) == str(gid))
        return float(0.0 if len(numbers) == 0 else right / len(numbers))

    return score


def _code_sim_score(prediction, ground_truth, **kwargs):
    all_lines = prediction.lstrip("\n").split("\n")
    prediction = ""
    for line in all_lines:
        if ("`" not in line) and ("#" not in line) and ("//" not in line):
            prediction = line
            break
    return fuzz.ratio(prediction, ground_truth) / 100


def _classification_score(prediction, ground_truth, **kwargs):
    em_match_list = []
    for class_name in kwargs["all_classes"]:
        if class_name in prediction:
            em_match_list.append(class_name)
    for match_term in em_match_list:  # removes while iterating, as the official code does
        if match_term in ground_truth and match_term != ground_truth:
            em_match_list.remove(match_term)
    if ground_truth in em_match_list:
        return 1.0 / len(em_match_list)
    return 0.0


def _rouge_score(prediction, ground_truth, **kwargs):
    try:
        scores = Rouge().get_scores([prediction], [ground_truth], avg=True)
    except Exception:  # official: bare except
        return 0.0
    return scores["rouge-l"]["f"]


def _rouge_zh_score(prediction, ground_truth, **kwargs):
    prediction = " ".join(list(jieba.cut(prediction, cut_all=False)))
    ground_truth = " ".join(list(jieba.cut(ground_truth, cut_all=False)))
    return _rouge_score(prediction, ground_truth)


def _f1(prediction, ground_truth):
    num_same = sum((Counter(prediction) & Counter(ground_truth)).values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction)
    recall = 1.0 * num_same / len(ground_truth)
    return (2 * precision * recall) / (precision + recall)


def _qa_f1_score(prediction, ground_truth, **kwargs):
    return _f1(_normalize_answer(prediction).split(), _normalize_answer(ground_truth).split())


def _qa_f1_zh_score(prediction, ground_truth, **kwargs):
    p = [_normalize_zh_answer(t) for t in jieba.cut(prediction, cut_all=False)]
    g = [_normalize_zh_answer(t) for t in jieba.cut(ground_truth, cut_all=False)]
    return _f1([t for t in p if len(t) > 0], [t for t in g if len(t) > 0])


OFFICIAL_METRIC = {
    "narrativeqa": _qa_f1_score, "qasper": _qa_f1_score, "multifieldqa_en": _qa_f1_score,
    "multifieldqa_zh": _qa_f1_zh_score, "hotpotqa": _qa_f1_score, "2wikimqa": _qa_f1_score,
    "musique": _qa_f1_score, "dureader": _rouge_zh_score, "gov_report": _rouge_score,
    "qmsum": _rouge_score, "multi_news": _rouge_score, "vcsum": _rouge_zh_score,
    "trec": _classification_score, "triviaqa": _qa_f1_score, "samsum": _rouge_score,
    "lsht": _classification_score, "passage_retrieval_en": _retrieval(r"Paragraph (\d+)"),
    "passage_count": _count_score, "passage_retrieval_zh": _retrieval(r"段落(\d+)"),
    "lcc": _code_sim_score, "repobench-p": _code_sim_score,
}


def _official_sample(dataset, prediction, ground_truths, all_classes, first_line):
    """eval.py's `scorer` loop body for one sample."""
    score = 0.0
    if first_line and dataset in ["trec", "triviaqa", "samsum", "lsht"]:
        prediction = prediction.lstrip("\n").split("\n")[0]
    for ground_truth in ground_truths:
        score = max(score, OFFICIAL_METRIC[dataset](prediction, ground_truth, all_classes=all_classes))
    return score


def _frames_left() -> int:
    def dive(n):
        try:
            return dive(n + 1)
        except RecursionError:
            return n

    return dive(1)


def official_score(dataset, prediction, ground_truths, all_classes=None, first_line=True):
    """The official per-sample score, with `_official_sample` standing in for eval.py's
    `scorer` (depth 2 under `python eval.py`, limit 1000): the recursion limit is set so
    that this frame's callees get the 999 frames that module-level code gets there.
    `_frames_left()` counts from one frame deeper than those callees, hence 998."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(old + 998 - _frames_left())
    try:
        return _official_sample(dataset, prediction, ground_truths, all_classes, first_line)
    finally:
        sys.setrecursionlimit(old)


# ---------------------------------------------------------------------------------------
# Test inputs
# ---------------------------------------------------------------------------------------


def load_samples() -> dict[str, list[tuple[str, list[str], list[str] | None]]]:
    """dataset -> [(prediction, answers, all_classes)] from the MiniLongBench release."""
    if not DATA.is_dir():
        pytest.skip(f"reference data not found at {DATA}")
    out = {}
    for ds in RELEASE_ORDER:
        entries = json.loads((DATA / "samples" / f"MiniLongBench_{ds}.json").read_text(encoding="utf-8"))
        rows = []
        for i in range(len(entries)):
            e = entries[str(i)]
            gold = ast.literal_eval(e["gold"]) if isinstance(e["gold"], str) else e["gold"]
            if isinstance(gold, dict):
                rows.append((e["prediction"], gold["answers"], gold["all_classes"]))
            else:
                rows.append((e["prediction"], gold, None))
        out[ds] = rows
    return out


def variants(ds: str, pred: str, answers: list[str], rng: random.Random) -> list[str]:
    """Predictions that exercise each normalisation and post-processing step."""
    gold = answers[0]
    noisy = "".join(c.upper() if rng.random() < 0.3 else c for c in gold)
    out = [
        pred, gold, "", "   ", "\n\n \t", "\n\n" + gold + "\nQuestion: more?",
        f"The answer: {noisy}!!", f"An {gold}, the end.", gold.upper() + " ...",
        "#" + gold + "\n" + gold, "// " + gold + "\n```\n" + gold, "  " + gold + "  \n",
        "。，！" + gold + "？」", pred[: len(pred) // 3], ".", "...", " . . ",
    ]
    if ds in ("passage_retrieval_en", "passage_retrieval_zh", "passage_count"):
        out += ["Paragraph 3, Paragraph 30 and 3", "段落12", "1 2 3 4 5 6 7 8 9 10 " + gold]
    if ds in ("lcc", "repobench-p"):
        out += [f"# comment\n// also\n{gold}", f"```python\n{gold}\n```", gold[:-3] + "xyz"]
    return out


@pytest.fixture(scope="module")
def samples():
    return load_samples()


# ---------------------------------------------------------------------------------------
# Parity tests
# ---------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("ds", RELEASE_ORDER)
def test_parity_with_official_scorer(ds, samples):
    rng = random.Random(ds)
    checked = 0
    for idx, (pred, answers, classes) in enumerate(samples[ds]):
        preds = variants(ds, pred, answers, rng)
        if ds in SLOW_REFERENCE:  # the reference ROUGE is slow: rotate through the variants
            rest = preds[1:]
            preds = [pred] + [rest[(3 * idx + t) % len(rest)] for t in range(3)]
        for p in preds:
            for first in (True, False) if ds in table.FIRST_LINE_DATASETS else (True,):
                ours = lbs.score_one(ds, p, answers, classes, first_line_post=first)
                ref = official_score(ds, p, answers, classes, first_line=first)
                assert abs(ours - ref) < 1e-9, (ds, p[:80], first, ours, ref)
                assert 0.0 <= ours <= 1.0
                checked += 1
    assert checked >= 4 * len(samples[ds])


def test_release_reference_scores(samples):
    """The MiniLongBench release's stored scores match on every non-ROUGE dataset.

    Those scores were computed without eval.py's first-line cut (README of the data), so
    we score with `first_line_post=False`. For the six ROUGE datasets the stored values
    reproduce with no released `rouge` version (51 of their 56 differ; e.g. gov_report's
    first entry is stored as 0.1171, while rouge 1.0.1, as the official rouge_score calls
    it, gives 0.2769), so there we only require parity with the official scorer, which
    `test_parity_with_official_scorer` checks.
    """
    stored = json.loads((DATA / "example_reference_scores.json").read_text())["scores_in_sorted_anchor_order"]
    assert len(stored) == sum(len(samples[ds]) for ds in RELEASE_ORDER) == 237
    k, compared, rouge_diff = 0, 0, 0
    for ds in RELEASE_ORDER:
        for pred, answers, classes in samples[ds]:
            ours = lbs.score_one(ds, pred, answers, classes, first_line_post=False)
            if ds in ROUGE_DATASETS:
                rouge_diff += abs(ours - stored[k]) > 1e-9
            else:
                assert abs(ours - stored[k]) < 1e-9, (ds, k, ours, stored[k])
                compared += 1
            k += 1
    assert compared == 237 - sum(len(samples[ds]) for ds in ROUGE_DATASETS)
    assert rouge_diff > 0  # documents the known discrepancy; if it vanishes, tighten the test


def test_first_line_cut_changes_scores(samples):
    """eval.py's first-line cut matters on real outputs (triviaqa answers then rambles)."""
    diffs = sum(
        lbs.score_one(ds, p, a, c) != lbs.score_one(ds, p, a, c, first_line_post=False)
        for ds in table.FIRST_LINE_DATASETS
        for p, a, c in samples[ds]
    )
    assert diffs > 0


# ---------------------------------------------------------------------------------------
# Metric units and edge cases
# ---------------------------------------------------------------------------------------


def test_rouge_l_matches_rouge_package_on_random_text():
    """Small vocabularies force many LCS ties, so the back-trace's tie-breaking (which
    decides the LCS *words* rouge counts) is exercised; sentences split on '.'."""
    rng = random.Random(7)
    words = ["a", "b", "c", "d", "a.", "b .", "\n", ".", "", "e"]
    for _ in range(3000):
        p = " ".join(rng.choice(words) for _ in range(rng.randint(0, 50)))
        g = " ".join(rng.choice(words) for _ in range(rng.randint(0, 50)))
        assert lb.rouge_score(p, g) == _rouge_score(p, g), (p, g)


def test_rouge_recursion_limit_of_official_scorer():
    """The official ROUGE scores 0 once the LCS back-trace of one sentence pair needs more
    frames than eval.py leaves (991 for rouge_score, 990 for rouge_zh_score). 'a b b ... b'
    against 'a' walks left through every b, so its back-trace has len(words) + 1 frames."""
    for ds, budget in (("gov_report", 991), ("vcsum", 990)):
        for n_words in (budget - 2, budget - 1, budget, budget + 1):
            pred = "a" + " b" * (n_words - 1)
            ours = lbs.score_one(ds, pred, ["a"])
            assert ours == official_score(ds, pred, ["a"]), (ds, n_words)
            assert (ours > 0) == (n_words + 1 <= budget), (ds, n_words, ours)


def test_recursion_budget_matches_a_real_eval_py_run(tmp_path):
    """Run the official re-statement the way `python eval.py` does (module -> scorer ->
    metric, default recursion limit) in a fresh interpreter, to pin RECON_FRAME_BUDGET."""
    script = tmp_path / "eval_like.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_longbench_metrics import OFFICIAL_METRIC

        def scorer(dataset, predictions, answers):  # eval.py's shape; no comprehensions,
            scores = []                             # which are frames of their own in 3.11
            for prediction, ground_truths in zip(predictions, answers):
                score = 0.0
                for ground_truth in ground_truths:
                    score = max(score, OFFICIAL_METRIC[dataset](prediction, ground_truth, all_classes=None))
                scores.append(score)
            return scores

        results = []
        for dataset, prediction in json.loads(sys.argv[1]):
            results.append(scorer(dataset, [prediction], [["a"]])[0])
        print(json.dumps(results))
    """))
    cases = [(ds, "a" + " b" * (n - 1)) for ds in ("qmsum", "dureader") for n in range(985, 995)]
    run = subprocess.run([sys.executable, str(script), json.dumps(cases)], capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    expected = json.loads(run.stdout)
    assert any(v == 0 for v in expected) and any(v > 0 for v in expected)
    assert [lbs.score_one(ds, p, ["a"]) for ds, p in cases] == expected


def test_classification_skips_entry_after_a_removed_one():
    classes = ["location", "Other location", "Other"]
    # "location" and "Other" are substrings of the reference and get removed, but the
    # official loop skips the entry after a removal, so "Other location" survives either way.
    pred = "location, Other location, Other"
    assert lb.classification_score(pred, "Other location", classes) == _classification_score(
        pred, "Other location", all_classes=classes
    )
    tricky = ["ab", "a", "b", "abc"]
    for pred in ("ab a b abc", "a b", "abc", "x", "a", ""):
        for gold in tricky:
            ours = lb.classification_score(pred, gold, tricky)
            assert ours == _classification_score(pred, gold, all_classes=tricky), (pred, gold)
    # "a" follows removed "ab"... the skip leaves "a" in the list: 1/2, not 1/1
    assert lb.classification_score("ab a abc", "abc", ["ab", "a", "abc"]) == 0.5


@pytest.mark.parametrize(
    "a,b",
    [("", ""), ("", "x"), ("x", ""), ("same", "same"), ("kitten", "sitting"), ("ab", "ba"),
     ("a" * 7, "a" * 8), ("x = 1", "x = 2"), ("数据", "数据库"), ("    return x", "return x")],
)
def test_fuzz_ratio_matches_fuzzywuzzy(a, b):
    assert lb.fuzz_ratio(a, b) == fuzz.ratio(a, b)


def test_fuzz_ratio_rounding_matches_fuzzywuzzy_on_random_strings():
    rng = random.Random(3)
    for _ in range(3000):
        a = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 12)))
        b = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 12)))
        assert lb.fuzz_ratio(a, b) == fuzz.ratio(a, b), (a, b)


def test_code_line_rule():
    # the rule is "contains", not "starts with": a line with an inline comment is skipped
    assert lb.code_sim_score("x = 1  # set\ny = 2", "y = 2") == 1.0
    assert lb.code_sim_score("\n\n```\n// c\ny = 2", "y = 2") == 1.0
    assert lb.code_sim_score("# only comments", "y = 2") == 0.0
    assert lb.code_sim_score("", "") == 1.0  # fuzz.ratio's equality check comes first


def test_qa_f1_normalisation():
    assert lb.qa_f1_score("The  Eiffel-Tower!", "eiffeltower") == 1.0
    assert lb.qa_f1_score("an apple", "apple") == 1.0
    assert lb.qa_f1_score("", "apple") == 0.0
    assert lb.qa_f1_zh_score("北京，中国。", "北京中国") == pytest.approx(_qa_f1_zh_score("北京，中国。", "北京中国"))


def test_retrieval_and_count():
    assert lbs.score_one("passage_retrieval_en", "Paragraph 12", ["Paragraph 12"]) == 1.0
    assert lbs.score_one("passage_retrieval_en", "Paragraph 12 or 3", ["Paragraph 12"]) == 0.5
    assert lbs.score_one("passage_retrieval_zh", "段落5", ["段落5"]) == 1.0
    assert lbs.score_one("passage_count", "There are 7 unique paragraphs", ["7"]) == 1.0
    with pytest.raises(ValueError, match="does not name a paragraph"):
        lbs.check_sample("passage_retrieval_en", ["12"], None)


def test_dataset_names():
    assert lbs.base_dataset("qasper_e") == "qasper"
    assert lbs.score_one("triviaqa_e", "\nParis\nQuestion: x", ["Paris"]) == 1.0
    for bad in ("nope", "narrativeqa_e", "qasper_E"):
        with pytest.raises(UserError, match="unknown LongBench dataset"):
            lbs.base_dataset(bad)
    with pytest.raises(ValueError, match="all_classes"):
        lbs.check_sample("trec", ["Date"], None)


def test_score_many_parallel_equals_serial(samples, monkeypatch):
    monkeypatch.setattr(lbs, "MIN_PARALLEL_ITEMS", 0)
    rows = [(ds, p, a, c) for ds in RELEASE_ORDER for p, a, c in samples[ds]]
    args = ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows])
    serial = lbs.score_many(*args, jobs=1)
    assert serial == [lbs.score_one(*r) for r in rows]
    assert lbs.score_many(*args, jobs=3) == serial  # 3 workers, 12 round-robin chunks
    assert lbs.score_many(*args, jobs=2, first_line_post=False) == [
        lbs.score_one(*r, first_line_post=False) for r in rows]
    with pytest.raises(UserError):
        lbs.score_many(["nope"], ["x"], [["y"]], jobs=1)


def test_score_many_with_threads_running_uses_forkserver(monkeypatch):
    """With other threads alive (as under the run engine), workers must not be forked from
    this process; the forkserver path must still give the same scores."""
    import threading

    monkeypatch.setattr(lbs, "MIN_PARALLEL_ITEMS", 0)
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        assert lbs._pool_context().get_start_method() != "fork"
        args = (["qasper", "vcsum", "lcc", "trec"], ["yes", "今天开会。", "x = 1", "Date\nmore"],
                [["yes"], ["今天开会讨论。"], ["x = 2"], ["Date"]], [None, None, None, ["Date", "Other"]])
        assert lbs.score_many(*args, jobs=2) == [lbs.score_one(*r) for r in zip(*args)]
    finally:
        stop.set()
        worker.join()
