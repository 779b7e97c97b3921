"""The report as plain data: leaderboards (runs and published rows × score columns) and
per-run cost and latency. Every output format (terminal table, Markdown, JSON, HTML)
renders this one structure, so they cannot disagree.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..benchmarks.base import SCORE_KINDS
from ..benchmarks.longbench.table import CATEGORIES
from .baselines import Reference, benchmark_family, references_for
from .data import RunReport


@dataclass
class Column:
    key: str  # "overall", "cat:Code", "task:qasper", "len:4-8k", "ls:avg_lc", ...
    label: str


@dataclass
class Row:
    label: str
    kind: str  # "run" | "reference"
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
    comparisons: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_LONGSCORE_LABELS = {"base_ability": "base ability", "avg_score": "avg score (longer)", "avg_lc": "avg LongScore"}


def _scalar(value: Any) -> float | None:
    """A by_length entry is a number (BAMBOO, 100-LongBench) or a LongBench-E summary
    whose `overall` is a number or {en, zh, all}."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, dict):
        return _scalar(value.get("overall", value.get("all")))
    return None


def _pair(value: Any) -> list[float] | None:
    """An interval leaf of run.json's ci95: [lo, hi]."""
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return [float(value[0]), float(value[1])]
    return None


def interval_cells(ci95: dict[str, Any], columns: tuple[str, ...] = SCORE_KINDS) -> dict[str, list[float]]:
    """A run's ci95 tree flattened to the column keys of `score_cells` (the tree has the
    scores' shape)."""
    return {k: v for k, v in score_cells(ci95, columns, _pair).items() if v is not None}


def score_cells(scores: dict[str, Any], columns: tuple[str, ...] = SCORE_KINDS,
                leaf: Callable[[Any], Any] = _scalar) -> dict[str, Any]:
    """Flatten a scores dict into column key -> number, in the order columns appear,
    showing only the kinds of score the benchmark declares (its SCORE_COLUMNS)."""
    cells: dict[str, Any] = {}
    for key in ("overall", "overall_en", "overall_zh", "anchor_average", "anchor_average_en", "anchor_average_zh"):
        if key in columns and key in scores and leaf(scores[key]) is not None:
            cells[key] = leaf(scores[key])
    if "by_length" in columns:
        for length, value in (scores.get("by_length") or {}).items():
            cells[f"len:{length}"] = leaf(value)
    diff = scores.get("diff_16k_minus_4k")
    if "diff_16k_minus_4k" in columns and isinstance(diff, dict) and diff.get("average") is not None:
        cells["diff_16k_minus_4k"] = float(diff["average"])
    if "longscore" in columns:
        for key, value in (scores.get("longscore") or {}).items():
            if key in _LONGSCORE_LABELS and value is not None:
                cells[f"ls:{key}"] = float(value)
    if "by_category" in columns:
        for cat, value in (scores.get("by_category") or {}).items():
            cells[f"cat:{cat}"] = leaf(value)
    if "by_task" in columns:
        for task, value in (scores.get("by_task") or {}).items():
            cells[f"task:{task}"] = leaf(value)
    return cells


def declared_columns(benchmark: str) -> tuple[str, ...]:
    """The score kinds the benchmark of `benchmark` (a run's spec or family) declares."""
    from ..benchmarks import benchmark_classes

    cls = benchmark_classes().get(benchmark_family(benchmark))
    return cls.SCORE_COLUMNS if cls is not None else SCORE_KINDS


def _label(key: str) -> str:
    kind, _, name = key.partition(":")
    if kind == "ls":
        return _LONGSCORE_LABELS[name]
    if kind == "len":
        return f"@{name}"
    if key == "diff_16k_minus_4k":
        return "16k-4k"
    if key.startswith("anchor_average"):
        return key.replace("anchor_average", "anchor average").replace("_", " ")
    return name or key


def _first_number(text: str) -> float:
    if text == "base":  # 100-LongBench's base set comes before every length
        return 0.0
    m = re.search(r"\d+(?:\.\d+)?", text)
    return float(m.group()) if m else float("inf")


def _column_order(keys: list[str], refs: list[Reference], columns: tuple[str, ...]) -> list[str]:
    """Stored summaries have sorted keys, so the papers' order is restored: headline
    columns first, length bins by length (2k < 16k), then categories and tasks in the
    order of the published tables (LongBench's category order without references)."""
    hint: list[str] = []
    for ref in refs:
        hint += [k for k in score_cells(ref.scores, columns) if k not in hint]
        hint += [f"task:{t}" for t in ref.task_order if f"task:{t}" not in hint]
    for cat, datasets in CATEGORIES.items():
        hint.append(f"cat:{cat}")
        hint += [f"task:{d}" for d in datasets] + [f"task:{d}_e" for d in datasets]
    group = {"est": 0, "len": 1, "diff_16k_minus_4k": 2, "ls": 3, "cat": 4, "task": 5}
    rank = {k: i for i, k in enumerate(hint)}

    def sort_key(k: str) -> tuple[Any, ...]:
        kind, _, name = k.partition(":")
        g = group.get(kind if name else k, 0)
        within = _first_number(name) if kind == "len" else rank.get(k, len(rank))
        return (g, within, keys.index(k))

    return sorted(keys, key=sort_key)


