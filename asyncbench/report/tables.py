"""Text renderings of a Report: Markdown, JSON and a terminal table.

A leaderboard is shown as two tables so it stays readable: the headline columns (overall,
categories, length bins, LongScore) with one row per run or published model, then the
per-task scores transposed (one row per task, one column per run or published model).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..ledger import PURPOSES, SAMPLE_STATUSES, usage_flag_line
from ..terminal import shown_markup
from .model import Column, Leaderboard, Report, Row
from .placement import node_table, placement_of, replacements

if TYPE_CHECKING:  # rich is imported where tables are printed
    from rich.console import Console

Table = tuple[list[str], list[list[str]]]  # header, body


def fmt_score(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def fmt_usd(v: float | None) -> str:
    if v is None:
        return "-"
    return f"${v:.4f}" if abs(v) >= 0.0001 or v == 0 else f"${v:.2e}"


def fmt_num(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.2f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def fmt_cell(row: Row, key: str) -> str:
    """A score, with the half-width of its 95% bootstrap interval where the run has one;
    one built on a subset of its samples says so ("partial n/N"), and a partial run's
    headline numbers are never shown plain."""
    value = fmt_score(row.cells.get(key))
    if value != "-" and key in row.intervals:
        lo, hi = row.intervals[key]
        value += f" ±{(hi - lo) / 2:.2f}"
    mark = row.partial_cells.get(key) or (row.partial if not key.startswith("task:") else None)
    return f"({value}) {mark}" if mark and value != "-" else value


def split_columns(board: Leaderboard) -> tuple[list[Column], list[Column]]:
    headline = [c for c in board.columns if not c.key.startswith("task:")]
    tasks = [c for c in board.columns if c.key.startswith("task:")]
    return headline, tasks


def headline_table(board: Leaderboard) -> Table:
    headline, _ = split_columns(board)
    header = ["model", "kind"] + [c.label for c in headline]
    # published rows with no headline number (BAMBOO prints per-dataset scores only) appear in the task table
    rows = [r for r in board.rows if r.kind == "run" or any(r.cells.get(c.key) is not None for c in headline)]
    body = [[row.label + (f" — {row.partial}" if row.partial else ""), row.kind]
            + [fmt_cell(row, c.key) for c in headline] for row in rows]
    return header, body


def task_table(board: Leaderboard) -> Table | None:
    _, tasks = split_columns(board)
    if not tasks:
        return None
    rows = [r for r in board.rows if any(r.cells.get(c.key) is not None for c in tasks)]
    header = ["task"] + [r.label + (" (paper)" if r.kind == "reference" else "") for r in rows]
    body = [[c.label] + [fmt_cell(r, c.key) for r in rows] for c in tasks]
    return header, body


STATUS_HEADERS = [s.replace("_", " ") for s in SAMPLE_STATUSES]


def cost_table(report: Report) -> Table:
    """One row per run: samples by status (they sum to `samples`), what the run cost to
    produce by purpose (they sum to `USD total`), and its invocations' requests."""
    header = (["run", "samples", *STATUS_HEADERS, "complete", "invocations", "requests", "retries", "429s",
               "tokens in", "tokens out"] + [f"USD {p}" for p in PURPOSES]
              + ["USD total", "USD/sample", "saved by cache (last)", "wall s", "p50 ms", "p95 ms", "p99 ms"])
    body = []
    for r in report.runs:
        lat, tokens, cost = r["latency_ms"], r["tokens"]["total"], r["cost_usd"]
        last = r["this_invocation"] or {}
        unpriced = " unpriced" if r["unpriced"] else ""
        body.append([r["label"], fmt_num(r["samples"]["total"]), *(fmt_num(r["samples"][s]) for s in SAMPLE_STATUSES),
                     "yes" if r["complete"] else r["partial"], fmt_num(len(r["invocations"])), fmt_num(r["requests"]),
                     fmt_num(r["retries"]), fmt_num(r["rate_limited"]), fmt_num(tokens["prompt_tokens"]),
                     fmt_num(tokens["completion_tokens"]), *(fmt_usd(cost[p]) for p in PURPOSES),
                     fmt_usd(cost["total"]) + unpriced, fmt_usd(r["cost_per_sample_usd"]),
                     fmt_usd(last.get("saved_by_cache_usd")), fmt_num((r.get("usage_flags") or {}).get("answers", 0)),
                     fmt_num(r["wall_s"]), fmt_num(lat.get("p50")),
                     fmt_num(lat.get("p95")), fmt_num(lat.get("p99"))])
    return header, body


