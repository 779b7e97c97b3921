"""BAMBOO metrics with the release's answer parsing (RUCAIBox/BAMBOO `evaluate.py` and
`private_eval/execution.py`), re-implemented.

Per dataset (paper Table 2, section 3.4; "any answer with a wrong format is treated as
incorrect"):

- AltQA: accuracy; prediction and answer compared after `strip().strip(".").lower()`.
- PaperQA, MeetingQA: accuracy of the option letter. The release reads only the FIRST
  CHARACTER of the first line ("B. Because..." -> B, "Answer: B" -> A); a first
  character outside a-d is a format error.
- ShowsPred, MeetingPred: accuracy; the first line of the raw prediction (not stripped
  first, so a leading newline makes it empty) equals the speaker after the same
  normalisation as AltQA.
- SenHallu, AbsHallu: precision / recall / F1 of "hypothesis is entailed" (positive class
  True). The prediction is True when "yes" occurs in its first three characters after
  stripping; everything else counts as "No" (the release's rule), and an answer starting
  with neither yes nor no is also counted as a format error.
- ShowsSort, ReportSumSort: concordance index, the fraction of the answer's ordered pairs
  that the predicted order also has. Numbers are read from the text with `\\d+`; when the
  smallest is 1 the prediction is taken as 1-based. A prediction with a different number
  of items than the answer is a format error and scores 0.
- PrivateEval: pass@1. The completion's paraphrased names (monkey, beatnum, arraydata...)
  are mapped back to the originals by plain substring replacement in the keyword file's
  order; a completion that uses an original name which has a paraphrase is a format
  error ("error!" in the release) and fails. The program run is the original problem's
  prompt + completion + test + `check(...)`.

Datasets are averaged as the paper reports them, in percent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...metrics import registry
from ...types import Parsed
from .sandbox import Program, program
from .scores import LevelDiff, LevelReport

DATASETS: tuple[str, ...] = (
    "altqa", "paperqa", "meetingqa", "senhallu", "abshallu",
    "showssort", "reportsumsort", "showspred", "meetingpred", "private_eval",
)  # fmt: skip
LEVELS: tuple[str, ...] = ("4k", "16k")

METRIC: dict[str, str] = {
    "altqa": "accuracy",
    "paperqa": "accuracy",
    "meetingqa": "accuracy",
    "showspred": "accuracy",
    "meetingpred": "accuracy",
    "senhallu": "f1",
    "abshallu": "f1",
    "showssort": "concordance_index",
    "reportsumsort": "concordance_index",
    "private_eval": "pass@1",
}

_IDENTIFIER = re.compile(r"\b[a-zA-Z_][a-zA-Z0-9_]*\b")
_NUMBER = re.compile(r"[+-]?(\d+([.,]\d+)*|\.\d+)")


@dataclass
class Judgement:
    """One prediction as the metric sees it: its per-sample score in [0, 1], whether it
    broke the answer format, and what was parsed out of it (kept for the report)."""

    score: float
    format_error: bool
    parsed: Parsed


def split_task(task: str) -> tuple[str, str]:
    """"paperqa_16k" -> ("paperqa", "16k")."""
    name, _, level = task.rpartition("_")
    if name not in DATASETS or level not in LEVELS:
        raise ValueError(f"not a BAMBOO task: {task!r} (expected <dataset>_<4k|16k>)")
    return name, level


def _normalise(text: str) -> str:
    return text.strip().strip(".").lower()


def altqa(pred: str, answer: object) -> Judgement:
    norm = _normalise(pred)
    ok = norm == _normalise(str(answer))
    return Judgement(float(ok), _NUMBER.fullmatch(norm) is None, norm)


def choice(pred: str, answer: object) -> Judgement:
    first_line = pred.strip().split("\n")[0].strip(" ")
    letter = first_line[:1].upper()
    if letter not in ("A", "B", "C", "D"):
        return Judgement(0.0, True, None)
    return Judgement(float(letter == str(answer).strip()), False, letter)


def speaker(pred: str, answer: object) -> Judgement:
    first = _normalise(pred.split("\n")[0])
    return Judgement(float(first == _normalise(str(answer))), first == "", first)


def hallucination(pred: str, answer: object) -> Judgement:
    head = pred.strip()[:3].lower()
    says_yes = "yes" in head
    well_formed = head.startswith("yes") or head.startswith("no")
    return Judgement(float(says_yes == coerce_bool(answer)), not well_formed, says_yes)


def parse_order(pred: str | Sequence[int]) -> list[int]:
    """The release's parse of a sorting answer: every integer in the text, in order."""
    if isinstance(pred, str):
        return [int(x) for x in re.findall(r"\d+", pred)]
    return [int(x) for x in pred]


def concordance(pred: str | Sequence[int], answer: Sequence[int]) -> Judgement:
    order = parse_order(pred)
    shift = 1 if order and min(order) == 1 else 0
    predicted = {(order[i] - shift, order[j] - shift) for i in range(len(order)) for j in range(i + 1, len(order))}
    gold = {(answer[i], answer[j]) for i in range(len(answer)) for j in range(i + 1, len(answer))}
    if len(order) != len(answer):
        return Judgement(0.0, True, order)
    return Judgement(len(gold & predicted) / len(gold), False, order)


def precision_recall_f1(predicted: Sequence[bool], gold: Sequence[bool]) -> tuple[float, float, float]:
    """Binary P/R/F1 of the positive class; 0 where undefined (scikit-learn's default)."""
    tp = sum(1 for p, g in zip(predicted, gold) if p and g)
    fp = sum(1 for p, g in zip(predicted, gold) if p and not g)
    fn = sum(1 for p, g in zip(predicted, gold) if not p and g)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


