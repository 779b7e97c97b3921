"""Text renderings of a `Leaderboard` (model.py): the terminal table (100 columns), Markdown, JSON.

Each board is three tables built once here (the HTML file uses the same): the ranking
(models, then the papers' rows), every paired comparison, and the scores by task.
"""

from __future__ import annotations

import io
import json

from ...pricing import NOTIONAL
from ..compare import NOT_DISTINGUISHABLE
from ..tables import Table, _md, fmt_num, fmt_score, fmt_usd
from .model import Board, Entry, Leaderboard, ReferenceRow

WIDTH = 100  # the terminal table's width
SHORT = 22  # a label in the by-task table's header


def rank_text(e: Entry) -> str:
    return "-" if e.rank is None else f"{e.rank}{'=' if e.tied else ''}"


def score_text(score: float | None, ci: tuple[float, float] | None) -> str:
    return fmt_score(score) + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if score is not None and ci else "")


def _vs_next(e: Entry, board: Board) -> str:
    """The paired difference to the next model down: '>' distinguishable, '≈' not."""
    pair = next((p for p in board.pairs if p.adjacent and p.higher == e.run_id), None)
    if pair is None:
        return ""
    return f"{'>' if pair.distinguishable else '≈'} {pair.diff:+.2f}"


def _usd(e: Entry) -> str:
    return fmt_usd(e.cost.usd) + ("*" if e.cost.notional else "") + ("+" if e.cost.unpriced else "")


def ranking_table(board: Board) -> Table:
    """Models by rank (partial ones last, unranked), then the papers' rows."""
    est = [board.estimate_name] if board.estimate_name else []
    header = ["#", "model", f"{board.score_name} [95% CI]", *est, "vs next", "USD", "tokens in/out",
              "p50/p95 ms"]
    body = []
    for e in board.entries:
        label = e.label + (f" ({e.partial})" if e.partial else "")
        body.append([rank_text(e), label, score_text(e.score, e.ci95),
                     *([fmt_score(e.estimate)] if est else []), _vs_next(e, board), _usd(e),
                     f"{fmt_num(e.cost.prompt_tokens)}/{fmt_num(e.cost.completion_tokens)}",
                     f"{fmt_num(e.cost.p50_ms)}/{fmt_num(e.cost.p95_ms)}"])
    body += [["paper", ref.name, fmt_score(ref.score), *([fmt_score(ref.estimate_target)] if est else []),
              "", "", "", ""] for ref in headline_references(board)]
    return header, body


def headline_references(board: Board) -> list[ReferenceRow]:
    """The papers' rows with a number in the ranking table's columns."""
    return [r for r in board.references if r.score is not None or r.estimate_target is not None]


def _label(run_id: str, board: Board) -> str:
    return next(e.label for e in board.entries if e.run_id == run_id)


def pair_table(board: Board) -> Table:
    header = ["higher", "lower", "diff", "95% CI", "p", "n", ""]
    body = [[_label(p.higher, board), _label(p.lower, board), f"{p.diff:+.2f}", f"[{p.ci95[0]:+.2f}, {p.ci95[1]:+.2f}]",
             f"{p.p:.4f}", fmt_num(p.n_matched), "distinguishable" if p.distinguishable else NOT_DISTINGUISHABLE]
            for p in board.pairs]
    return header, body


def task_table(board: Board, references: bool = True) -> Table | None:
    """Tasks as rows; each model (and paper) a column."""
    if not board.tasks:
        return None
    refs = list(board.references) if references else []
    header = ["task", *(e.label for e in board.entries), *(f"{r.name} (paper)" for r in refs)]
    body = [[t, *(fmt_score(e.tasks.get(t)) for e in board.entries), *(fmt_score(r.tasks.get(t)) for r in refs)]
            for t in board.tasks]
    return header, body


def notes(board: Board) -> list[str]:
    out = [board.method + "; vs next: '>' distinguishable from the model below, '≈' not."]
    if any(e.cost.notional for e in board.entries):
        out.append(f"USD*: {NOTIONAL}.")
    if any(e.cost.unpriced for e in board.entries):
        out.append("USD+: some tokens had no price; the dollars are a lower bound.")
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
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table as RichTable

    buf = io.StringIO()
    console = Console(file=buf, width=WIDTH, no_color=True, highlight=False, soft_wrap=False)

    def show(title: str, table: Table) -> None:
        header, body = table
        t = RichTable(title=escape(title))
        for i, h in enumerate(header):
            # labels fold; numbers and intervals stay on one line
            t.add_column(escape(h), justify="left" if i < 2 else "right", overflow="fold", no_wrap=i >= 2)
        for row in body:
            t.add_row(*(escape(c) for c in row))
        console.print(t)

    for board in lb.boards:
        show(f"{board.benchmark}: leaderboard", ranking_table(board))
        if board.pairs:
            show(_pairs_title(board), pair_table(board))
        tt = task_table(board, references=_fits(board))
        if tt and len(board.tasks) > 1:
            show(f"{board.benchmark} by task", tt)
        for line in notes(board):
            console.print(escape(line))
    for line in lb.notes:
        console.print(escape(line))
    return buf.getvalue()


def _fits(board: Board) -> bool:
    """Whether the by-task table with the papers' columns fits the terminal's width."""
    return 14 + 12 * (len(board.entries) + len(board.references)) <= WIDTH


# -- Markdown ------------------------------------------------------------------------------
def markdown(lb: Leaderboard) -> str:
    out = ["# asyncbench leaderboard", "", f"Generated {lb.generated_at}.", ""]
    for board in lb.boards:
        out += [f"## {board.benchmark}", "", _md(ranking_table(board)), ""]
        if board.pairs:
            out += [f"### {_pairs_title(board)}", "", _md(pair_table(board)), ""]
        tt = task_table(board)
        if tt:
            out += [f"### {board.benchmark} by task", "", _md(tt), ""]
        out += [f"- {line}" for line in notes(board)] + [""]
    out += [f"- {line}" for line in lb.notes]
    return "\n".join(out).rstrip() + "\n"


# -- JSON ----------------------------------------------------------------------------------
def json_text(lb: Leaderboard) -> str:
    return json.dumps(lb.to_dict(), indent=2, ensure_ascii=False) + "\n"

