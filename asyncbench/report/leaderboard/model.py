"""One leaderboard for several models: per benchmark, the models ranked by the benchmark's
headline score with its 95% interval, which of them the data can tell apart, the papers'
published rows beside them, and what each model cost and how fast it answered.

Every number is one the rest of the report already computes, never a new estimate:
- a model's score and interval are its run's own (run.json's `scores` and `scores.ci95`,
  the benchmark's aggregation and resampling plan); the headline is the score the
  benchmark's paired comparison uses (`ScoreSet.compared_key("overall")`: "overall",
  or MiniLongBench's anchor average, whose estimate of full LongBench is a column of
  its own beside the papers' rows, as the report keeps them);
- a pair of models is compared with `report.compare.compare_runs` (the paired bootstrap
  on the samples both scored, the same numbers `asyncbench compare` prints); a pair
  whose interval covers 0 is "not distinguishable";
- cost, tokens and latency are the run's ledger figures and run.json's latency
  percentiles, as the report's cost table shows them.

Ranking. Models are ordered by headline score. A model's rank is 1 + the number of
models that are *distinguishably* better than it (paired interval above 0): models the
data cannot separate share a rank, a tie group ("2=" when shared), as LMSYS's arena
ranks. Only complete runs are ranked. A partial run (samples failed or not run, a run
not finished, or still running) is listed below every complete one, ordered by its score
among the partial ones, marked with what is missing and without a rank: its score
covers other samples than the complete runs', so it is never ranked as if complete.
Its paired comparisons are still shown, on the samples both scored.

Besides the headline, every other score the benchmark reports (length bins, LongScore,
categories, tasks: the report's columns, `report.model.score_cells`) is a cell of the
board, for the models and the papers alike. Runs are grouped by their benchmark exactly
as run (`longbench:qasper,trec` is not `longbench`: the overall covers other tasks). A
paper's overall, length bins or LongScore are shown only where the runs cover every task
the paper's table has (or, where the table does not list its tasks, the runs name no task
subset); otherwise the paper's row shows its per-task numbers only. MiniLongBench's
cells are averages over its anchors, so the papers' full-benchmark rows show only their
overall there, beside the estimate.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...benchmarks import score_type
from ...benchmarks.scores import ScoreSet, scalar
from ...errors import UserError
from ...json_values import as_object
from ...ledger import SETTLED
from ...pricing import is_simulator
from ...serving import Point
from ..baselines import references_for
from ..compare import NOT_DISTINGUISHABLE, Comparison, Line, compare_runs
from ..data import RunReport, latency_of, load_runs
from ..model import cell_label, number, score_cells

MAX_DISAGREEMENTS = 500  # samples listed where models score differently (largest spread first)


@dataclass(frozen=True)
class Cost:
    """What producing the model's answers cost (every purpose, every invocation, answers
    read from another run's cache at what they cost when paid: ledger.Produced) and how
    fast its requests were answered (ms; cached latencies when nothing was sent)."""

    usd: float
    unpriced: bool  # some tokens had no price: the dollars are a lower bound
    notional: bool  # the built-in simulator: dollars are notional
    prompt_tokens: int
    completion_tokens: int
    p50_ms: float | None
    p95_ms: float | None
    from_cache_usd: float = 0.0  # of `usd`: answers another run paid for


@dataclass(frozen=True)
class Entry:
    """One model's run on the board."""

    run_id: str
    model: str
    label: str
    score: float | None  # the headline score, as the run recorded it
    ci95: tuple[float, float] | None
    estimate: float | None  # a benchmark that estimates another (MiniLongBench): that estimate
    rank: int | None  # None: partial, not ranked
    tied: bool  # shares its rank with another model
    partial: str  # "" when complete, else what is missing ("partial 25/40", "not finished")
    scored: int  # samples with a score
    samples: int
    cells: dict[str, float | None]  # the run's other scores by column key ("task:qasper", "len:0-4k", ...)
    cost: Cost
    cache: str = dataclasses.field(default="", repr=False, compare=False)  # the store it came from
    # serving latency: run.json's `serving` (serving.py: TTFT, TPOT, ITL, e2e, throughputs,
    # overall and by context length), and each live answer's (prompt tokens, TTFT, TPOT)
    serving: dict[str, object] = dataclasses.field(default_factory=dict, compare=False)
    points: tuple[Point, ...] = dataclasses.field(default=(), repr=False, compare=False)

    @property
    def ttft_p95_ms(self) -> float | None:
        return number(as_object(as_object(self.serving.get("overall")).get("ttft_ms")).get("p95"))


