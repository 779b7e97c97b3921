"""Text renderings of a `Leaderboard` (model.py): the terminal table (100 columns),
Markdown, JSON.

Each board is three tables built once here (the HTML file uses the same): the ranking
(models, then the papers' rows), every paired comparison, and every other score (length
bins, LongScore, categories, tasks).
"""

from __future__ import annotations

import io
import json

from ...json_values import as_object
from ...pricing import NOTIONAL
from ..compare import NOT_DISTINGUISHABLE
from ..model import number
from ..tables import Table, _md, fmt_num, fmt_score, fmt_usd
from .model import Board, Entry, Leaderboard, ReferenceRow

WIDTH = 100  # the terminal table's width
SHORT = 22  # a label in the by-task table's header


def rank_text(e: Entry) -> str:
    return "-" if e.rank is None else f"{e.rank}{'=' if e.tied else ''}"


def score_text(score: float | None, ci: tuple[float, float] | None) -> str:
    return fmt_score(score) + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if score is not None and ci else "")


def _vs_next(e: Entry, board: Board) -> str:
    """The paired difference to the next model down (among the complete, or the partial,
    runs): '>' or '<' distinguishable, '≈' not."""
    here = _position(board, e.run_id)
    pair = next((p for p in board.pairs if p.adjacent and e.run_id in (p.higher, p.lower)
                 and _position(board, p.lower if p.higher == e.run_id else p.higher) == here + 1), None)
    if pair is None:
        return ""
    above = pair.higher == e.run_id
    mark = (">" if above else "<") if pair.distinguishable else "≈"
    return f"{mark} {pair.diff if above else -pair.diff:+.2f}"


def _position(board: Board, run_id: str) -> int:
    return next(i for i, x in enumerate(board.entries) if x.run_id == run_id)


def _usd(e: Entry) -> str:
    return (fmt_usd(e.cost.usd) + ("*" if e.cost.notional else "") + ("+" if e.cost.unpriced else "")
            + ("^" if e.cost.from_cache_usd else ""))


def short(label: str) -> str:
    """A label without the provider ("openai-compat:sim [8c615a0e]" -> "sim [8c615a0e]"):
    the terminal's narrow columns; the run id in brackets still tells runs apart."""
    head, sep, rest = label.partition(":")
    return rest if sep and " " not in head else label


def ranking_table(board: Board, terse: bool = False) -> Table:
    """Models by rank (partial ones last, unranked), then the papers' rows; `terse`: the
    terminal's labels (`short`)."""
    name = short if terse else str
    est = [board.estimate_name] if board.estimate_name else []
    ttft = [] if terse else ["TTFT ms p50/95"]
    header = ["#", "model", "score [95% CI]", *est, "vs next", "USD", "tokens", "ms p50/95", *ttft]
    body = []
    for e in board.entries:
        label = name(e.label) + (f" ({e.partial})" if e.partial else "")
        q = as_object(as_object(e.serving.get("overall")).get("ttft_ms"))
        body.append([rank_text(e), label, score_text(e.score, e.ci95),
                     *([fmt_score(e.estimate)] if est else []), _vs_next(e, board), _usd(e),
                     f"{compact(e.cost.prompt_tokens)}/{compact(e.cost.completion_tokens)}",
                     f"{compact(e.cost.p50_ms)}/{compact(e.cost.p95_ms)}",
                     *([f"{compact(number(q.get('p50')))}/{compact(number(q.get('p95')))}"] if ttft else [])])
    body += [["ref", ref.name, fmt_score(ref.score), *([fmt_score(ref.estimate_target)] if est else []),
              "", "", "", "", *[""] * len(ttft)] for ref in headline_references(board)]
    return header, body


def serving_table(board: Board, terse: bool = False) -> Table | None:
    """Each model's serving latency by context length, then overall (serving.py); None
    when no model measured any."""
    if not any(e.serving.get("measured") for e in board.entries):
        return None
    name = short if terse else str
    header = ["model", "length", "n", "TTFT p50", "p95", "p99", "TPOT p50", "p95", "out tok/s", "req/s"]
    body = []
    for e in board.entries:
        blocks = [*as_object(e.serving.get("by_length")).items(), ("all", e.serving.get("overall"))]
        for label, block in blocks:
            b = as_object(block)
            if not b:
                continue
            t, p = as_object(b.get("ttft_ms")), as_object(b.get("tpot_ms"))
            body.append([name(e.label), label, fmt_num(b.get("n")), _ms(number(t.get("p50"))),
                         _ms(number(t.get("p95"))), _ms(number(t.get("p99"))), _ms(number(p.get("p50"))),
                         _ms(number(p.get("p95"))), compact(number(b.get("output_token_throughput"))),
                         compact(number(b.get("request_throughput")))])
    return header, body


def _ms(v: float | None) -> str:
    """A latency: two decimals under 10 ms (a time per token), else `compact`."""
    return f"{v:.2f}" if v is not None and v < 10 else compact(v)


def compact(v: float | None) -> str:
    """A count or a latency in a few characters: 950, 12.3k, 2.06M."""
    if v is None:
        return "-"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3g}M"
    return f"{v / 1e3:.3g}k" if abs(v) >= 1e4 else f"{v:.0f}"


def headline_references(board: Board) -> list[ReferenceRow]:
    """The papers' rows with a number in the ranking table's columns."""
    return [r for r in board.references if r.score is not None or r.estimate_target is not None]


