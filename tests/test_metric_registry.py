"""The metric registry (asyncbench/metrics/registry.py): every metric by name and alias,
the best score over a sample's references, judged metrics that keep what they parsed, one
clear line for an unknown name, and the benchmark packages' metrics registered at import."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest

import asyncbench.benchmarks  # noqa: F401  registers LongBench's and BAMBOO's metrics
from asyncbench.errors import UserError
from asyncbench.metrics import registry
from asyncbench.types import Parsed


@dataclass(frozen=True)
class Verdict:
    score: float
    parsed: Parsed


@pytest.fixture
def scratch() -> Iterator[None]:
    """Registrations made by a test are undone after it."""
    saved = dict(registry.METRICS), dict(registry.JUDGES), dict(registry.ALIASES)
    yield
    for table, before in zip((registry.METRICS, registry.JUDGES, registry.ALIASES), saved):
        table.clear()
        table.update(before)  # type: ignore[attr-defined]


def test_the_generic_metrics_are_there_by_name() -> None:
    assert registry.score("exact_match", "The Answer.", ["answer"]) == 1.0
    assert registry.score("contains", "I think it is Paris, France", ["paris"]) == 1.0
    assert registry.score("uuid", "first 11111111-2222-3333-4444-555555555555 then "
                                   "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", ["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"]) == 1.0
    assert registry.score("number", "there are 12, not 13", ["13"]) == 0.0


def test_a_score_is_the_best_over_the_references_and_zero_without_any() -> None:
    assert registry.score("exact_match", "b", ["a", "b", "c"]) == 1.0
    assert registry.score("exact_match", "b", []) == 0.0
    assert registry.score("qa_f1", "the cat sat", ["a dog", "cat sat down"]) == pytest.approx(0.8)


def test_an_unknown_name_is_one_line_listing_the_known_ones() -> None:
    with pytest.raises(UserError) as info:
        registry.get("exact-match")
    message = str(info.value)
    assert "\n" not in message and "unknown metric 'exact-match'" in message and "exact_match" in message
    assert ", ".join(registry.names()) in message


def test_a_benchmark_package_registers_its_metrics_under_the_official_names() -> None:
    names = registry.names()
    for name in ("qa_f1", "qa_f1_score", "rouge", "rouge_score", "classification_score", "bamboo_paperqa"):
        assert name in names
    assert registry.get("qa_f1_score") is registry.get("qa_f1")  # an alias is the same metric
    # LongBench's classification reads the sample's metadata: its classes
    meta = {"all_classes": ["Food", "Location"]}
    assert registry.score("classification", "Type: Location", ["Location"], meta) == 1.0
    assert registry.score("classification", "Type: somewhere", ["Location"], meta) == 0.0


def test_registering_a_metric_adds_its_name_and_aliases(scratch: None) -> None:
    def first_word(prediction: str, reference: object, meta: Mapping[str, object]) -> float:
        return float(prediction.split()[:1] == [str(reference)])

    registry.register("first_word", first_word, "first_word_score")
    assert {"first_word", "first_word_score"} <= set(registry.names())
    assert registry.score("first_word_score", "yes, indeed", ["no", "yes,"]) == 1.0


def test_a_judged_metric_keeps_what_it_parsed_and_scores_as_a_plain_one(scratch: None) -> None:
    def letter(prediction: str, reference: object, meta: Mapping[str, object]) -> Verdict:
        parsed = prediction.strip()[:1].upper() or None
        return Verdict(float(parsed == reference), parsed)

    registry.register_judge("letter", letter)
    verdict = registry.judge("letter", " b) the second", "B")
    assert (verdict.score, verdict.parsed) == (1.0, "B")
    assert registry.judge("letter", "", "B").parsed is None
    assert registry.score("letter", "c", ["A", "C"]) == 1.0  # through the plain registry too
    with pytest.raises(UserError, match="'exact_match' is not a judged metric; use one of .*letter"):
        registry.judge("exact_match", "a", "a")


def test_bamboo_s_judges_read_their_dataset_s_answer_format() -> None:
    choice = registry.judge("bamboo_paperqa", "B. because", "B")
    assert (choice.score, choice.parsed) == (1.0, "B")
    assert registry.judge("bamboo_paperqa", "none of them", "B").parsed is None  # a format error
    assert registry.judge("bamboo_senhallu", "Yes, it is.", True).parsed is True
    order = registry.judge("bamboo_showssort", "[2] > [1] > [3]", [1, 0, 2])
    assert order.parsed == [2, 1, 3] and order.score == 1.0
