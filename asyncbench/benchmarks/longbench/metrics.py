"""LongBench metrics with exact parity to the official scorer (THUDM/LongBench v1).

The official `metrics.py` + `eval.py` define what every published LongBench, LongBench-E
and MiniLongBench number means, so each metric here reproduces them to the last bit,
quirks included (each quirk is named where it is reproduced). The code is our own and
faster: ROUGE-L uses a bit-parallel LCS instead of the `rouge` package's O(n*m) dict
table, code similarity calls `Levenshtein` directly instead of fuzzywuzzy, and scoring many
predictions fans out over a process pool.

Entry points: `score_one` (one prediction, max over its references, with eval.py's
first-line post-processing) and `score_many` (the same for many, in parallel).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from ...metrics import registry
from ...metrics.simple import normalize_answer  # the official QA normalisation (SQuAD's)

# ---------------------------------------------------------------------------------------
# Normalisation and token F1
# ---------------------------------------------------------------------------------------

_CN_PUNCT = (
    "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿"
    "–—‘’‛“”„‟…‧﹏."
)
_ZH_PUNCT = str.maketrans("", "", string.punctuation + _CN_PUNCT)
_DIGITS = re.compile(r"\d+")


def normalize_zh_answer(text: str) -> str:
    """Official Chinese normalisation: lowercase, strip ASCII + Chinese punctuation, and
    remove all whitespace (Chinese has no word spaces)."""
    return "".join(text.lower().translate(_ZH_PUNCT).split())


def token_f1(prediction: Sequence[str], reference: Sequence[str]) -> float:
    """Bag-of-tokens F1; 0 when nothing overlaps (which also covers empty sides)."""
    same = sum((Counter(prediction) & Counter(reference)).values())
    if same == 0:
        return 0.0
    precision = 1.0 * same / len(prediction)
    recall = 1.0 * same / len(reference)
    return (2 * precision * recall) / (precision + recall)


def qa_f1_score(prediction: str, reference: str) -> float:
    return token_f1(normalize_answer(prediction).split(), normalize_answer(reference).split())


@lru_cache(maxsize=8192)
def _jieba_tokens(text: str) -> tuple[str, ...]:
    """jieba's accurate mode with HMM (jieba.cut's defaults, as the official code calls it).

    Cached because a reference is tokenised once per prediction scored against it, and
    jieba is the slowest step of the Chinese metrics.
    """
    return tuple(_jieba().lcut(text, cut_all=False))


@lru_cache(maxsize=1)
def _jieba() -> Any:
    """Import jieba once per process and silence its dictionary-loading banner."""
    import jieba

    jieba.setLogLevel(60)
    return jieba


def qa_f1_zh_score(prediction: str, reference: str) -> float:
    """F1 over jieba words, each normalised; words that normalise to "" are dropped."""
    pred = [t for t in map(normalize_zh_answer, _jieba_tokens(prediction)) if t]
    ref = [t for t in map(normalize_zh_answer, _jieba_tokens(reference)) if t]
    return token_f1(pred, ref)


# ---------------------------------------------------------------------------------------
# Synthetic tasks, classification, code
# ---------------------------------------------------------------------------------------


def _share_equal(prediction: str, target: str) -> float:
    """Share of the numbers in the prediction that equal `target` (0 if there are none),
    so listing every paragraph number is not rewarded."""
    numbers = _DIGITS.findall(prediction)
    if not numbers:
        return 0.0
    return float(sum(1 for n in numbers if n == target) / len(numbers))


def count_score(prediction: str, reference: str) -> float:
    return _share_equal(prediction, str(reference))


def _paragraph_id(reference: str, pattern: str) -> str:
    found = re.findall(pattern, reference)
    if not found:
        raise ValueError(f"answer {reference!r} does not name a paragraph (expected {pattern!r})")
    return str(found[0])


def retrieval_score(prediction: str, reference: str) -> float:
    return _share_equal(prediction, _paragraph_id(reference, r"Paragraph (\d+)"))


def retrieval_zh_score(prediction: str, reference: str) -> float:
    return _share_equal(prediction, _paragraph_id(reference, r"段落(\d+)"))


def classification_score(prediction: str, reference: str, all_classes: Sequence[str]) -> float:
    """1/k if the reference is among the k class names found in the prediction, else 0.

    Class names that are substrings of the reference (but not the reference) are dropped
    first, so "Other location" is not penalised for also containing "location". The
    official loop drops them while iterating over the same list, so the entry right
    after a dropped one is never examined; we reproduce that.
    """
    matched = [c for c in all_classes if c in prediction]
    i = 0
    while i < len(matched):
        term = matched[i]
        if term in reference and term != reference:
            del matched[i]
        i += 1  # also after a deletion: the entry that slid into slot i is skipped
    return 1.0 / len(matched) if reference in matched else 0.0


def _code_line(prediction: str) -> str:
    """First line without a backtick, '#' or '//' (anywhere in the line), else ""."""
    for line in prediction.lstrip("\n").split("\n"):
        if "`" not in line and "#" not in line and "//" not in line:
            return line
    return ""


def fuzz_ratio(a: str, b: str) -> int:
    """fuzzywuzzy 0.18 `fuzz.ratio` with python-Levenshtein, without fuzzywuzzy: equal
    strings (even two empty ones) give 100, otherwise an empty side gives 0, otherwise
    round(100 * Levenshtein.ratio) with Python's round-half-to-even."""
    if a == b:
        return 100
    if not a or not b:
        return 0
    from Levenshtein import ratio

    return int(round(100 * ratio(a, b)))


def code_sim_score(prediction: str, reference: str) -> float:
    return fuzz_ratio(_code_line(prediction), reference) / 100