def serving_table(report: Report) -> Table:
    """Serving latency (run.json's `serving`, serving.py): a row per run and context-length
    bin, then the run's own row; "-" where nothing was measured (never 0)."""
    header = ["run", "length", "n", "TTFT p50 ms", "TTFT p90", "TTFT p95", "TTFT p99", "TPOT p50 ms", "TPOT p90",
              "TPOT p95", "TPOT p99", "ITL p50 ms", "ITL p99", "e2e p50 ms", "e2e p95", "out tok/s", "req/s",
              "not timed"]
    body = []
    for r in report.runs:
        serving = r.get("serving") or {}
        missing = ", ".join(f"{n} {why}" for why, n in (serving.get("not_measured") or {}).items()) or "-"
        blocks = [*(serving.get("by_length") or {}).items()]
        if serving.get("overall"):
            blocks.append(("all", serving["overall"]))
        if not blocks:
            body.append([r["label"], "-", "0", *["-"] * (len(header) - 4), missing])
        for label, b in blocks:
            q = [fmt_num((b.get(m) or {}).get(f"p{p}")) for m, ps in (("ttft_ms", (50, 90, 95, 99)),
                 ("tpot_ms", (50, 90, 95, 99)), ("itl_ms", (50, 99)), ("e2e_ms", (50, 95))) for p in ps]
            body.append([r["label"], label, fmt_num(b.get("n")), *q, fmt_num(b.get("output_token_throughput")),
                         fmt_num(b.get("request_throughput")), missing if label == "all" else ""])
    return header, body


def invocation_table(report: Report) -> Table:
    """Every invocation of every run, oldest first: a re-run adds a row, never rewrites one."""
    header = ["run", "invocation", "started", "wall s", "requests", "retries", "429s", "USD", "saved by cache",
              "saved by batch", "prompt-cache tokens read / written", "complete"]
    body = [[r["label"], fmt_num(i["invocation"]), time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(i["started_at"])),
             fmt_num(i["wall_s"]), fmt_num(i["requests"]), fmt_num(i["retries"]), fmt_num(i["rate_limited"]),
             fmt_usd(i["cost_usd"]), fmt_usd(i["saved_by_cache_usd"]), fmt_usd(i.get("saved_by_batch_usd")),
             f"{fmt_num(i.get('prompt_cache_read_tokens'))} / {fmt_num(i.get('prompt_cache_write_tokens'))}",
             fmt_num(i["complete"])]
            for r in report.runs for i in r["invocations"]]
    return header, body


def run_task_table(run: dict[str, Any]) -> Table:
    """Per task: samples by status and what each task cost by purpose, with a total row
    equal to the run's figures."""
    header = (["task", "n", *STATUS_HEADERS, "score", "tokens in", "tokens out"] + [f"USD {p}" for p in PURPOSES]
              + ["USD total", "USD/sample", "p50 ms", "p95 ms", "p99 ms"])
    body = [[t["task"], fmt_num(t["n"]), *(fmt_num(t["statuses"][s]) for s in SAMPLE_STATUSES),
             fmt_score(t["score"]) + (f" ({t['partial']})" if t["partial"] and t["score"] is not None else ""),
             fmt_num(t["prompt_tokens"]), fmt_num(t["completion_tokens"]),
             *(fmt_usd(t["cost_usd"][p]) for p in PURPOSES), fmt_usd(t["cost_usd"]["total"]),
             fmt_usd(t["cost_per_sample_usd"]), fmt_num(t["latency"]["p50"]), fmt_num(t["latency"]["p95"]),
             fmt_num(t["latency"]["p99"])]
            for t in run["tasks"]]
    tokens, cost = run["tokens"]["total"], run["cost_usd"]
    body.append(["total", fmt_num(run["samples"]["total"]), *(fmt_num(run["samples"][s]) for s in SAMPLE_STATUSES),
                 run["partial"] or "", fmt_num(tokens["prompt_tokens"]), fmt_num(tokens["completion_tokens"]),
                 *(fmt_usd(cost[p]) for p in PURPOSES), fmt_usd(cost["total"]), fmt_usd(run["cost_per_sample_usd"]),
                 "", "", ""])
    return header, body