@dataclass(frozen=True)
class Pair:
    """Two models' paired comparison of the headline: `diff` = higher - lower (>= 0: the
    one scoring more on the samples both scored is `higher`), as `compare_runs(lower,
    higher)` gives it, with its 95% paired bootstrap interval and permutation p-value."""

    higher: str  # run id
    lower: str
    diff: float
    ci95: tuple[float, float]
    p: float
    distinguishable: bool
    n_matched: int
    adjacent: bool  # next to each other on the board


@dataclass(frozen=True)
class ReferenceRow:
    """A paper's published row: shown beside the models, never ranked among them."""

    name: str
    source: str
    score: float | None  # the paper's overall where it is comparable with the board's score
    estimate_target: float | None  # the paper's overall, beside a board's estimate column
    cells: dict[str, float | None]  # by the board's column keys; only where comparable with the runs'


@dataclass(frozen=True)
class Disagreement:
    """A sample the models scored differently: each entry's score, in board order."""

    task: str
    sample_id: str
    scores: tuple[float | None, ...]


@dataclass(frozen=True)
class Board:
    benchmark: str
    score_name: str  # the headline's key in the run's scores ("overall", "anchor_average")
    estimate_name: str | None  # the estimate column's title, when the benchmark has one
    estimate_of: str | None  # what it estimates ("full LongBench"), beside the papers' overall
    entries: tuple[Entry, ...]  # complete runs by rank, then partial runs
    pairs: tuple[Pair, ...]  # every pair of scored entries, in board order
    references: tuple[ReferenceRow, ...]
    reference_note: str
    columns: tuple[tuple[str, str], ...]  # the cells' (key, label), in the benchmark's column order
    disagreements: tuple[Disagreement, ...]
    method: str


@dataclass(frozen=True)
class Leaderboard:
    generated_at: str
    boards: tuple[Board, ...]
    notes: tuple[str, ...] = ()  # e.g. an eval set's models with no run yet

    def to_dict(self) -> dict[str, object]:
        out = dataclasses.asdict(self)
        for board in out["boards"]:
            for entry in board["entries"]:
                entry.pop("cache", None)
                entry.pop("points", None)
        return out


# -- building ------------------------------------------------------------------------------
def build_leaderboard(run_ids: list[str], cache: Path) -> Leaderboard:
    """The leaderboard of stored runs (ids or unique prefixes, as `asyncbench report`
    takes them; none: every finished run). Runs not finished are taken too, as partial."""
    return leaderboard_of(load_runs(cache, run_ids, unfinished=True))


def leaderboard_of(runs: Sequence[RunReport], with_references: bool = True) -> Leaderboard:
    """One board per benchmark, in the order the benchmarks first appear in `runs`."""
    groups: dict[str, list[RunReport]] = {}
    for run in runs:
        groups.setdefault(run.benchmark, []).append(run)
    boards = tuple(_board(bench, members, with_references) for bench, members in groups.items())
    return Leaderboard(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), boards)


def partial_mark(run: RunReport) -> str:
    """What keeps a run from being complete: "" when nothing does."""
    marks = []
    if not run.summary:
        marks.append("not finished")
    elif run.status == "running":  # re-run, still running or killed: the scores are an earlier invocation's
        marks.append("not finished (earlier scores)")
    elif run.status != "complete" and not run.partial:
        marks.append(f"run {run.status}")
    if run.partial:
        marks.append(run.partial)
    return ", ".join(marks)