# ---------------------------------------------------------------------------------------
# ROUGE-L, bit-identical to `rouge` 1.0.1 (Rouge().get_scores(..., avg=True)["rouge-l"]["f"])
# ---------------------------------------------------------------------------------------

# The rouge package back-traces each LCS recursively, one Python frame per step. Under
# LongBench's eval.py (run as a script, CPython's default recursion limit of 1000) the
# first back-trace frame sits at depth 10 for rouge_score and 11 for rouge_zh_score, so a
# back-trace of more than 991 (990) frames raises RecursionError, which rouge_score's bare
# `except` turns into a score of 0. This hits long single-sentence pairs (Chinese
# summaries have no "." to split on). Published numbers include it, so we reproduce it.
RECON_FRAME_BUDGET = {"rouge": 991, "rouge_zh": 990}


def _sentences(text: str) -> list[list[str]]:
    """rouge's tokenisation: split on ".", drop empty pieces, collapse whitespace, then
    split words on " " (a whitespace-only piece becomes the one-word sentence [""])."""
    return [" ".join(s.split()).split(" ") for s in text.split(".") if s]


def _lcs_words(ref: list[str], hyp: list[str], budget: int) -> tuple[set[str], bool]:
    """Words of the LCS that rouge's `_recon_lcs(ref, hyp)` reconstructs, and whether its
    recursive back-trace stays within `budget` frames.

    The back-trace prefers a match, then "up" only if T[i-1][j] > T[i][j-1], so which of
    several LCSs (and hence which words) it yields depends on the full DP table. We get
    table rows from a bit-parallel LCS (Hyyrö 2004): row i is one integer V_i whose zero
    bits mark where T[i][.] increases, so T[i][j] = j - popcount(V_i & (2^j - 1)).
    """
    cols = len(hyp)
    full = (1 << cols) - 1
    masks: dict[str, int] = {}
    for j, word in enumerate(hyp):
        masks[word] = masks.get(word, 0) | (1 << j)
    rows = [full]
    v = full
    for word in ref:
        u = v & masks.get(word, 0)
        v = ((v + u) | (v - u)) & full
        rows.append(v)

    words: set[str] = set()
    i, j, steps = len(ref), cols, 0
    while i > 0 and j > 0:
        steps += 1
        if ref[i - 1] == hyp[j - 1]:
            words.add(ref[i - 1])
            i -= 1
            j -= 1
            continue
        up = j - (rows[i - 1] & ((1 << j) - 1)).bit_count()
        left = (j - 1) - (rows[i] & ((1 << (j - 1)) - 1)).bit_count()
        if up > left:
            i -= 1
        else:
            j -= 1
    return words, steps + 1 <= budget


def rouge_l_f(prediction: str, reference: str, budget: int = RECON_FRAME_BUDGET["rouge"]) -> float:
    """Summary-level ROUGE-L F of the `rouge` package, 0 where the official call raises.

    rouge 1.0.1 counts *distinct* words: m and n are vocabulary sizes of reference and
    prediction, and the hit count is the size of the union of the word sets of the LCS of
    every (reference sentence, prediction sentence) pair. F = 2PR / (P + R + 1e-8).
    """
    hyp = _sentences(prediction)
    ref = _sentences(reference)
    if not hyp or not ref:  # rouge raises "Hypothesis is empty" / "Collections must ..."
        return 0.0
    hyp_vocab = [set(s) for s in hyp]
    union: set[str] = set()
    for r in ref:
        r_vocab = set(r)
        for h, h_vocab in zip(hyp, hyp_vocab):
            common = r_vocab & h_vocab
            # Skip pairs that cannot add a word and whose back-trace (at most
            # len(r) + len(h) steps; exactly len(h) without a common word) fits the budget.
            longest = len(r) + len(h) if common else len(h)
            if common <= union and longest + 1 <= budget:
                continue
            words, fits = _lcs_words(r, h, budget)
            if not fits:
                return 0.0
            union |= words
    m = len({w for s in ref for w in s})
    n = len({w for s in hyp for w in s})
    llcs = len(union)
    r_lcs = llcs / m
    p_lcs = llcs / n
    return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8))


def rouge_score(prediction: str, reference: str) -> float:
    return rouge_l_f(prediction, reference, RECON_FRAME_BUDGET["rouge"])


def rouge_zh_score(prediction: str, reference: str) -> float:
    """ROUGE-L over jieba words joined by spaces (Chinese has no word boundaries)."""
    return rouge_l_f(
        " ".join(_jieba_tokens(prediction)),
        " ".join(_jieba_tokens(reference)),
        RECON_FRAME_BUDGET["rouge_zh"],
    )


def _classification(prediction: str, reference: object, meta: Mapping[str, object]) -> float:
    classes = meta.get("all_classes") or ()
    if not isinstance(classes, (list, tuple)):
        raise ValueError(f"all_classes must be a list of class names, not {classes!r}")
    return classification_score(prediction, str(reference), [str(c) for c in classes])


# LongBench's metrics in the registry, by eval.py's dataset2metric keys and (aliases) by
# the official functions' names, which `jsonl:` files use.
registry.register("qa_f1", registry.plain(qa_f1_score), "qa_f1_score")
registry.register("qa_f1_zh", registry.plain(qa_f1_zh_score), "qa_f1_zh_score")
registry.register("rouge", registry.plain(rouge_score), "rouge_score")
registry.register("rouge_zh", registry.plain(rouge_zh_score), "rouge_zh_score")
registry.register("classification", _classification, "classification_score")
registry.register("count", registry.plain(count_score), "count_score")
registry.register("retrieval", registry.plain(retrieval_score), "retrieval_score")
registry.register("retrieval_zh", registry.plain(retrieval_zh_score), "retrieval_zh_score")
registry.register("code_sim", registry.plain(code_sim_score), "code_sim_score")
