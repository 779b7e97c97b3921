"""The report as plain data: leaderboards (runs and published rows × score columns) and
per-run cost and latency. Every output format (terminal table, Markdown, JSON, HTML)
renders this one structure, so they cannot disagree.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..benchmarks import score_type
from ..benchmarks.scores import ScoreSet, scalar
from ..json_values import as_object
from .baselines import Reference, benchmark_family, references_for
from .data import RunReport


@dataclass
class Column:
    key: str  # "overall", "cat:Code", "task:qasper", "len:4-8k", "ls:avg_lc", ...
    label: str


@dataclass
class Row:
    label: str
    kind: Literal["run", "reference"]
    cells: dict[str, float | None]
    run_id: str | None = None
    source: str | None = None
    # a run with samples not settled: "partial 25/42" on the row, and per task column
    partial: str | None = None
    partial_cells: dict[str, str] = field(default_factory=dict)
    # the run's 95% bootstrap interval [lo, hi] per cell that has one (run.json's ci95)
    intervals: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class Leaderboard:
    benchmark: str
    columns: list[Column]
    rows: list[Row]


@dataclass
class Report:
    generated_at: str
    leaderboards: list[Leaderboard]
    runs: list[dict[str, Any]] = field(default_factory=list)
    # B - A per score for each benchmark given exactly two runs (report.compare.Comparison)
    comparisons: list[dict[str, object]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def number(value: object) -> float | None:
    """A JSON number as it was read (an int stays an int), else None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _pair(value: object) -> list[float] | None:
    """An interval leaf of run.json's ci95: [lo, hi]."""
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return [float(value[0]), float(value[1])]
    return None


def score_cells(scores: Mapping[str, object], columns: tuple[str, ...] | None = None,
                kind: type[ScoreSet] = ScoreSet) -> dict[str, float | None]:
    """A scores tree as column key -> number, in column order, showing the kinds of score
    `columns` names (default: those the benchmark's score type `kind` declares)."""
    return {k: scalar(v) for k, v in kind.from_json(scores).cells(scalar, columns).items()}  # each a scalar already


def interval_cells(ci95: Mapping[str, object], kind: type[ScoreSet] = ScoreSet) -> dict[str, list[float]]:
    """A run's ci95 tree flattened to the column keys of `score_cells` (the tree has the
    scores' shape)."""
    return {k: v for k, v in kind.from_json(ci95).cells(_pair).items() if isinstance(v, list)}  # _pair: a list or None


def cell_label(key: str, kind: type[ScoreSet]) -> str:
    """A cell's column label: the score type's own, else the key's name ("len:4k" -> "@4k")."""
    own = kind.label(key)
    if own is not None:
        return own
    prefix, _, name = key.partition(":")
    return f"@{name}" if prefix == "len" else name or key


def _first_number(text: str) -> float:
    if text == "base":  # a base set (100-LongBench's) comes before every length
        return 0.0
    m = re.search(r"\d+(?:\.\d+)?", text)
    return float(m.group()) if m else float("inf")


# column groups, left to right: headline scores, length bins, the benchmark's own, categories, tasks
_GROUP = {"est": 0, "len": 1, "cat": 4, "task": 5}


def _group(key: str, kind: type[ScoreSet]) -> int:
    prefix, _, name = key.partition(":")
    if name:
        return _GROUP.get(prefix, 2)
    return 2 if key in kind.OWN_KINDS else 0


def _column_order(keys: list[str], refs: list[Reference], kind: type[ScoreSet], columns: tuple[str, ...]) -> list[str]:
    """Stored summaries have sorted keys, so the papers' order is restored: headline
    columns first, length bins by length (2k < 16k), then categories and tasks in the
    order of the published tables (the score type's order without references)."""
    hint: list[str] = []
    for ref in refs:
        hint += [k for k in score_cells(ref.scores, columns, kind=kind) if k not in hint]
        hint += [f"task:{t}" for t in ref.task_order if f"task:{t}" not in hint]
    hint += kind.column_hint()
    rank = {k: i for i, k in enumerate(hint)}

    def sort_key(k: str) -> tuple[object, ...]:
        prefix, _, name = k.partition(":")
        within = _first_number(name) if prefix == "len" else rank.get(k, len(rank))
        return (_group(k, kind), within, keys.index(k))

    return sorted(keys, key=sort_key)


ESTIMATED_COLUMNS = ("overall", "by_category", "by_task")


def _run_row(r: RunReport, kind: type[ScoreSet], estimated: bool) -> Row:
    """A run's row: its own scores, or (`estimated`) its estimate of another benchmark's."""
    if not estimated:
        return Row(r.label, "run", score_cells(r.scores, kind.COLUMNS, kind=kind), run_id=r.run_id,
                   partial=r.partial or None, partial_cells={f"task:{t.task}": t.partial for t in r.tasks if t.partial},
                   intervals=interval_cells(as_object(r.scores.get("ci95")), kind))
    est = kind.from_json(r.scores).estimate() or {}
    cells = score_cells(est, ESTIMATED_COLUMNS)
    cells.update({f"est:{k[9:]}": scalar(v) for k, v in est.items() if k.startswith("estimate_")})
    return Row(r.label, "run", cells, run_id=r.run_id, partial=r.partial or None)


