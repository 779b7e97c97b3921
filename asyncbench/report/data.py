"""Load stored runs and compute what a report shows: scores as the run recorded them, and
every count, token and dollar from the run's ledger rows through `ledger.account` — the
function run.json's figures come from — so a report agrees with run.json and its columns
add up to their totals.

Scores come from the run's summary (the benchmark's own aggregation, e.g. LongBench's
macro average over categories), never re-averaged here. Latency percentiles come from
the per-sample rows.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..errors import UserError
from ..json_values import as_int, as_list, as_object
from ..ledger import SAMPLE_STATUSES, SETTLED, Account, Produced, TaskFigures, account, partial_label
from ..percentiles import percentiles
from ..serving import Point, points
from ..store import Store
from ..store.rows import ResultRow, RunRow


@dataclass
class Latency:
    """Percentiles in ms of fresh requests, or of cached ones when nothing was sent (a
    fully cached re-run still shows the latencies that were measured when it was paid)."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    n: int = 0
    source: Literal["requests", "cache", "none"] = "none"


@dataclass
class TaskStats:
    task: str
    n: int
    statuses: dict[str, int]  # ledger.SAMPLE_STATUSES -> count
    settled: int
    partial: str  # "partial 3/5" or ""
    score: float | None  # the run's own per-task number (summary.scores.by_task)
    prompt_tokens: int
    completion_tokens: int
    cost_usd: dict[str, float]  # to produce the run, by purpose and "total"
    cost_per_sample_usd: float | None  # total / settled samples
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
    summary: dict[str, object]
    ledger: Account  # ledger.account of the run's rows
    tasks: list[TaskStats]
    endpoints: list[EndpointStats]
    samples: list[ResultRow] = field(repr=False, default_factory=list)
    produced: Produced = field(default_factory=Produced)  # what its answers cost to produce (leaderboard)
    cache: Path | None = field(default=None, repr=False)  # the file the run is stored in
    # (prompt tokens, TTFT ms, TPOT ms) of each answer the run sent live (serving.py), for
    # the prefill curve
    points: list[Point] = field(default_factory=list, repr=False)

    @property
    def serving(self) -> dict[str, object]:
        """run.json's serving block ({} for a run from before it was kept)."""
        return as_object(self.summary.get("serving"))

    @property
    def label(self) -> str:
        """Model, the one setting that most often tells two runs of it apart (the input
        cut-off), and the short run id."""
        truncation = as_object(self.summary.get("truncation"))
        max_in = truncation.get("max_input_tokens")
        cut = f" <={max_in} tok" if max_in and truncation.get("n_truncated") else ""
        return f"{self.model}{cut} [{self.run_id[:8]}]"

    @property
    def scores(self) -> dict[str, object]:
        return as_object(self.summary.get("scores"))

    @property
    def partial(self) -> str:
        return partial_label(self.ledger["samples"])


def latency_of(rows: list[ResultRow]) -> tuple[Latency, list[float]]:
    fresh = [r.latency_ms for r in rows if r.latency_ms is not None and r.status == "answered"]
    cached = [r.latency_ms for r in rows if r.latency_ms is not None and r.status != "answered"]
    source: Literal["requests", "cache", "none"] = "requests" if fresh else "cache" if cached else "none"
    values = fresh or cached
    return Latency(**percentiles(values), n=len(values), source=source), values


def _task_stats(task: str, block: TaskFigures, rows: list[ResultRow], score: float | None) -> TaskStats:
    lat, values = latency_of(rows)
    total = block["cost_usd"]["total"]
    return TaskStats(
        task=task, n=block["n"], statuses={s: n for s, n in block.items() if s in SAMPLE_STATUSES and isinstance(n, int)}, settled=block["settled"],
        partial=partial_label(block), score=score, prompt_tokens=block["tokens"]["prompt_tokens"],
        completion_tokens=block["tokens"]["completion_tokens"], cost_usd=block["cost_usd"],
        cost_per_sample_usd=total / block["settled"] if block["settled"] else None,
        latency=lat, latencies_ms=values,
    )


def _endpoint_stats(store: Store, run_id: str, summary: dict[str, object], rows: list[ResultRow]) -> list[EndpointStats]:
    """Per endpoint, the answers it served the run over every invocation (the ledger's
    sent rows: the last invocation's count read "served 0" beside 237 requests for a run
    whose re-run came from the cache); failed over every finished invocation (the
    summaries' `failed_in_run`), healthy as the last invocation left it. Latency per endpoint from the responses that
    served each sample. Rows without a request key can only be attributed when the run
    had a single endpoint, so with several the latency is left empty rather than guessed."""
    declared = [as_object(ep) for ep in as_list(summary.get("endpoints"))]
    answered = store.runs.served_by_endpoint(run_id)
    by_url: dict[str, list[ResultRow]] = {}
    rows = [r for r in rows if r.status == "answered"]  # the samples this run sent
    served = store.cache.served_by([r.key for r in rows if r.key])
    unattributed = [r for r in rows if served.get(r.key or "") is None]
    for r in rows:
        url = served.get(r.key or "")
        if url:
            by_url.setdefault(url, []).append(r)
    if unattributed and len(declared) == 1:
        by_url.setdefault(str(declared[0]["url"]), []).extend(unattributed)
    out: list[EndpointStats] = []
    for ep in declared:
        url = str(ep["url"])
        lat, _ = latency_of(by_url.get(url, []))
        failed = ep.get("failed_in_run", ep.get("failed", 0))  # older summaries: the last invocation's
        healthy = ep.get("healthy")
        out.append(EndpointStats(url, answered.get(url, 0), as_int(failed) or 0,
                                 healthy if isinstance(healthy, bool) else None, lat))
    return out


