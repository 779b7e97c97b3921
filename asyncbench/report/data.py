"""Load stored runs and compute what a report shows: scores as the run recorded them, and
cost, tokens and latency recomputed per task and per endpoint from the per-sample rows.

Scores come from the run's summary (the benchmark's own aggregation, e.g. LongBench's
macro average over categories), never re-averaged here, so a report always agrees with
`run.json`. Money and latency are summed from `results` because the summary only holds
run-wide totals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..percentiles import percentiles
from ..store import Store


@dataclass
class Latency:
    """Percentiles in ms of fresh requests, or of cached ones when nothing was sent (a
    fully cached re-run still shows the latencies that were measured when it was paid)."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    n: int = 0
    source: str = "none"  # "requests" | "cache" | "none"


@dataclass
class TaskStats:
    task: str
    n: int
    n_ok: int
    n_failed: int
    n_cached: int
    score: float | None  # the run's own per-task number (summary.scores.by_task)
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int
    cost_usd: float  # spent: answers that were not served from the cache
    cost_saved_usd: float  # what cached answers would have cost
    cost_per_sample_usd: float | None
    latency: Latency
    latencies_ms: list[float] = field(default_factory=list, repr=False)


@dataclass
class EndpointStats:
    url: str
    served: int
    failed: int
    healthy: bool | None
    latency: Latency  # None-valued when samples cannot be attributed to this endpoint


@dataclass
class RunReport:
    run_id: str
    benchmark: str
    model: str
    status: str
    started_at: float | None
    finished_at: float | None
    summary: dict[str, Any]
    tasks: list[TaskStats]
    endpoints: list[EndpointStats]
    samples: list[dict[str, Any]] = field(repr=False, default_factory=list)

    @property
    def label(self) -> str:
        """Model, the one setting that most often tells two runs of it apart (the input
        cut-off), and the short run id."""
        max_in = (self.summary.get("truncation") or {}).get("max_input_tokens")
        cut = f" <={max_in} tok" if max_in and (self.summary.get("truncation") or {}).get("n_truncated") else ""
        return f"{self.model}{cut} [{self.run_id[:8]}]"

    @property
    def scores(self) -> dict[str, Any]:
        return self.summary.get("scores") or {}


def latency_of(rows: list[dict[str, Any]]) -> tuple[Latency, list[float]]:
    fresh = [r["latency_ms"] for r in rows if r["latency_ms"] is not None and not r["cached"]]
    cached = [r["latency_ms"] for r in rows if r["latency_ms"] is not None and r["cached"]]
    values, source = (fresh, "requests") if fresh else (cached, "cache" if cached else "none")
    return Latency(**percentiles(values), n=len(values), source=source), values


def _task_stats(task: str, rows: list[dict[str, Any]], score: float | None) -> TaskStats:
    spent = sum(r["cost_usd"] or 0.0 for r in rows if r["status"] == "ok" and not r["cached"])
    saved = sum(r["cost_usd"] or 0.0 for r in rows if r["status"] == "ok" and r["cached"])
    n_ok = sum(r["status"] == "ok" for r in rows)
    lat, values = latency_of(rows)
    return TaskStats(
        task=task, n=len(rows), n_ok=n_ok, n_failed=sum(r["status"] == "failed" for r in rows),
        n_cached=sum(bool(r["cached"]) for r in rows), score=score,
        prompt_tokens=sum(r["prompt_tokens"] or 0 for r in rows),
        completion_tokens=sum(r["completion_tokens"] or 0 for r in rows),
        cached_prompt_tokens=sum(r["cached_prompt_tokens"] or 0 for r in rows),
        cost_usd=spent, cost_saved_usd=saved,
        cost_per_sample_usd=(spent + saved) / n_ok if n_ok else None,
        latency=lat, latencies_ms=values,
    )


def _served_by(store: Store, keys: list[str]) -> dict[str, str]:
    if not keys:
        return {}
    rows = store.con.execute("SELECT key, served_by FROM responses WHERE key IN (SELECT unnest($1))",
                             [keys]).fetchall()
    return {k: s for k, s in rows if s}


