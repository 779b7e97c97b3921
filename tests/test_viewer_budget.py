"""The HTML sample viewer stays a mailable file: every sample is in it, long texts are cut
to one report-wide byte budget (head and tail, or left out), and a small run is whole."""

from __future__ import annotations

import json
import random
import re

from asyncbench.report.samples import SampleRecord
from asyncbench.report.viewer import CUT, FIELDS, LEFT_OUT, SAMPLE_BUDGET, _fit, sample_viewer

WORDS = ["the", "of", "and", "a", "to", "in", "is", "was", "he", "for", "it", "with", "as", "his", "on", "river", "city", "report", "court", "vote", "北京", "上海"]


def records(n: int, seed: int = 0) -> list[SampleRecord]:
    rng = random.Random(seed)
    text = " ".join(rng.choice(WORDS) for _ in range(3000))
    out = []
    for i in range(n):
        task = f"task{i % 8}"
        start = rng.randint(0, 3000)
        prompt = text[start:start + rng.randint(500, 6000)]
        out.append(SampleRecord("run1", f"{task}/{i // 8}", task, "answered", rng.random(), f"answer {rng.random()}",
                                None, [f"reference {i}"], prompt, None, 700, 6, 8.1e-05, 0.0, 74.9, 1, 0, None, "k"))
    return out


def data_of(html: str) -> dict:
    found = re.search(r'<script type="application/json" id="samples-data-run1">(.*?)</script>', html, re.DOTALL)
    assert found
    return json.loads(found.group(1))


def test_twenty_thousand_samples_fit_the_budget_and_all_are_there() -> None:
    recs = records(20_000)
    assert sum(len((r.prompt or "").encode()) for r in recs) > 5 * SAMPLE_BUDGET  # would not fit whole
    html = sample_viewer("run1", "sim", recs)
    assert len(html.encode()) <= SAMPLE_BUDGET * 1.1 < 3_000_000
    data = data_of(html)
    rows = [dict(zip(FIELDS, row)) for row in data["rows"]]
    assert [r["sample_id"] for r in rows] == [r.sample_id for r in recs]
    assert {data["tasks"][r["task"]] for r in rows} == {f"task{k}" for k in range(8)}
    assert all(r.get("prompt_cut") in (CUT, LEFT_OUT) for r in rows if len(r.get("prompt") or "") > 0)
    assert all(r["prediction"] == rec.prediction for r, rec in zip(rows, recs))  # short texts stay whole


def test_a_small_run_is_whole() -> None:
    recs = records(20)
    rows = [dict(zip(FIELDS, row)) for row in data_of(sample_viewer("run1", "sim", recs))["rows"]]
    assert [r["prompt"] for r in rows] == [r.prompt for r in recs] and not any(r.get("prompt_cut") for r in rows)


def test_fit_is_the_largest_cap_under_the_budget() -> None:
    rng = random.Random(1)
    for _ in range(100):
        lengths = [rng.randint(0, 3000) for _ in range(rng.randint(1, 30))]
        budget = rng.randint(0, sum(lengths) + 10)
        cap = _fit(lengths, budget)
        if cap is None:
            assert sum(lengths) <= budget
            continue
        best = max(c for c in range(max(lengths) + 1) if sum(min(n, c) for n in lengths) <= budget)
        assert cap == (best if best >= 200 else 0)