def _load_one(store: Store, run: RunRow, samples: bool = True) -> RunReport:
    summary = json.loads(run.summary_json) if run.summary_json else {}
    rows = [r for r in store.runs.results(run.run_id) if r.purpose == "eval"] if samples else []
    ledger = account(store.runs.ledger(run.run_id))
    by_task_score = (summary.get("scores") or {}).get("by_task") or {}
    grouped: dict[str, list[ResultRow]] = {}
    for r in rows:
        if r.status in SETTLED:
            grouped.setdefault(r.task, []).append(r)
    blocks = ledger["by_task"]
    order = list(by_task_score) + sorted(t for t in blocks if t not in by_task_score)
    tasks = [_task_stats(t, blocks[t], grouped.get(t, []), by_task_score.get(t)) for t in order if t in blocks]
    return RunReport(
        run_id=run.run_id, benchmark=run.benchmark, model=run.model, status=run.status,
        started_at=run.started_at, finished_at=run.finished_at, summary=summary, ledger=ledger, tasks=tasks,
        endpoints=_endpoint_stats(store, run.run_id, summary, rows), samples=rows, produced=store.runs.produced(run.run_id),
        points=points(store.runs.measured(run.run_id)) if samples else [],
    )


def select_runs(stored: list[tuple[RunRow, Path]], wanted: list[str], where: str,
                unfinished: bool = False) -> list[tuple[RunRow, Path]]:
    """Runs named by id or unique id prefix, in the order given; with none named, every
    finished run. A run id is a hash of the settings that change results and re-running
    the same command continues the same run, so "every run" is already "the latest of
    each model and setting". `stored` may come from several cache files (a run found in
    two, e.g. a copy, counts once: the first file's), each with its file. `unfinished`:
    a named run with no summary yet is taken too (the leaderboard marks it partial)."""
    unique: dict[str, tuple[RunRow, Path]] = {}
    for r in stored:
        unique.setdefault(r[0].run_id, r)
    stored = list(unique.values())
    if not wanted:
        done = [r for r in stored if r[0].summary_json]
        if not done:
            raise UserError(f"no finished runs in {where}; run `asyncbench run BENCHMARK --model SPEC` first "
                            f"or pass --cache FILE")
        return done
    picked: list[tuple[RunRow, Path]] = []
    for want in wanted:
        matches = [r for r in stored if r[0].run_id.startswith(want)]
        if not matches:
            known = ", ".join(r.run_id for r, _ in stored[-5:]) or "none"
            raise UserError(f"no run {want!r} in {where} (latest: {known}); `asyncbench report` with no "
                            f"RUN_ID shows the latest run of each model")
        if len(matches) > 1:
            raise UserError(f"run id prefix {want!r} matches {len(matches)} runs in {where}; give more characters")
        run = matches[0][0]
        if not run.summary_json and not unfinished:
            raise UserError(f"run {run.run_id} has no summary yet (still running or interrupted); "
                            f"finish it with `asyncbench run --resume {run.run_id}`")
        picked.append(matches[0])
    return picked


def load_runs(cache: str | Path | Sequence[str | Path], run_ids: list[str], unfinished: bool = False,
              samples: bool = True) -> list[RunReport]:
    """Runs from one cache file or several (teams that run models on different machines
    report them together); each file is read in one session, other processes wait.
    `unfinished`: named runs with no summary yet are loaded too (see `select_runs`).
    `samples=False`: without their sample rows (nor the latencies read from them), for a
    caller that reads what it needs of them itself (`compare`: memory flat in their number)."""
    paths = [Path(c).expanduser() for c in ([cache] if isinstance(cache, (str, Path)) else cache)]
    for path in paths:
        if not path.is_file():
            raise UserError(f"no cache file at {path}; run a benchmark first or pass --cache FILE")
    stored: list[tuple[RunRow, Path]] = []
    for path in paths:
        stored += [(r, path) for r in Store(path).runs.runs()]
    where = str(paths[0]) if len(paths) == 1 else f"{len(paths)} cache files ({', '.join(map(str, paths))})"
    chosen = select_runs(stored, run_ids, where, unfinished)
    loaded: list[RunReport] = []
    for path in paths:
        mine = [r for r, cache in chosen if cache == path]
        if mine:
            store = Store(path)
            with store.session():  # one consistent read; writers wait meanwhile
                loaded += [dataclasses.replace(_load_one(store, run, samples), cache=path) for run in mine]
    order = {r.run_id: i for i, (r, _) in enumerate(chosen)}
    return sorted(loaded, key=lambda r: order[r.run_id])
