"""Metrics for a user's own data and for rule-scored synthetic tasks: exact match and
containment under LongBench's QA normalisation, and 100-LongBench's rule scores."""

from __future__ import annotations

import re
import string

_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")


_EN_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD-style normalisation the official LongBench qa_f1_score uses: lowercase, strip
    ASCII punctuation, replace articles by a space, collapse whitespace (in that order)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_EN_PUNCT)).split())


def exact_match(prediction: str, reference: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(reference))


def contains(prediction: str, reference: str) -> float:
    return float(normalize_answer(reference) in normalize_answer(prediction))


def uuid_match(prediction: str, reference: str) -> float:
    """100-LongBench kv_retrieval: the last UUID in the answer is the reference."""
    found = _UUID.findall(prediction)
    return float(bool(found) and found[-1] == reference)


def number_match(prediction: str, reference: str) -> float:
    """100-LongBench counting tasks: the first number in the answer is the reference."""
    number = re.search(r"\d+", prediction)
    return float(number is not None and number.group() == reference)