def _endpoint_stats(store: Store, summary: dict[str, Any], rows: list[dict[str, Any]]) -> list[EndpointStats]:
    """Per-endpoint counts from the summary; latency per endpoint from the responses that
    served each sample. Rows without a request key can only be attributed when the run
    had a single endpoint, so with several the latency is left empty rather than guessed."""
    declared = summary.get("endpoints") or []
    by_url: dict[str, list[dict[str, Any]]] = {}
    rows = [r for r in rows if not r.get("cached")]  # cache hits made no request in this run
    served = _served_by(store, [r["key"] for r in rows if r.get("key")])
    unattributed = [r for r in rows if r["status"] == "ok" and served.get(r.get("key") or "") is None]
    for r in rows:
        url = served.get(r.get("key") or "")
        if url:
            by_url.setdefault(url, []).append(r)
    if unattributed and len(declared) == 1:
        by_url.setdefault(declared[0]["url"], []).extend(unattributed)
    out: list[EndpointStats] = []
    for ep in declared:
        lat, _ = latency_of(by_url.get(ep["url"], []))
        out.append(EndpointStats(ep["url"], int(ep.get("served", 0)), int(ep.get("failed", 0)), ep.get("healthy"), lat))
    return out


def _load_one(store: Store, run: dict[str, Any]) -> RunReport:
    summary = json.loads(run["summary_json"]) if run["summary_json"] else {}
    rows = [r for r in store.results(run["run_id"]) if r["purpose"] == "eval"]
    by_task_score = (summary.get("scores") or {}).get("by_task") or {}
    grouped: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault(r["task"], []).append(r)
    order = list(by_task_score) + sorted(t for t in grouped if t not in by_task_score)
    tasks = [_task_stats(t, grouped[t], by_task_score.get(t)) for t in order if t in grouped]
    return RunReport(
        run_id=run["run_id"], benchmark=run["benchmark"], model=run["model"], status=run["status"],
        started_at=run["started_at"], finished_at=run["finished_at"], summary=summary, tasks=tasks,
        endpoints=_endpoint_stats(store, summary, rows), samples=rows,
    )


def select_runs(stored: list[dict[str, Any]], wanted: list[str], path: Path) -> list[dict[str, Any]]:
    """Runs named by id or unique id prefix, in the order given; with none named, every
    finished run. A run id is a hash of the settings that change results and re-running
    the same command continues the same run, so "every run" is already "the latest of
    each model and setting"."""
    if not wanted:
        done = [r for r in stored if r["summary_json"]]
        if not done:
            raise UserError(f"no finished runs in {path}; run `asyncbench run BENCHMARK --model SPEC` first "
                            f"or pass --cache FILE")
        return done
    picked: list[dict[str, Any]] = []
    for want in wanted:
        matches = [r for r in stored if r["run_id"].startswith(want)]
        if not matches:
            known = ", ".join(r["run_id"] for r in stored[-5:]) or "none"
            raise UserError(f"no run {want!r} in {path} (latest: {known}); `asyncbench report` with no "
                            f"RUN_ID shows the latest run of each model")
        if len(matches) > 1:
            raise UserError(f"run id prefix {want!r} matches {len(matches)} runs in {path}; give more characters")
        if not matches[0]["summary_json"]:
            raise UserError(f"run {matches[0]['run_id']} has no summary yet (still running or interrupted); "
                            f"finish it with `asyncbench run --resume {matches[0]['run_id']}`")
        picked.append(matches[0])
    return picked


def load_runs(cache: str | Path, run_ids: list[str]) -> list[RunReport]:
    path = Path(cache).expanduser()
    if not path.is_file():
        raise UserError(f"no cache file at {path}; run a benchmark first or pass --cache FILE")
    with Store(path) as store:
        chosen = select_runs(store.runs(), run_ids, path)
        return [_load_one(store, run) for run in chosen]