def _cost(run: RunReport) -> Cost:
    lat = as_object(run.summary.get("latency_ms"))
    if not lat:  # a run with no summary yet: the same percentiles from its sample rows
        measured, _ = latency_of(run.samples)
        lat = {"p50": measured.p50, "p95": measured.p95}
    made = run.produced
    return Cost(made.usd, bool(run.summary.get("unpriced")), is_simulator(run.model), made.prompt_tokens,
                made.completion_tokens, number(lat.get("p50")), number(lat.get("p95")), made.from_cache_usd)


def _interval(ci95: dict[str, object], key: str) -> tuple[float, float] | None:
    value = ci95.get(key)
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return float(value[0]), float(value[1])
    return None


def _entry(run: RunReport, kind: type[ScoreSet], key: str) -> Entry:
    scores = kind.from_json(run.scores)
    # a benchmark estimating another: its `overall` is that estimate, as the run recorded it
    estimate = scalar(run.scores.get("overall")) if kind.ESTIMATE_BOARD else None
    scored = sum(1 for r in run.samples if r.score is not None and r.status in SETTLED)
    cells = {k: v for k, v in score_cells(run.scores, kind.COLUMNS, kind=kind).items() if k != key}
    return Entry(run.run_id, run.model, run.label, scalar(run.scores.get(key)), _interval(scores.ci95, key),
                 estimate, None, False, partial_mark(run), scored, run.ledger["samples"]["total"], cells, _cost(run),
                 str(run.cache or ""), run.serving, tuple(run.points))


def _order(entries: list[Entry]) -> list[Entry]:
    """Complete runs by score (highest first), then partial ones by score; no score last."""
    def key(e: Entry) -> tuple[bool, bool, float, str]:
        return (bool(e.partial), e.score is None, -(e.score or 0.0), e.label)

    return sorted(entries, key=key)


def _pairs(ordered: list[Entry], runs: dict[str, RunReport], key: str) -> list[Pair]:
    """Every pair of entries with a score, compared on the samples both scored, in board
    order. `adjacent`: next to each other within the complete or the partial runs."""
    scored = [e for e in ordered if e.score is not None]
    out = []
    for i, first in enumerate(scored):
        for j in range(i + 1, len(scored)):
            second = scored[j]
            pair = _pair(runs[first.run_id], runs[second.run_id], key)
            if pair is not None:
                out.append(dataclasses.replace(pair, adjacent=j == i + 1 and bool(first.partial) == bool(second.partial)))
    return out


def _pair(first: RunReport, second: RunReport, key: str) -> Pair | None:
    """The paired comparison as `compare_runs(lower, higher)` gives it (higher: the run
    scoring more on the samples both scored); None when the runs share no sample."""
    try:
        c = compare_runs(second, first)
        line = _headline_line(c, key)
        if line is not None and line.diff < 0:  # the later run scores more on the common samples
            first, second = second, first
            c = compare_runs(second, first)
            line = _headline_line(c, key)
    except UserError:  # no sample in common, or grouped differently: nothing to pair
        return None
    if line is None:
        return None
    return Pair(first.run_id, second.run_id, line.diff, (line.ci[0], line.ci[1]), line.p, line.distinguishable,
                c.n_matched, False)


def _headline_line(c: Comparison, key: str) -> Line | None:
    return next((line for line in c.lines if line.key == key), None)


def _ranked(ordered: list[Entry], pairs: list[Pair]) -> list[Entry]:
    """Ranks of the complete entries: 1 + how many complete entries are distinguishably
    better (a pair's sign says which); `tied` where another complete entry shares it."""
    complete = {e.run_id for e in ordered if not e.partial and e.score is not None}
    beaten: dict[str, int] = dict.fromkeys(complete, 0)
    for p in pairs:
        if p.distinguishable and p.higher in complete and p.lower in complete:
            beaten[p.lower] += 1
    ranks = {run: 1 + n for run, n in beaten.items()}
    counts = [ranks[r] for r in ranks]
    return [dataclasses.replace(e, rank=ranks[e.run_id], tied=counts.count(ranks[e.run_id]) > 1)
            if e.run_id in ranks else e for e in ordered]


