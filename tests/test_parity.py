"""Refactors keep behaviour: three simulator runs give the recorded scores and cache
contents (see benchmarks/parity.py for what is hashed and how to re-record)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from parity import RECORDED, RUNS, fingerprint  # noqa: E402

pytestmark = pytest.mark.skipif(not (REPO.parent / "shared" / "data" / "bamboo").is_dir(),
                                reason="../shared/data is not beside the checkout")


@pytest.mark.parametrize("name", list(RUNS))
def test_scores_and_cache_contents_equal_the_recorded_fingerprint(name: str) -> None:
    recorded = json.loads(RECORDED.read_text())[name]
    assert fingerprint(REPO, name) == recorded