ESTIMATE_METHODS = ("irt", "direct", "blend")


def estimate_scores(scores: dict[str, Any]) -> dict[str, Any] | None:
    """A MiniLongBench run's estimate of the full LongBench score, x100 like the papers'
    tables: the headline method's overall, categories and datasets, and every method's
    overall as `estimate_<method>`. None when the run has no estimate."""
    est = scores.get("estimate")
    if not (isinstance(est, dict) and est.get("available")):
        return None
    head = est.get(est["method"]) or {}
    out: dict[str, Any] = {"overall": 100 * est["overall"],
                           "by_category": {c: 100 * v for c, v in (head.get("by_category") or {}).items()},
                           "by_task": {d: 100 * v for d, v in (head.get("by_dataset") or {}).items()}}
    for m in ESTIMATE_METHODS:
        if isinstance(est.get(m), dict):
            out[f"estimate_{m}"] = 100 * est[m]["overall"]
    out["method"] = est["method"]
    return out


def _leaderboard(benchmark: str, runs: list[RunReport], refs: list[Reference],
                 estimated: bool = False) -> Leaderboard:
    """One table of runs and the papers' rows. `estimated`: MiniLongBench runs show their
    estimate of the full LongBench (comparable with the papers' full-benchmark rows),
    every method's overall beside the headline one, which is marked with *."""
    columns = ("overall", "by_category", "by_task") if estimated else declared_columns(benchmark)
    rows = []
    for r in runs:
        if estimated:
            est = estimate_scores(r.scores) or {}
            cells = score_cells(est, ("overall", "by_category", "by_task"))
            cells.update({f"est:{m}": est.get(f"estimate_{m}") for m in ESTIMATE_METHODS if f"estimate_{m}" in est})
            rows.append(Row(r.label, "run", cells, run_id=r.run_id, partial=r.partial or None))
        else:
            rows.append(Row(r.label, "run", score_cells(r.scores, columns), run_id=r.run_id, partial=r.partial or None,
                            partial_cells={f"task:{t.task}": t.partial for t in r.tasks if t.partial},
                            intervals=interval_cells(r.scores.get("ci95") or {}, columns)))
    rows += [Row(ref.name, "reference", score_cells(ref.scores, columns), source=ref.source) for ref in refs]
    # columns: what the runs have (references only fill in)
    keys: list[str] = []
    for row in rows[: len(runs)]:
        keys += [k for k in row.cells if k not in keys]
    keys = _column_order(keys, refs, columns) if keys else ["overall"]
    rows = [r for r in rows if r.kind == "run" or any(r.cells.get(k) is not None for k in keys)]
    cols = [Column(k, _label(k)) for k in keys]
    if estimated:
        methods = {estimate_scores(r.scores).get("method") for r in runs if estimate_scores(r.scores)}  # type: ignore[union-attr]
        head = methods.pop() if len(methods) == 1 else "headline"
        cols = [Column(c.key, f"estimated overall ({head})*" if c.key == "overall" else
                       f"estimated overall ({c.key[4:]})" if c.key.startswith("est:") else f"{c.label} (est.)")
                for c in cols]
    return Leaderboard(benchmark, cols, rows)


def _run_block(run: RunReport) -> dict[str, Any]:
    """A run's figures for the report: the ledger's (the same fields as run.json: complete,
    samples, cost_usd, tokens, by_task, invocations), plus latency, truncation, endpoints
    and the per-task rows the tables show."""
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
        "truncation": s.get("truncation") or {},
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
        if fam == "minilongbench":  # the estimate sits with the papers' full-benchmark rows...
            boards.append(_leaderboard("minilongbench: estimated full LongBench", members, refs, estimated=True))
            refs = []  # ...and the 237-anchor averages apart, never beside them
            fam = "minilongbench: 237-anchor averages (not full-LongBench scores)"
        board = _leaderboard(fam, members, refs)
        boards.append(board)
        order = {c.key[5:]: i for i, c in enumerate(board.columns) if c.key.startswith("task:")}
        for run in members:  # per-task tables and plots follow the leaderboard's (the paper's) order
            run.tasks.sort(key=lambda t: order.get(t.task, len(order)))
    return Report(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), boards, [_run_block(r) for r in runs],
                  _comparisons(groups))


def _comparisons(groups: dict[str, list[RunReport]]) -> list[dict[str, Any]]:
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