def run_node_table(run: Mapping[str, object]) -> tuple[str, Table] | None:
    """A Ray run's requests and workers per node in its last invocation (run.json's
    `backend`: the last invocation's runner), with the title that says so and the
    workers replaced; None for a local run or a Ray run.json without nodes."""
    placement = placement_of(run.get("backend"))
    if placement is None or not placement.nodes:
        return None
    replaced = replacements(placement)
    return (f"{run['label']} per Ray node (last invocation" + (f"; {replaced}" if replaced else "") + ")",
            node_table(placement))


def endpoint_table(report: Report) -> Table:
    """Per endpoint: answers served and failed attempts over the whole run (every
    invocation), health as the last invocation left it (so named), latency."""
    header = ["run", "endpoint", "served", "failed", "healthy (last inv.)", "p50 ms", "p95 ms", "p99 ms",
              "latency from"]
    body = [[r["label"], e["url"], fmt_num(e["served"]), fmt_num(e["failed"]), fmt_num(e["healthy"]),
             fmt_num(e["latency"]["p50"]), fmt_num(e["latency"]["p95"]), fmt_num(e["latency"]["p99"]),
             e["latency"]["source"]]
            for r in report.runs for e in r["endpoints"]]
    return header, body


def transpose(table: Table) -> Table:
    """Metrics as rows, runs as columns: fits a terminal when there are many metrics."""
    header, body = table
    return [header[0]] + [row[0] for row in body], [[h] + [row[i] for row in body] for i, h in enumerate(header) if i]


def pick(table: Table, names: list[str]) -> Table:
    header, body = table
    idx = [header.index(n) for n in names]
    return [header[i] for i in idx], [[row[i] for i in idx] for row in body]


def sources(board: Leaderboard) -> list[str]:
    return list(dict.fromkeys(r.source for r in board.rows if r.source))


def where_it_went(report: Report) -> list[str]:
    """One line per run naming the most expensive and the slowest task: the question a
    reader of a cost report asks first; first, runs on the simulator say their dollars
    are notional."""
    from ..pricing import NOTIONAL, is_simulator

    lines = [f"{r['label']}: {NOTIONAL}" for r in report.runs if is_simulator(str(r.get("model", "")))]
    for r in report.runs:
        tasks = r["tasks"]
        if not tasks:
            continue
        priciest = max(tasks, key=lambda t: t["cost_usd"]["total"])
        total = r["cost_usd"]["total"]
        slowest = max(tasks, key=lambda t: t["latency"]["p95"] or 0.0)
        share = priciest["cost_usd"]["total"] / total if total else 0.0
        lines.append(f"{r['label']}: most money on {priciest['task']} ({share:.0%} of {fmt_usd(total)} to produce "
                     f"the run), slowest task {slowest['task']} (p95 {fmt_num(slowest['latency']['p95'])} ms)")
    for r in report.runs:  # a server's usage booked at our bound (claims.py)
        if (line := usage_flag_line(r.get("usage_flags") or {})) is not None:
            lines.append(f"{r['label']}: {line}")
    return lines


def comparison_table(c: dict[str, Any]) -> Table:
    """B - A per score of two runs (report.compare), "not distinguishable" where the
    interval covers 0 (compare.RULE), and the row flagged where the permutation test
    says otherwise."""
    header = ["score", "A", "B", "B - A", "95% CI", "p", "", "tests"]
    body = [[line["key"], fmt_score(line["a"]), fmt_score(line["b"]), f"{line['diff']:+.2f}",
             f"[{line['ci'][0]:+.2f}, {line['ci'][1]:+.2f}]", f"{line['p']:.4f}",
             "" if line["distinguishable"] else "not distinguishable",
             line.get("disagreement", "")] for line in c["lines"]]
    return header, body


def comparison_notes(c: dict[str, Any]) -> list[str]:
    """The method, the one rule for the mark, and why the tests may disagree where a row says they do."""
    flagged = any(line.get("disagreement") for line in c["lines"])
    return [c["method"] + ".", c["rule"] + "."] + ([c["why_disagree"] + "."] if flagged else [])


def comparison_title(c: dict[str, object]) -> str:
    return f"{c['benchmark']}: B - A, A = {c['label_a']}, B = {c['label_b']}"