# ---------------------------------------------------------------- PrivateEval


def domain_of(task_id: str) -> str:
    """The release's choice of keyword table from the task id."""
    low = task_id.lower()
    if "numpy" in low:
        return "numpy"
    if "pandas" in low:
        return "pandas"
    return "torchdata"


def convert_back(completion: str, keywords: Mapping[str, str]) -> str | None:
    """Paraphrased names -> originals (`keywords` maps original -> paraphrase, in file
    order); None when the completion uses an original name that has a paraphrase, since a
    model that saw only the paraphrased documentation cannot have meant it."""
    paraphrases = set(keywords.values())
    for word in _IDENTIFIER.findall(completion):
        if word in keywords and word not in paraphrases:
            return None
    for original, paraphrase in keywords.items():
        completion = completion.replace(paraphrase, original)
    return completion


def build_program(problem: Mapping[str, Any], completion: str) -> Program:
    """What the release's harness execs as one program (prompt + completion, then the
    test and its check call), split at the trust boundary: the prompt and completion run
    in the sandbox; the checker runs the prompt's set-up itself and takes from the
    sandbox only the names the problem's canonical solution binds or changes, then runs
    the test (see asyncbench/sandbox.py)."""
    entry = str(problem.get("entry_point", "none"))
    reference = problem.get("canonical_solution") or [""]
    return program(str(problem["prompt"]), completion, str(problem["test"]), None if entry == "none" else entry,
                   str(reference[0]))


def private_eval_program(problem: Mapping[str, object], completion: str,
                         keywords: Mapping[str, Mapping[str, str]]) -> Program | None:
    """The program to check for one completion, or None for a format error."""
    converted = convert_back(completion, keywords[domain_of(str(problem["task_id"]))])
    return None if converted is None else build_program(problem, converted)


# ---------------------------------------------------------------- judging and summaries


def judge(dataset: str, pred: str | Sequence[int], answer: object) -> Judgement:
    """Score one prediction of a dataset that needs no code execution."""
    found = _JUDGES.get(dataset)
    if found is None:
        raise ValueError(f"{dataset} is scored by execution (private_eval) or unknown")
    return found(pred, answer)


def summarise(dataset: str, judgements: Iterable[Judgement], gold: Iterable[object] = ()) -> dict[str, float | int]:
    """Dataset-level numbers in percent: the headline `score` (the paper's metric), the
    metric's parts for hallucination detection, and the count of format errors."""
    js = list(judgements)
    n = len(js)
    errors = sum(j.format_error for j in js)
    if dataset in ("senhallu", "abshallu"):
        p, r, f = precision_recall_f1([bool(j.parsed) for j in js], [coerce_bool(g) for g in gold])
        return {"score": 100 * f, "precision": 100 * p, "recall": 100 * r, "f1": 100 * f, "n": n, "format_errors": errors}
    mean = sum(j.score for j in js) / n if n else 0.0
    return {"score": 100 * mean, "n": n, "format_errors": errors}


def level_report(by_task: Mapping[str, float]) -> LevelReport:
    """Average per length level and the 16k - 4k difference. The difference is taken over
    datasets present at both levels (the release has 16k files for only four), so it
    compares like with like."""
    levels: dict[str, list[float]] = {lv: [] for lv in LEVELS}
    by_dataset: dict[str, dict[str, float]] = {}
    for task, value in by_task.items():
        name, level = split_task(task)
        levels[level].append(value)
        by_dataset.setdefault(name, {})[level] = value
    by_length = {lv: round(sum(v) / len(v), 2) for lv, v in levels.items() if v}
    paired = {n: v["16k"] - v["4k"] for n, v in by_dataset.items() if "4k" in v and "16k" in v}
    diff: LevelDiff = {"datasets": {n: round(d, 2) for n, d in sorted(paired.items())},
                       "average": round(sum(paired.values()) / len(paired), 2) if paired else None}
    return {"by_length": by_length, "diff_16k_minus_4k": diff}


def coerce_bool(value: object) -> bool:
    """Hallucination gold labels: JSON true/false, or "True"/"yes" strings from other tools."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise ValueError(f"not a yes/no label: {value!r}")


# Each dataset's judge (private_eval is scored by execution, in the sandbox).
def _ordering(pred: str | Sequence[int], answer: object) -> Judgement:
    """A sorting dataset's judgement; its gold answer is the ordering (a JSON list)."""
    if not isinstance(answer, (list, tuple)):
        raise ValueError(f"not an ordering: {answer!r}")
    return concordance(pred, answer)


# (prediction, the row's answer) -> judgement
_JUDGES: dict[str, Callable[[str | Sequence[int], object], Judgement]] = {
    "altqa": lambda pred, answer: altqa(str(pred), answer),
    "paperqa": lambda pred, answer: choice(str(pred), answer),
    "meetingqa": lambda pred, answer: choice(str(pred), answer),
    "showspred": lambda pred, answer: speaker(str(pred), answer),
    "meetingpred": lambda pred, answer: speaker(str(pred), answer),
    "senhallu": lambda pred, answer: hallucination(str(pred), answer),
    "abshallu": lambda pred, answer: hallucination(str(pred), answer),
    "showssort": _ordering,
    "reportsumsort": _ordering,
}


def metric_name(dataset: str) -> str:
    """The registry's name for a dataset's judge: bamboo_<dataset>."""
    return f"bamboo_{dataset}"


def _registered(dataset: str) -> registry.Judge:
    return lambda prediction, reference, meta: judge(dataset, prediction, reference)


for _dataset in _JUDGES:
    registry.register_judge(metric_name(_dataset), _registered(_dataset))
