"""What the viewer's pages show, read from the store as JSON-ready values: the runs, one
run's figures (live while it runs), a page of its samples, two runs side by side.

Every value is what the store's named methods return (no SQL here); run.json text is
stored redacted, so nothing read here can hold a key. Reads are short sessions: a
running evaluation lets go of the file when asked (store/connection.py) and takes it
back after, so the viewer never holds a lock a run waits on for long.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from ..json_values import as_list, as_object
from ..report.samples import load_page, natural_key
from ..store import Store
from ..store.runs import SamplePage

PAGE_MAX = 500  # samples on one page at most


def _headline(summary: dict[str, object]) -> tuple[float | None, list[float] | None]:
    """A run's overall score and its 95% interval, where it has them."""
    scores = as_object(summary.get("scores"))
    value = scores.get("overall")
    if isinstance(value, dict):  # an overall per category set: its first number
        value = next((v for v in value.values() if isinstance(v, (int, float))), None)
    ci = as_object(scores.get("ci95")).get("overall")
    interval = [float(x) for x in ci] if isinstance(ci, list) and len(ci) == 2 and None not in ci else None
    return (float(value) if isinstance(value, (int, float)) else None), interval


def runs(store: Store) -> list[dict[str, object]]:
    """Every run, newest first: what the runs table shows."""
    out = []
    with store.session():
        for row in reversed(store.runs.runs()):
            summary = as_object(json.loads(row.summary_json)) if row.summary_json else {}
            score, interval = _headline(summary)
            cost = as_object(summary.get("cost_usd")).get("total")
            if cost is None:  # running, never finished an invocation: what the ledger holds
                cost = store.runs.progress(row.run_id)["usd"]
            out.append({"run_id": row.run_id, "benchmark": row.benchmark, "model": row.model, "status": row.status,
                        "started_at": row.started_at, "finished_at": row.finished_at, "score": score,
                        "ci95": interval, "partial": summary.get("partial"), "cost_usd": cost,
                        "latency_ms": summary.get("latency_ms"), "invocations": len(as_list(summary.get("invocations")))})
    return out


def run(store: Store, wanted: str) -> dict[str, object]:
    """One run: its row, run.json as stored (None until an invocation ends), its tasks and
    what its ledger holds so far (live while it runs)."""
    with store.session():
        run_id = store.runs.find_run(wanted)
        row = store.runs.run(run_id)
        return {"run_id": run_id, "benchmark": row.benchmark, "model": row.model, "status": row.status,
                "started_at": row.started_at, "finished_at": row.finished_at,
                "summary": json.loads(row.summary_json) if row.summary_json else None,
                "tasks": store.runs.tasks(run_id), "live": store.runs.progress(run_id)}


def samples(store: Store, wanted: str, task: str | None, page: SamplePage) -> dict[str, object]:
    """One page of a run's samples (at most PAGE_MAX), with how many the filters select."""
    page = SamplePage(max(0, page.offset), min(max(1, page.limit), PAGE_MAX), page.status or None,
                      page.search or None)
    with store.session():
        run_id = store.runs.find_run(wanted)
        records, total = load_page(store, run_id, task, page)
    return {"run_id": run_id, "total": total, "offset": page.offset, "limit": page.limit,
            "samples": [asdict(r) for r in records]}


def side_by_side(store: Store, first: str, second: str, offset: int, limit: int) -> dict[str, object]:
    """Two runs on the samples both scored: those whose scores differ first (largest
    difference first), then the rest, each by task and id."""
    with store.session():
        a, b = store.runs.find_run(first), store.runs.find_run(second)
        left = {(t, i): (sc, pr) for t, i, sc, pr, _ in store.runs.scored(a)}
        right = {(t, i): (sc, pr) for t, i, sc, pr, _ in store.runs.scored(b)}
    shared = sorted(left.keys() & right.keys(),
                    key=lambda k: (-abs(left[k][0] - right[k][0]), k[0], natural_key(k[1])))
    limit = min(max(1, limit), PAGE_MAX)
    rows = [{"task": t, "sample_id": i, "score_a": left[(t, i)][0], "score_b": right[(t, i)][0],
             "prediction_a": left[(t, i)][1], "prediction_b": right[(t, i)][1]}
            for t, i in shared[max(0, offset):max(0, offset) + limit]]
    differ = sum(1 for k in shared if left[k][0] != right[k][0])
    return {"a": a, "b": b, "shared": len(shared), "differ": differ, "offset": offset, "limit": limit, "rows": rows}