# -- Markdown ------------------------------------------------------------------------------
def _md(table: Table) -> str:
    header, body = table
    esc: Callable[[str], str] = lambda s: s.replace("|", "\\|")
    lines = ["| " + " | ".join(esc(h) for h in header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in body]
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    out = ["# asyncbench report", "", f"Generated {report.generated_at}.", ""]
    for board in report.leaderboards:
        out += [f"## {board.benchmark}", "", _md(headline_table(board)), ""]
        tt = task_table(board)
        if tt:
            out += [f"### {board.benchmark} by task", "", _md(tt), ""]
        for src in sources(board):
            out.append(f"Reference rows (kind `reference`): {src}.")
        out.append("")
    for c in report.comparisons:
        out += [f"## {comparison_title(c)}", "", " ".join(comparison_notes(c)), "", _md(comparison_table(c)), ""]
    out += ["## Cost and latency", "", _md(cost_table(report)), ""]
    out += ["### Serving latency", "", _md(serving_table(report)), ""]
    out += ["### Invocations", "", _md(invocation_table(report)), ""]
    out += [f"- {line}" for line in where_it_went(report)] + [""]
    for run in report.runs:
        out += [f"### {run['label']} per task", "", _md(run_task_table(run)), ""]
        if (nodes := run_node_table(run)) is not None:
            out += [f"### {nodes[0]}", "", _md(nodes[1]), ""]
    out += ["## Endpoints", "", _md(endpoint_table(report)), ""]
    return "\n".join(out)


# -- JSON ----------------------------------------------------------------------------------
def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False)


# -- terminal ------------------------------------------------------------------------------
def column_groups(table: Table, width: int) -> list[list[int]]:
    """The columns after the first, in groups that each fit `width` beside the first: a
    table wider than the terminal is printed as several (the first column repeated), not
    squeezed until every number wraps (the report at 80 columns once showed "14." over
    "86"). A cell keeps its natural width; a header may wrap at its spaces."""
    header, body = table

    def natural(i: int) -> int:
        cells = [len(row[i]) for row in body]
        return max([*cells, *(len(w) for w in header[i].split()), 1]) + 3  # padding and a border

    first = natural(0) + 1
    groups: list[list[int]] = [[]]
    used = first
    for i in range(1, len(header)):
        if groups[-1] and used + natural(i) > width:
            groups.append([])
            used = first
        groups[-1].append(i)
        used += natural(i)
    return groups


def print_tables(report: Report, console: Console | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table as RichTable

    console = console or Console(emoji=False)

    def show(title: str, table: Table) -> None:
        header, body = table
        groups = column_groups(table, console.width)
        for n, group in enumerate(groups, 1):
            part = f" ({n}/{len(groups)})" if len(groups) > 1 else ""
            t = RichTable(title=escape(title + part))
            for i in (0, *group):  # labels hold "[run id]", which rich would read as markup
                t.add_column(shown_markup(header[i]), justify="left" if i == 0 else "right", overflow="fold")
            for row in body:
                t.add_row(*(shown_markup(row[i]) for i in (0, *group)))
            console.print(t)

    for board in report.leaderboards:
        show(board.benchmark, headline_table(board))
        tt = task_table(board)
        if tt:
            show(f"{board.benchmark} by task", tt)
        for src in sources(board):
            console.print(f"[dim]reference rows: {escape(src)}[/]")
    for c in report.comparisons:
        show(comparison_title(c), comparison_table(c))
        for note in comparison_notes(c)[1:]:
            console.print(f"[dim]{escape(note)}[/]")
    show("cost and latency", transpose(cost_table(report)))
    show("serving latency by context length", pick(serving_table(report), [
        "run", "length", "n", "TTFT p50 ms", "TTFT p95", "TTFT p99", "TPOT p50 ms", "TPOT p95", "out tok/s"]))
    show("invocations", invocation_table(report))
    for line in where_it_went(report):
        console.print(shown_markup(line))
    for run in report.runs:
        show(f"{run['label']} per task",
             pick(run_task_table(run), ["task", "n", "answered", "from cache", "shared", "failed", "score", "USD total",
                                        "USD/sample", "p95 ms"]))
        if (nodes := run_node_table(run)) is not None:
            show(*nodes)
    show("endpoints", pick(endpoint_table(report), ["run", "endpoint", "served", "failed", "p50 ms",
                                                    "p95 ms", "p99 ms"]))
