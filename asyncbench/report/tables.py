"""Text renderings of a Report: Markdown, JSON and a terminal table.

A leaderboard is shown as two tables so it stays readable: the headline columns (overall,
categories, length bins, LongScore) with one row per run or published model, then the
per-task scores transposed (one row per task, one column per run or published model).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .model import Column, Leaderboard, Report

Table = tuple[list[str], list[list[str]]]  # header, body


def fmt_score(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def fmt_usd(v: float | None) -> str:
    if v is None:
        return "-"
    return f"${v:.4f}" if abs(v) >= 0.0001 or v == 0 else f"${v:.2e}"


def fmt_num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.2f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def split_columns(board: Leaderboard) -> tuple[list[Column], list[Column]]:
    headline = [c for c in board.columns if not c.key.startswith("task:")]
    tasks = [c for c in board.columns if c.key.startswith("task:")]
    return headline, tasks


def headline_table(board: Leaderboard) -> Table:
    headline, _ = split_columns(board)
    header = ["model", "kind"] + [c.label for c in headline]
    # published rows with no headline number (BAMBOO prints per-dataset scores only) appear in the task table
    rows = [r for r in board.rows if r.kind == "run" or any(r.cells.get(c.key) is not None for c in headline)]
    body = [[row.label, row.kind] + [fmt_score(row.cells.get(c.key)) for c in headline] for row in rows]
    return header, body


def task_table(board: Leaderboard) -> Table | None:
    _, tasks = split_columns(board)
    if not tasks:
        return None
    rows = [r for r in board.rows if any(r.cells.get(c.key) is not None for c in tasks)]
    header = ["task"] + [r.label + (" (paper)" if r.kind == "reference" else "") for r in rows]
    body = [[c.label] + [fmt_score(r.cells.get(c.key)) for r in rows] for c in tasks]
    return header, body


def cost_table(report: Report) -> Table:
    header = ["run", "samples", "ok", "failed", "cached", "requests", "retries", "429s", "tokens in", "tokens out",
              "cached in", "USD spent", "USD saved by cache", "judge USD", "USD/sample", "wall s", "req/s",
              "p50 ms", "p95 ms", "p99 ms"]
    body = []
    for r in report.runs:
        lat = r["latency_ms"]
        body.append([r["label"], fmt_num(r["n_samples"]), fmt_num(r["n_completed"]), fmt_num(r["n_failed"]),
                     fmt_num(r["n_cached"]), fmt_num(r["requests_sent"]), fmt_num(r["retries"]),
                     fmt_num(r["rate_limited"]), fmt_num(r["prompt_tokens"]), fmt_num(r["completion_tokens"]),
                     fmt_num(r["cached_prompt_tokens"]), fmt_usd(r["cost_usd"]), fmt_usd(r["cost_saved_by_cache_usd"]),
                     fmt_usd(r["judge_cost_usd"]), fmt_usd(r["cost_per_sample_usd"]), fmt_num(r["wall_s"]),
                     fmt_num(r["throughput_rps"]), fmt_num(lat.get("p50")), fmt_num(lat.get("p95")),
                     fmt_num(lat.get("p99"))])
    return header, body


def run_task_table(run: dict[str, Any]) -> Table:
    header = ["task", "n", "ok", "failed", "cached", "score", "tokens in", "tokens out", "USD spent",
              "USD saved", "USD/sample", "p50 ms", "p95 ms", "p99 ms"]
    body = [[t["task"], fmt_num(t["n"]), fmt_num(t["n_ok"]), fmt_num(t["n_failed"]), fmt_num(t["n_cached"]),
             fmt_score(t["score"]), fmt_num(t["prompt_tokens"]), fmt_num(t["completion_tokens"]),
             fmt_usd(t["cost_usd"]), fmt_usd(t["cost_saved_usd"]), fmt_usd(t["cost_per_sample_usd"]),
             fmt_num(t["latency"]["p50"]), fmt_num(t["latency"]["p95"]), fmt_num(t["latency"]["p99"])]
            for t in run["tasks"]]
    return header, body


def endpoint_table(report: Report) -> Table:
    header = ["run", "endpoint", "served", "failed", "healthy", "p50 ms", "p95 ms", "p99 ms", "latency from"]
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
    reader of a cost report asks first."""
    lines = []
    for r in report.runs:
        tasks = r["tasks"]
        if not tasks:
            continue
        priciest = max(tasks, key=lambda t: t["cost_usd"] + t["cost_saved_usd"])
        total = sum(t["cost_usd"] + t["cost_saved_usd"] for t in tasks)
        slowest = max(tasks, key=lambda t: t["latency"]["p95"] or 0.0)
        share = (priciest["cost_usd"] + priciest["cost_saved_usd"]) / total if total else 0.0
        lines.append(f"{r['label']}: most money on {priciest['task']} ({share:.0%} of {fmt_usd(total)} at list price), "
                     f"slowest task {slowest['task']} (p95 {fmt_num(slowest['latency']['p95'])} ms)")
    return lines


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
    out += ["## Cost and latency", "", _md(cost_table(report)), ""]
    out += [f"- {line}" for line in where_it_went(report)] + [""]
    for run in report.runs:
        out += [f"### {run['label']} per task", "", _md(run_task_table(run)), ""]
    out += ["## Endpoints", "", _md(endpoint_table(report)), ""]
    return "\n".join(out)


# -- JSON ----------------------------------------------------------------------------------
def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False)


# -- terminal ------------------------------------------------------------------------------
def print_tables(report: Report, console: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table as RichTable

    console = console or Console()

    def show(title: str, table: Table) -> None:
        header, body = table
        t = RichTable(title=escape(title))
        for i, h in enumerate(header):  # labels hold "[run id]", which rich would read as markup
            t.add_column(escape(h), justify="left" if i == 0 else "right", overflow="fold")
        for row in body:
            t.add_row(*(escape(c) for c in row))
        console.print(t)

    for board in report.leaderboards:
        show(board.benchmark, headline_table(board))
        tt = task_table(board)
        if tt:
            show(f"{board.benchmark} by task", tt)
        for src in sources(board):
            console.print(f"[dim]reference rows: {escape(src)}[/]")
    show("cost and latency", transpose(cost_table(report)))
    for line in where_it_went(report):
        console.print(escape(line))
    for run in report.runs:
        show(f"{run['label']} per task",
             pick(run_task_table(run), ["task", "n", "score", "USD spent", "USD/sample", "p50 ms", "p95 ms", "p99 ms"]))
    show("endpoints", pick(endpoint_table(report), ["run", "endpoint", "served", "failed", "p50 ms", "p95 ms", "p99 ms"]))
