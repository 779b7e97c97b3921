"""One self-contained HTML file: inline CSS, figures as base64 PNG data URIs, the sample
viewer's data and script inline (viewer.py), no external assets, so it can be mailed,
attached to CI, or opened offline.

Every table and figure has a stable id (`leaderboard-<benchmark>`, `plot-length-<benchmark>`,
`cost`, `plot-latency`, ...) so tests and users can find them.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from html import escape

from ..json_values import as_object
from . import plots, viewer
from .data import RunReport
from .model import Leaderboard, Report, number
from .samples import SampleRecord
from .tables import (
    Table,
    comparison_notes,
    comparison_table,
    comparison_title,
    cost_table,
    endpoint_table,
    headline_table,
    invocation_table,
    run_node_table,
    run_task_table,
    serving_table,
    sources,
    task_table,
    where_it_went,
)

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3}tr.reference td{color:#777;font-style:italic}
.scroll{overflow-x:auto}.note{color:#666;font-size:13px}
figure{margin:12px 0 24px}figure img{max-width:100%;border:1px solid #eee}
"""


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _table(table_id: str, table: Table, row_kinds: list[str] | None = None) -> str:
    header, body = table
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    rows = []
    for i, row in enumerate(body):
        cls = f' class="{row_kinds[i]}"' if row_kinds else ""
        rows.append(f"<tr{cls}>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
    return (f'<div class="scroll"><table id="{escape(table_id)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _figure(fig_id: str, png: bytes, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img id="{escape(fig_id)}" alt="{escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption class=\"note\">{escape(caption)}</figcaption></figure>")


def render_html(report: Report, runs: list[RunReport],
                samples: Mapping[str, Sequence[SampleRecord]] | None = None) -> str:
    parts = [f"<h1>asyncbench report</h1><p class=\"note\">Generated {escape(report.generated_at)}; "
             f"{len(runs)} run(s). Grey italic rows and grey markers are published numbers from the papers.</p>"]
    for board in report.leaderboards:
        s = slug(board.benchmark)
        members = [r for r in runs if r.run_id in {row.run_id for row in board.rows}]
        parts.append(f"<h2>{escape(board.benchmark)}</h2>")
        headline = headline_table(board)
        kinds = [row[1] for row in headline[1]]
        parts.append(_table(f"leaderboard-{s}", headline, kinds))
        tt = task_table(board)
        if tt:
            parts.append(f"<h3>{escape(board.benchmark)} by task</h3>" + _table(f"tasks-{s}", tt))
        for src in sources(board):
            parts.append(f'<p class="note">Reference rows: {escape(src)}.</p>')
        parts.append(_figure(f"plot-score-{s}", plots.score_chart(board), f"{board.benchmark}: score by category or task"))
        parts.append(_figure(f"plot-length-{s}", plots.length_chart(board, members),
                             f"{board.benchmark}: score versus context length"))
        parts.append(_figure(f"plot-frontier-{s}", plots.frontier_chart(board.benchmark, _frontier(board, members)),
                             f"{board.benchmark}: score versus cost and versus p95 time to first token"))
    for c in report.comparisons:
        notes = "".join(f'<p class="note">{escape(n)}</p>' for n in comparison_notes(c))
        parts.append(f"<h2>{escape(comparison_title(c))}</h2>{notes}"
                     + _table(f"compare-{slug(str(c['benchmark']))}", comparison_table(c)))
    parts.append("<h2>Cost and latency</h2>")
    parts.append(_table("cost", cost_table(report)))
    parts.append("<h3>Invocations</h3>" + _table("invocations", invocation_table(report)))
    parts.append("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in where_it_went(report)) + "</ul>")
    parts.append(_figure("plot-cost", plots.cost_chart(runs), "cost by task to produce each run (USD)"))
    parts.append(_figure("plot-latency", plots.latency_chart(runs), "latency distribution per run"))
    parts += _serving(report, runs)
    parts += [_run_section(run) for run in report.runs]
    parts.append("<h2>Endpoints</h2>" + _table("endpoints", endpoint_table(report)))
    script = ""
    if samples:
        parts.append("<h2>Samples</h2>")
        parts += _comparisons(runs, samples)
        shown = [r for r in runs if r.run_id in samples]
        budgets = _budgets({r.run_id: samples[r.run_id] for r in shown})
        parts += [viewer.sample_viewer(r.run_id, r.label, samples[r.run_id], budgets[r.run_id]) for r in shown]
        script = f"<script>{viewer.SCRIPT}</script>"
    parts.insert(1, _contents(parts, [(r.run_id, r.label) for r in runs if samples and r.run_id in samples]))
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>asyncbench report</title>"
            f"<style>{_CSS}{viewer.CSS}</style></head><body>{''.join(parts)}{script}</body></html>\n")


def _run_section(run: dict[str, object]) -> str:
    """A run's per-task table, then (a Ray run) its requests and workers per node."""
    section = f"<h3>{escape(str(run['label']))} per task</h3>" + _table(f"tasks-run-{run['run_id']}", run_task_table(run))
    if (nodes := run_node_table(run)) is not None:
        section += f"<h3>{escape(nodes[0])}</h3>" + _table(f"nodes-run-{run['run_id']}", nodes[1])
    return section


def _serving(report: Report, runs: list[RunReport]) -> list[str]:
    """The serving latency table (`serving`) and the prefill curve (`plot-prefill`)."""
    return ["<h3>Serving latency by context length</h3><p class=\"note\">Time to first token (TTFT), time per "
            "output token (TPOT = (e2e - TTFT) / (output tokens - 1)), inter-token gaps (ITL) and end to end, "
            "as AIPerf defines them, of the answers each run sent live; throughputs over the time requests were "
            "in flight. Cache hits and batch results carry no timing (counted under \"not timed\").</p>"
            + _table("serving", serving_table(report)),
            _figure("plot-prefill", plots.prefill_chart([(r.label, r.points) for r in runs]),
                    "time to first token and time per output token against prompt tokens, per run")]


def _frontier(board: Leaderboard, members: list[RunReport]) -> list[tuple[str, float | None, float | None, float | None]]:
    """Each run of a board as (label, headline score, USD to produce it, p95 TTFT ms)."""
    head = board.columns[0].key if board.columns else "overall"
    by_id = {r.run_id: r for r in members}
    out = []
    for row in board.rows:
        run = by_id.get(row.run_id or "")
        if row.kind != "run" or run is None:
            continue
        ttft = number(as_object(as_object(run.serving.get("overall")).get("ttft_ms")).get("p95"))
        priced = not run.summary.get("unpriced")
        out.append((row.label, row.cells.get(head), run.produced.usd if priced else None, ttft))
    return out


def _budgets(samples: Mapping[str, Sequence[SampleRecord]]) -> dict[str, int]:
    """The report's sample budget (viewer.SAMPLE_BUDGET, or RUN_BUDGET a run if more)
    shared out: runs that need less than an equal share keep what they need, the rest is
    split evenly among the others."""
    def size(text: str | None) -> int:
        return len(text.encode()) if text else 0

    need = {run: sum(size(r.prompt) + size(r.prediction) + sum(map(size, r.references)) + 400 for r in recs)
            for run, recs in samples.items()}
    left, out = max(viewer.SAMPLE_BUDGET, viewer.RUN_BUDGET * len(need)), {}
    for i, run in enumerate(sorted(need, key=need.__getitem__)):
        out[run] = min(need[run], left // (len(need) - i))
        left -= out[run]
    return out


def _contents(parts: list[str], viewers: list[tuple[str, str]]) -> str:
    """A table of contents: each section (its <h2> gets an id) and each run's sample viewer
    (a `#samples=RUN` link: the viewer's script scrolls to it)."""
    items = []
    for i, part in enumerate(parts):
        found = re.match(r"<h2>(.*?)</h2>", part)
        if found:
            anchor = f"section-{slug(found.group(1))}"
            parts[i] = f'<h2 id="{anchor}">' + part[4:]
            items.append(f'<li><a href="#{anchor}">{found.group(1)}</a></li>')
    items += [f'<li><a href="#samples={escape(run)}">samples of {escape(label)}</a></li>' for run, label in viewers]
    return f'<nav id="contents"><strong>Contents</strong><ul>{"".join(items)}</ul></nav>'


def _comparisons(runs: list[RunReport], samples: Mapping[str, Sequence[SampleRecord]]) -> list[str]:
    """Each later run of a benchmark against its first run in the report, sample by sample."""
    first: dict[str, RunReport] = {}
    parts = []
    for run in runs:
        base = first.setdefault(run.benchmark, run)
        if base is run or run.run_id not in samples or base.run_id not in samples:
            continue
        rows = viewer.disagreements(samples[base.run_id], samples[run.run_id])
        header = ["sample", "task", "score A", "score B", "B - A", "prediction A", "prediction B"]
        title = (f"<h3>Where they disagree: A = {escape(base.label)}, B = {escape(run.label)}</h3>"
                 f'<p class="note">{len(rows)} samples scored differently (largest difference first, at most 500).</p>')
        parts.append(title + _table(f"compare-{base.run_id}-{run.run_id}", (header, rows)))
    return parts
