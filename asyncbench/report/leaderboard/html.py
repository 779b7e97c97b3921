"""The leaderboard as one self-contained HTML file (inline CSS, data and script, like the
report): per benchmark the ranking, the paired comparisons and every other score, then
the samples the models scored differently, side by side, and each model's sample viewer
(report/viewer.py) holding those samples, to read what each one answered.

Table ids are stable for tests and users: `leaderboard-<benchmark>`, `pairs-<benchmark>`,
`scores-<benchmark>`, `disagree-<benchmark>`, and the viewers' `samples-<run id>`.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from ...store import Store
from .. import plots, viewer
from ..html import _CSS, _budgets, _figure, _table, slug
from ..samples import SampleRecord, load_samples
from .model import Board, Leaderboard
from .text import cell_table, headline_references, notes, pair_table, ranking_table, serving_table

# the model columns read left-aligned, like the first one
_LB_CSS = ('table[id^="leaderboard-"] td:nth-child(2),table[id^="pairs-"] td:nth-child(-n+2),'
           'table[id^="pairs-"] th:nth-child(-n+2){text-align:left}')


def _disagreement_table(board: Board) -> tuple[list[str], list[list[str]]]:
    header = ["sample", "task", *(e.label for e in board.entries)]
    body = [[d.sample_id, d.task, *("-" if s is None else f"{s:.3f}" for s in d.scores)] for d in board.disagreements]
    return header, body


def _samples(board: Board) -> dict[str, Sequence[SampleRecord]]:
    """Each model's records of the samples the models disagree on."""
    wanted = {(d.task, d.sample_id) for d in board.disagreements}
    out: dict[str, Sequence[SampleRecord]] = {}
    for e in board.entries:
        if e.cache and wanted:
            records = [r for r in load_samples(Store(Path(e.cache)), e.run_id) if (r.task, r.sample_id) in wanted]
            if records:
                out[e.run_id] = records
    return out


def _board(board: Board) -> tuple[list[str], dict[str, Sequence[SampleRecord]]]:
    s = slug(board.benchmark)
    ranking = ranking_table(board)
    kinds = ["run"] * len(board.entries) + ["reference"] * len(headline_references(board))
    parts = [f"<h2>{escape(board.benchmark)}</h2>", _table(f"leaderboard-{s}", ranking, kinds)]
    if board.pairs:
        parts.append(f"<h3>Paired comparisons of {escape(board.score_name)}</h3>" + _table(f"pairs-{s}", pair_table(board)))
    cells = cell_table(board)
    if cells:
        parts.append("<h3>Every score</h3>" + _table(f"scores-{s}", cells))
    if (serving := serving_table(board)) is not None:
        parts.append("<h3>Serving latency by context length</h3><p class=\"note\">Milliseconds: time to first "
                     "token (TTFT) and time per output token (TPOT) as AIPerf defines them, of the answers each run "
                     "sent live (cache hits and batch results carry no timing).</p>" + _table(f"serving-{s}", serving))
    parts.append(_figure(f"plot-prefill-{s}", plots.prefill_chart([(e.label, list(e.points)) for e in board.entries]),
                         f"{board.benchmark}: TTFT and TPOT against prompt tokens per model"))
    parts.append(_figure(f"plot-frontier-{s}", plots.frontier_chart(board.benchmark, [
        (e.label, e.score, None if e.cost.unpriced else e.cost.usd, e.ttft_p95_ms) for e in board.entries]),
        f"{board.benchmark}: score versus cost and versus p95 time to first token"))
    parts.append("<ul>" + "".join(f'<li class="note">{escape(line)}</li>' for line in notes(board)) + "</ul>")
    samples = _samples(board)
    if board.disagreements:
        parts.append(f"<h3>Where the models disagree</h3><p class=\"note\">{len(board.disagreements)} samples scored "
                     "differently (largest spread first); each model's viewer below holds them.</p>"
                     + _table(f"disagree-{s}", _disagreement_table(board)))
    return parts, samples


def html(lb: Leaderboard) -> str:
    parts = [f"<h1>asyncbench leaderboard</h1><p class=\"note\">Generated {escape(lb.generated_at)}. Grey italic "
             "rows are published numbers from the papers, not ranked.</p>"]
    viewers: list[tuple[str, str, Sequence[SampleRecord]]] = []
    for board in lb.boards:
        body, samples = _board(board)
        parts += body
        viewers += [(e.run_id, e.label, samples[e.run_id]) for e in board.entries if e.run_id in samples]
    parts += [f'<p class="note">{escape(line)}</p>' for line in lb.notes]
    script = ""
    if viewers:
        budgets = _budgets({run: records for run, _, records in viewers})
        parts.append("<h2>Samples where the models disagree</h2>")
        parts += [viewer.sample_viewer(run, label, records, budgets[run]) for run, label, records in viewers]
        script = f"<script>{viewer.SCRIPT}</script>"
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>asyncbench leaderboard</title>"
            f"<style>{_CSS}{_LB_CSS}{viewer.CSS}</style></head><body>{''.join(parts)}{script}</body></html>\n")
