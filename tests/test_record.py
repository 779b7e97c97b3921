"""Booking a run's samples (run/record.py) and the typed score they carry (types.SampleScore),
against a real DuckDB store: the Recorder writes window by window, an answer this run
produced keeps its status and invocation on a re-run, a row the store holds as it is is
not written again, samples that never became requests are booked excluded with their
reason, and a streamed run keeps only what its aggregate reads of each result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asyncbench.benchmarks.base import BadRow, Loaded
from asyncbench.ledger import RequestEntry
from asyncbench.run import record
from asyncbench.run.record import Recorder, slim
from asyncbench.store import Store
from asyncbench.types import UNSET, RequestSource, Sample, SampleResult, SampleScore, SampleStatus

RUN = "run-1"


def result(sid: str, status: SampleStatus, score: SampleScore | None = None, key: str | None = None,
           meta: dict[str, object] | None = None) -> SampleResult:
    return SampleResult(sample_id=sid, task=sid.split("/")[0], status=status, key=key or f"k-{sid}",
                        prediction=None if score is None else "an answer", score=None if score is None else score.value,
                        meta=dict(meta or {"dataset": sid.split("/")[0]}), references=["ref"], scored=score)


def stored(store: Store, ids: list[str]) -> dict[str, tuple[str | None, int | None, str | None, str | None]]:
    with store.session():
        rows = store.runs.stored_results(RUN, ids)
    return {sid: (r.status, r.invocation, r.error, r.meta_json) for sid, r in rows.items()}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "c.duckdb")
    with s.session():
        s.runs.start_run(RUN, "toy", "sim", {})
    return s


def test_a_window_at_a_time_books_each_sample_with_its_score_fields(store: Store) -> None:
    first = [result("a/0", SampleStatus.ANSWERED, SampleScore(1.0, "A")),
             result("a/1", SampleStatus.FROM_CACHE, SampleScore(0.0, None)),
             result("a/2", SampleStatus.SHARED, SampleScore(0.5))]
    second = [result("b/0", SampleStatus.FAILED), result("b/1", SampleStatus.SKIPPED_BUDGET),
              result("b/2", SampleStatus.FAILED, SampleScore(None, verdict="error: no sandbox",
                                                             error="PrivateEval sandbox: error: no sandbox"))]
    recorder = Recorder(RUN, 1, earlier=False)
    recorder.write(store, first)
    recorder.write(store, second)
    rows = stored(store, [r.sample_id for r in first + second])
    assert {sid: (status, inv) for sid, (status, inv, _, _) in rows.items()} == {
        "a/0": ("answered", 1), "a/1": ("from_cache", 1), "a/2": ("shared", 1),
        "b/0": ("failed", 1), "b/1": ("skipped_budget", 1), "b/2": ("failed", 1)}
    # the sample's meta, then what scoring found, under the keys the per-sample view reads
    assert json.loads(rows["a/0"][3] or "") == {"dataset": "a", "parsed": "A"}
    assert list(json.loads(rows["a/1"][3] or "")) == ["dataset", "parsed"]  # None parsed: kept, as null
    assert json.loads(rows["a/2"][3] or "") == {"dataset": "a"}  # read whole: nothing parsed
    assert json.loads(rows["b/0"][3] or "") == {"dataset": "b"}  # never scored
    assert json.loads(rows["b/2"][3] or "") == {"dataset": "b", "verdict": "error: no sandbox",
                                                "score_error": "PrivateEval sandbox: error: no sandbox"}


def test_a_rerun_keeps_what_the_run_produced_and_settles_what_it_did_not(store: Store) -> None:
    Recorder(RUN, 1, earlier=False).write(store, [
        result("t/0", SampleStatus.ANSWERED, SampleScore(1.0)), result("t/1", SampleStatus.FAILED),
        result("t/2", SampleStatus.FAILED), result("t/3", SampleStatus.SHARED, SampleScore(0.0))])
    # invocation 1 paid t/2's request and died before booking its sample (a journal replayed)
    with store.session():
        store.runs.put_ledger_requests(RUN, [RequestEntry(invocation=1, purpose="eval", task="t",
                                                          source=RequestSource.SENT, key="k-t/2", sample_id="t/2")])
    before = len(store.runs.results(RUN))
    Recorder(RUN, 2, earlier=True).write(store, [
        result("t/0", SampleStatus.FROM_CACHE, SampleScore(1.0)),  # its own answer read back: still answered
        result("t/1", SampleStatus.FROM_CACHE, SampleScore(1.0)),  # another run's answer: from the cache now
        result("t/2", SampleStatus.FROM_CACHE, SampleScore(1.0)),  # paid by invocation 1: answered there
        result("t/3", SampleStatus.FROM_CACHE, SampleScore(0.0))])
    rows = stored(store, ["t/0", "t/1", "t/2", "t/3"])
    assert {sid: (status, inv) for sid, (status, inv, _, _) in rows.items()} == {
        "t/0": ("answered", 1), "t/1": ("from_cache", 2), "t/2": ("answered", 1), "t/3": ("shared", 1)}
    after = len(store.runs.results(RUN))
    assert before == after == 4  # upserts: one row per sample, whatever the invocations


def test_a_row_the_store_holds_as_it_is_is_not_written_again(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    same = [result("t/0", SampleStatus.ANSWERED, SampleScore(1.0)), result("t/1", SampleStatus.FAILED)]
    Recorder(RUN, 1, earlier=False).write(store, same)
    written: list[list[str]] = []
    put = store.runs.put_results
    monkeypatch.setattr(store.runs, "put_results",
                        lambda rows, new=False: (written.append([r.sample_id for r in rows]), put(rows, new))[1])
    # a warm re-run: the same answer and score (read from the cache now), the failure failed again
    again = [result("t/0", SampleStatus.FROM_CACHE, SampleScore(1.0)), result("t/1", SampleStatus.FAILED)]
    Recorder(RUN, 2, earlier=True).write(store, again)
    assert written == [["t/1"]]  # t/0's row says what it said; t/1 is failed in invocation 2 now
    assert stored(store, ["t/1"])["t/1"][1] == 2


def test_samples_that_never_became_requests_are_booked_excluded_with_their_reason(store: Store) -> None:
    loaded = Loaded([Sample(id="t/0", task="t"), Sample(id="t/1", task="t"), Sample(id="u/0", task="u")],
                    {"skipped_rows": [BadRow("u.jsonl", 7, "Expecting value")]})
    kept = [loaded[0]]
    rows = record._unsent_rows(RUN, 1, loaded, kept, record.EXCLUDED_BY_RULE)
    with store.session():
        store.runs.put_results(rows)
    got = stored(store, ["t/1", "u/0", "u/7"])
    assert got["t/1"][:3] == ("excluded", 1, record.EXCLUDED_BY_RULE)
    assert got["u/0"][:3] == ("excluded", 1, record.EXCLUDED_BY_RULE)
    assert got["u/7"][:3] == ("excluded", 1, "malformed data row: u.jsonl line 7: Expecting value")
    assert all(meta == "{}" for *_, meta in got.values())
    with store.session():
        entries = store.runs.sample_entries(RUN, unsettled=True)
    assert sorted(e.sample_id for e in entries) == ["t/1", "u/0", "u/7"]  # listed with the run's exclusions
    assert all(e.status is SampleStatus.EXCLUDED for e in entries)


def test_slim_keeps_only_what_an_aggregate_reads() -> None:
    full = result("t/0", SampleStatus.FROM_CACHE, SampleScore(0.5, "x", ({"prompt": "judge_prompt"},)),
                  meta={"dataset": "t", "length": 4000})
    small, other = slim(full), slim(result("t/1", SampleStatus.FAILED))
    assert (small.sample_id, small.task, small.status, small.score) == ("t/0", "t", SampleStatus.FROM_CACHE, 0.5)
    assert small.prediction is None and small.scored is None and small.key is None
    assert small.meta == {} and small.references == []
    assert small.meta is other.meta and small.references is other.references  # one shared empty pair


def test_a_sample_score_is_stored_in_the_order_it_was_always_written() -> None:
    score = SampleScore(None, "p", ({"prompt": "judge_prompt", "score": 0.5},), "failed: AssertionError", "boom")
    assert list(score.stored_meta()) == ["parsed", "judge", "verdict", "score_error"]
    assert score.failed and not SampleScore(None).failed and not SampleScore(0.0, error="x").failed
    assert SampleScore(1.0).stored_meta() == {} and SampleScore(1.0, None).stored_meta() == {"parsed": None}
    assert SampleScore(1.0).parsed is UNSET
    r = result("t/0", SampleStatus.ANSWERED, score, meta={"dataset": "t", "parsed": "stale"})
    assert r.stored_meta() == {"dataset": "t", "parsed": "p", "judge": [{"prompt": "judge_prompt", "score": 0.5}],
                               "verdict": "failed: AssertionError", "score_error": "boom"}
    assert r.meta == {"dataset": "t", "parsed": "stale"}  # the sample's meta is never written
    with pytest.raises(AttributeError):
        score.value = 1.0  # type: ignore[misc]  # frozen


def test_one_status_vocabulary_whose_strings_are_the_stored_ones() -> None:
    assert [str(s) for s in SampleStatus] == ["answered", "from_cache", "shared", "excluded", "failed",
                                               "skipped_budget"]
    assert json.dumps({SampleStatus.FROM_CACHE: [SampleStatus.SHARED]}) == '{"from_cache": ["shared"]}'
    assert f"{SampleStatus.SKIPPED_BUDGET}" == "skipped_budget" and SampleStatus.ANSWERED == "answered"
    assert {s for s in SampleStatus if s.settled} == {"answered", "from_cache", "shared", "excluded"}
    assert {s for s in SampleStatus if s.has_answer} == {"answered", "from_cache", "shared"}
    assert [s.sample_status() for s in RequestSource] == [SampleStatus.ANSWERED, SampleStatus.FROM_CACHE,
                                                          SampleStatus.SHARED, SampleStatus.FAILED,
                                                          SampleStatus.SKIPPED_BUDGET]