def _references(bench: str, kind: type[ScoreSet], columns: tuple[str, ...]) -> tuple[list[ReferenceRow], str]:
    """The papers' rows for the board (cells by the board's column keys), and a note on
    what they cover."""
    tasks = {k[5:] for k in columns if k.startswith("task:")}
    rows, partial_cover = [], False
    for ref in references_for(bench):
        published = kind.from_json(ref.scores)
        if kind.ESTIMATE_BOARD:  # the paper's overall beside the estimate; its cells are not the anchors'
            rows.append(ReferenceRow(ref.name, ref.source, None, published.overall, {}))
            continue
        cells = score_cells(ref.scores, kind.COLUMNS, kind=kind)
        listed = set(published.by_task) | set(ref.task_order)
        covered = listed <= tasks if listed else ":" not in bench
        partial_cover |= not covered and any(not k.startswith("task:") and v is not None for k, v in cells.items())
        shown = {k: cells.get(k) for k in columns if covered or k.startswith("task:")}
        row = ReferenceRow(ref.name, ref.source, published.overall if covered else None, None, shown)
        if row.score is not None or any(v is not None for v in shown.values()):
            rows.append(row)
    sources = "; ".join(dict.fromkeys(r.source for r in rows))
    note = f"published rows (not ranked): {sources}" if rows else ""
    if partial_cover:
        note += (". The papers' overall and other summary numbers cover tasks these runs did not run: their rows "
                 "show per-task numbers only")
    return rows, note


def _disagreements(entries: list[Entry], runs: dict[str, RunReport]) -> list[Disagreement]:
    """Samples that at least two entries scored differently, largest spread first."""
    by_sample: dict[tuple[str, str], list[float | None]] = {}
    for i, e in enumerate(entries):
        for r in runs[e.run_id].samples:
            if r.score is not None:
                by_sample.setdefault((r.task, r.sample_id), [None] * len(entries))[i] = float(r.score)
    rows = []
    for (task, sid), scores in by_sample.items():
        known = [s for s in scores if s is not None]
        if len(known) > 1 and max(known) != min(known):
            rows.append((max(known) - min(known), Disagreement(task, sid, tuple(scores))))
    rows.sort(key=lambda t: (-t[0], t[1].task, t[1].sample_id))
    return [d for _, d in rows[:MAX_DISAGREEMENTS]]


def _board(bench: str, members: list[RunReport], with_references: bool) -> Board:
    kind = score_type(bench)
    key = kind.compared_key("overall")
    runs = {r.run_id: r for r in members}
    ordered = _order([_entry(r, kind, key) for r in members])
    pairs = _pairs(ordered, runs, key)
    entries = _ranked(ordered, pairs)
    keys = tuple(dict.fromkeys(k for e in entries for k in e.cells))
    refs, note = _references(bench, kind, keys) if with_references else ([], "")
    estimate_name = "est." if kind.ESTIMATE_BOARD else None
    n_resamples = _n_resamples()
    method = (f"rank = 1 + models distinguishably better (paired bootstrap of {key} on the samples both scored, "
              f"{n_resamples} resamples, 95% percentile interval; '{NOT_DISTINGUISHABLE}' where it covers 0); "
              "partial runs are listed below the complete ones, unranked")
    estimate_of = kind.ESTIMATE_BOARD.split(": estimated ", 1)[-1] if kind.ESTIMATE_BOARD else None
    return Board(bench, key, estimate_name, estimate_of, tuple(entries), tuple(pairs), tuple(refs), note,
                 tuple((k, cell_label(k, kind)) for k in keys),
                 tuple(_disagreements(entries, runs)), method)


def _n_resamples() -> int:
    from ...estimators import intervals

    return intervals.N_RESAMPLES
