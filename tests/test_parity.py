"""Refactors keep behaviour: three simulator runs give the recorded scores and cache
contents (see bench/parity.py for what is hashed and how to re-record)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from parity import RECORDED, RUNS, differences, fingerprint  # noqa: E402

pytestmark = pytest.mark.skipif(not (REPO.parent / "shared" / "data" / "bamboo").is_dir(),
                                reason="../shared/data is not beside the checkout")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RUNS))
def test_scores_and_cache_contents_equal_the_recorded_fingerprint(name: str) -> None:
    recorded = json.loads(RECORDED.read_text())[name]
    found = fingerprint(REPO, name)
    assert differences(found.pop("scores"), recorded.pop("scores")) == []
    assert found == recorded


def test_the_score_comparison_tolerates_the_last_digits_only() -> None:
    recorded = {"overall": 0.15047164137991084, "by_task": {"trec": 0.0, "lcc": 40.96}, "n": 237}
    assert differences({"overall": 0.15047164137991084 * (1 + 3e-7), "by_task": {"trec": 1e-12, "lcc": 40.96},
                        "n": 237}, recorded) == []
    assert differences({"overall": 0.1505, "by_task": {"trec": 0.0, "lcc": 40.96}, "n": 237}, recorded) \
        == ["scores.overall: 0.1505, recorded 0.15047164137991084"]
    assert differences({"overall": 0.15047164137991084, "by_task": {"trec": 0.0}, "n": 236}, recorded) \
        == ["scores.by_task.lcc: missing", "scores.n: 236, recorded 237"]