def _estimated_columns(cols: list[Column], runs: list[RunReport], kind: type[ScoreSet]) -> list[Column]:
    """An estimate board's labels: the headline method's overall marked with *."""
    methods = {est.get("method") for r in runs if (est := kind.from_json(r.scores).estimate())}
    head = methods.pop() if len(methods) == 1 else "headline"
    # the headline method's own column would repeat the starred one (the terminal report
    # once showed "estimated overall (blend)" twice)
    return [Column(c.key, f"estimated overall ({head})*" if c.key == "overall" else
                   f"estimated overall ({c.key[4:]})" if c.key.startswith("est:") else f"{c.label} (est.)")
            for c in cols if c.key != f"est:{head}"]


def _leaderboard(benchmark: str, runs: list[RunReport], refs: list[Reference], kind: type[ScoreSet],
                 estimated: bool = False) -> Leaderboard:
    """One table of runs and the papers' rows. `estimated`: runs show their estimate of
    another benchmark (comparable with the papers' full-benchmark rows), every method's
    overall beside the headline one, which is marked with *."""
    columns = ESTIMATED_COLUMNS if estimated else kind.COLUMNS
    rows = [_run_row(r, kind, estimated) for r in runs]
    rows += [Row(ref.name, "reference", score_cells(ref.scores, columns, kind=kind), source=ref.source)
             for ref in refs]
    # columns: what the runs have (references only fill in)
    keys: list[str] = []
    for row in rows[: len(runs)]:
        keys += [k for k in row.cells if k not in keys]
    keys = _column_order(keys, refs, kind, columns) if keys else ["overall"]
    rows = [r for r in rows if r.kind == "run" or any(r.cells.get(k) is not None for k in keys)]
    cols = [Column(k, cell_label(k, kind)) for k in keys]
    return Leaderboard(benchmark, _estimated_columns(cols, runs, kind) if estimated else cols, rows)


def _run_block(run: RunReport) -> dict[str, object]:
    """A run's figures for the report: the ledger's (the same fields as run.json: complete,
    samples, cost_usd, tokens, by_task, invocations), plus latency, truncation, endpoints,
    the backend (a Ray run's nodes: placement.py) and the per-task rows the tables show."""
    s, ledger = run.summary, run.ledger
    invocations = ledger["invocations"]
    settled = ledger["samples"]["settled"]
    return {
        "run_id": run.run_id, "benchmark": run.benchmark, "model": run.model, "label": run.label,
        "status": run.status, "started_at": s.get("started_at"), "partial": run.partial or None,
        **ledger,
        "this_invocation": invocations[-1] if invocations else None,
        "unpriced": s.get("unpriced") or [],
        "requests": sum(i["requests"] for i in invocations), "retries": sum(i["retries"] for i in invocations),
        "rate_limited": sum(i["rate_limited"] for i in invocations),
        "wall_s": round(sum(i["wall_s"] for i in invocations), 3),
        # what one settled sample cost to produce, every purpose included
        "cost_per_sample_usd": ledger["cost_usd"]["total"] / settled if settled else None,
        "latency_ms": s.get("latency_ms") or {},
        "serving": run.serving,
        "truncation": s.get("truncation") or {},
        "backend": s.get("backend") or {},  # the last invocation's, as run.json has it
        "tasks": [{k: v for k, v in asdict(t).items() if k != "latencies_ms"} for t in run.tasks],
        "endpoints": [asdict(e) for e in run.endpoints],
    }


def build_report(runs: list[RunReport], with_references: bool = True) -> Report:
    """One leaderboard per benchmark family, runs in the order given."""
    groups: dict[str, list[RunReport]] = {}
    for run in runs:
        groups.setdefault(benchmark_family(run.benchmark), []).append(run)
    boards = []
    for fam, members in groups.items():
        refs = references_for(fam) if with_references else []
        kind = score_type(fam)
        title = fam
        if kind.ESTIMATE_BOARD:  # the estimate sits with the papers' full-benchmark rows...
            boards.append(_leaderboard(kind.ESTIMATE_BOARD, members, refs, kind, estimated=True))
            refs = []  # ...and the benchmark's own averages apart, never beside them
            title = kind.OWN_BOARD or fam
        board = _leaderboard(title, members, refs, kind)
        boards.append(board)
        order = {c.key[5:]: i for i, c in enumerate(board.columns) if c.key.startswith("task:")}
        for run in members:  # per-task tables and plots follow the leaderboard's (the paper's) order
            run.tasks.sort(key=lambda t: order.get(t.task, len(order)))
    return Report(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), boards, [_run_block(r) for r in runs],
                  _comparisons(groups))


def _comparisons(groups: dict[str, list[RunReport]]) -> list[dict[str, object]]:
    """The paired comparison of each benchmark given exactly two runs (the second minus
    the first), when they share scored samples."""
    from ..errors import UserError
    from .compare import compare_runs

    out = []
    for members in groups.values():
        if len(members) == 2:
            try:
                out.append(compare_runs(members[0], members[1]).to_dict())
            except UserError:  # no sample in common: nothing to pair
                continue
    return out