def _label(run_id: str, board: Board) -> str:
    return next(e.label for e in board.entries if e.run_id == run_id)


def pair_table(board: Board, terse: bool = False) -> Table:
    name = short if terse else str
    header = ["higher", "lower", "diff", "95% CI", "p", "n", ""]
    body = [[name(_label(p.higher, board)), name(_label(p.lower, board)), f"{p.diff:+.2f}", f"[{p.ci95[0]:+.2f}, {p.ci95[1]:+.2f}]",
             f"{p.p:.4f}", fmt_num(p.n_matched), "distinguishable" if p.distinguishable else NOT_DISTINGUISHABLE]
            for p in board.pairs]
    return header, body


def cell_table(board: Board, terse: bool = False) -> Table | None:
    """Every other score (length bins, LongScore, categories, tasks) as rows; each model
    and paper a column. `terse` (the terminal): the models only, headed by rank and run id."""
    if not board.columns:
        return None
    refs = [] if terse else list(board.references)
    labels = [f"{rank_text(e)} [{e.run_id[:8]}]" for e in board.entries] if terse else [e.label for e in board.entries]
    header = ["score", *labels, *(f"{r.name} (paper)" for r in refs)]
    body = [[label, *(fmt_score(e.cells.get(k)) for e in board.entries), *(fmt_score(r.cells.get(k)) for r in refs)]
            for k, label in board.columns]
    return header, body


def notes(board: Board) -> list[str]:
    out = [board.method + "; vs next: the paired difference to the model below, '>' or '<' distinguishable, '≈' not."]
    if board.estimate_of:
        out.append(f"est.: each run's estimate of {board.estimate_of}, the number the papers' rows (their "
                   f"{board.estimate_of} overall) compare with; the ranking uses {board.score_name}, which the "
                   "intervals and paired comparisons cover.")
    if any(e.cost.notional for e in board.entries):
        out.append(f"USD*: {NOTIONAL}.")
    if any(e.cost.unpriced for e in board.entries):
        out.append("USD+: some tokens had no price; the dollars are a lower bound.")
    if any(e.cost.from_cache_usd for e in board.entries):
        out.append("USD^: what producing the run's answers cost, answers read from a cache another run paid for "
                   "counted at what they cost when paid (USD and tokens are each run's cost to produce it, over all "
                   "its invocations, not what its last invocation paid).")
    if board.reference_note:
        out.append(board.reference_note + ".")
    if board.disagreements:
        out.append(f"{len(board.disagreements)} samples scored differently by the models (the HTML file lists them).")
    return out


def _pairs_title(board: Board) -> str:
    return f"{board.benchmark}: paired comparisons of {board.score_name}"


# -- terminal ------------------------------------------------------------------------------
def text(lb: Leaderboard) -> str:
    """Rich tables rendered to plain text at most WIDTH columns wide."""
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table as RichTable

    buf = io.StringIO()
    console = Console(file=buf, width=WIDTH, no_color=True, highlight=False, soft_wrap=False, emoji=False)

    def show(title: str, table: Table) -> None:
        header, body = table
        t = RichTable(title=escape(title), box=box.SIMPLE_HEAD)  # no vertical rules: room for the numbers
        for i, h in enumerate(header):
            # labels fold (never below a readable width); numbers and intervals stay on one line
            t.add_column(escape(h), justify="left" if i < 2 else "right", overflow="fold", no_wrap=i >= 2,
                         min_width=(3, 12)[i] if i < 2 else None)
        for row in body:
            t.add_row(*(escape(c) for c in row))
        console.print(t)

    for board in lb.boards:
        show(f"{board.benchmark}: leaderboard by {board.score_name}", ranking_table(board, terse=True))
        if board.pairs:
            show(_pairs_title(board), pair_table(board, terse=True))
        if (serving := serving_table(board, terse=True)) is not None:
            show(f"{board.benchmark}: serving latency (ms) by context length", serving)
        cells = cell_table(board, terse=True)
        if cells and len(board.columns) > 1:
            with_papers = " (with the papers' rows: --format md or html)" if board.references else ""
            show(f"{board.benchmark}: every score{with_papers}", cells)
        for line in notes(board):
            console.print(escape(line))
    for line in lb.notes:
        console.print(escape(line))
    return buf.getvalue()


# -- Markdown ------------------------------------------------------------------------------
def markdown(lb: Leaderboard) -> str:
    out = ["# asyncbench leaderboard", "", f"Generated {lb.generated_at}.", ""]
    for board in lb.boards:
        out += [f"## {board.benchmark}", "", f"Ranked by {board.score_name}.", "", _md(ranking_table(board)), ""]
        if board.pairs:
            out += [f"### {_pairs_title(board)}", "", _md(pair_table(board)), ""]
        cells = cell_table(board)
        if cells:
            out += [f"### {board.benchmark}: every score", "", _md(cells), ""]
        if (serving := serving_table(board)) is not None:
            out += [f"### {board.benchmark}: serving latency (ms) by context length", "", _md(serving), ""]
        out += [f"- {line}" for line in notes(board)] + [""]
    out += [f"- {line}" for line in lb.notes]
    return "\n".join(out).rstrip() + "\n"


# -- JSON ----------------------------------------------------------------------------------
def json_text(lb: Leaderboard) -> str:
    return json.dumps(lb.to_dict(), indent=2, ensure_ascii=False) + "\n"

