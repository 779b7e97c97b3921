"""The terminal summary printed at the end of a run: scores, then where the money and the
time went. How scores are shown (and all that is particular to one benchmark) is in
score_lines.py; this module knows no benchmark by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rich.console import Console
from rich.table import Table

from ..json_values import as_object
from ..ledger import SAMPLE_STATUSES, TaskFigures, usage_flag_line
from ..pricing import NOTIONAL, is_simulator
from ..run_summary import FailureGroup, RunSummary
from ..serving import serving_lines
from ..terminal import shown_markup
from .placement import placement_lines, placement_of
from .score_lines import _fmt, plus_minus, readable, score_lines, score_notes, score_rows, score_title, scores_of

__all__ = ["plus_minus", "print_summary", "readable"]


def _usd(v: float, unpriced: bool) -> str:
    return f"${v:.4f}" + (" (unpriced model: unknown)" if unpriced else "")


def _purposes(block: Mapping[str, float], fmt: Callable[[float], str]) -> str:
    """"total (eval x + judge y + prior z)", purposes with nothing left out."""
    parts = [f"{p} {fmt(v)}" for p, v in block.items() if p != "total" and v]
    return f"{fmt(block['total'])}" + (f" ({' + '.join(parts)})" if len(parts) > 1 else "")


def _partial(t: TaskFigures) -> str:
    """"partial 25/42" for a task with samples not settled, else "" (ledger.partial_label)."""
    total = t.get("n", 0)
    return "" if t.get("settled", total) == total else f"partial {t['settled']}/{total}"


def print_summary(summary: RunSummary, console: Console | None = None) -> None:
    """Scores (subset scores marked partial), then the ledger: samples by status, this
    invocation (a Ray run's requests and workers per node: placement.py), and what the
    run cost to produce by purpose and by task."""
    console = console or Console(emoji=False)
    console.print(f"[bold]{shown_markup(summary.benchmark)}[/] with [bold]{shown_markup(summary.model)}[/], "
                  f"run {shown_markup(summary.run_id)}")
    if summary.out_dir:
        console.print(f"run.json: {shown_markup(summary.out_dir)}/run.json")
    console.print(_score_table(summary))
    for line in score_lines(summary):
        console.print(line)
    _ledger_lines(console, summary)
    _truncation_lines(console, summary)
    _failure_lines(console, summary)
    step = summary.next_step or "run the same command again to retry what is not settled"
    for hint in summary.hints:
        if hint != step:  # the closing line says it
            console.print(f"[bold]hint[/]: {shown_markup(hint)}")
    if summary.partial:
        console.print(f"[bold]{shown_markup(summary.partial)}[/]: {shown_markup(step)}; scores above are on the settled "
                      "samples only")


def _score_table(summary: RunSummary) -> Table:
    """Each task's score, samples and cost, then the rows the scores add (score_rows)."""
    scores = scores_of(summary)
    by_task, partial = summary.by_task, summary.partial
    ci = scores.ci95
    table = Table(title=score_title(summary) + (f" — {partial}" if partial else ""), show_lines=False)
    table.add_column("task")
    table.add_column("score ±95% CI" if ci else "score", justify="right")
    table.add_column("samples", justify="right")
    table.add_column("USD", justify="right")
    scored = scores.by_task
    for task, value in scored.items():
        t = by_task.get(task)
        mark = _partial(t) if t else ""
        table.add_row(task, _fmt(value) + plus_minus(as_object(ci.get("by_task")).get(task))
                      + (f" ({mark})" if mark else ""), str(t["n"]) if t else "",
                      f"{t['cost_usd'].get('total', 0.0) if t else 0.0:.4f}")
    for task, t in by_task.items():  # tasks with no score (every sample failed, or excluded)
        if task not in scored:
            table.add_row(task, "-" + (f" ({_partial(t)})" if _partial(t) else ""), str(t["n"]),
                          f"{t['cost_usd']['total']:.4f}")
    table.add_row("[bold]total[/]", "", str(summary.samples["total"]), f"{summary.cost_usd['total']:.4f}")
    for label, text in score_rows(summary):
        table.add_row(label, text, "", "")
    return table


def _ledger_lines(console: Console, summary: RunSummary) -> None:
    """Samples by status, this invocation's requests, time and spend (a Ray run's per
    node), and what the run cost to produce (every invocation) by purpose."""
    partial, unpriced = summary.partial, bool(summary.unpriced)
    n = summary.samples
    console.print(f"samples {n['total']}: " + ", ".join(f"{k.replace('_', ' ')} {n[k]}" for k in SAMPLE_STATUSES)
                  + (f" — [bold red]{partial}[/]" if partial else " — complete"))
    this = summary.this_invocation
    lat = summary.latency_ms
    invs = summary.invocations
    console.print(
        f"this invocation (#{this['invocation']} of {len(invs)}): requests {this['requests']} "
        f"(retries {this['retries']}, 429s {this['rate_limited']}) in {this['wall_s']:.1f}s, "
        f"{summary.throughput_rps or 0:.1f} req/s; latency ms p50 {_fmt(lat.get('p50'))} "
        f"p95 {_fmt(lat.get('p95'))} p99 {_fmt(lat.get('p99'))} ({lat.get('source')}); "
        f"spent {_usd(this['cost_usd'], unpriced)}, saved by cache ${this['saved_by_cache_usd']:.4f}"
        + (f", by the batch discount ${this['saved_by_batch_usd']:.4f}" if this.get("saved_by_batch_usd") else "")
        + (f"; provider prompt cache: {this['prompt_cache_read_tokens']:,} tokens read, "
           f"{this['prompt_cache_write_tokens']:,} written"
           if this.get("prompt_cache_read_tokens") or this.get("prompt_cache_write_tokens") else ""))
    _block(console, placement_lines(placement_of(summary.backend)))  # a Ray run's nodes; none for a local run
    tokens = summary.tokens
    console.print(
        f"to produce this run ({len(invs)} invocation{'s' if len(invs) != 1 else ''}): "
        f"cost {_purposes(summary.cost_usd, lambda v: f'${v:.4f}')}"
        + (" [unpriced model: unknown]" if unpriced else "")
        + f"; tokens in {_purposes({p: t['prompt_tokens'] for p, t in tokens.items()}, lambda v: f'{v:,}')}"
        f", out {_purposes({p: t['completion_tokens'] for p, t in tokens.items()}, lambda v: f'{v:,}')}")
    if (flagged := usage_flag_line(summary.usage_flags)) is not None:
        console.print(f"[bold yellow]{shown_markup(flagged)}[/]")
    if summary.serving:
        _block(console, serving_lines(summary.serving))
    if is_simulator(summary.model):
        console.print(f"[dim]{NOTIONAL}[/]")


def _block(console: Console, lines: list[str]) -> None:
    """A heading (wrapped to the terminal), then a table's rows, never wrapped."""
    for i, line in enumerate(lines):
        console.print(shown_markup(line), highlight=False, soft_wrap=i > 0)


def _truncation_lines(console: Console, summary: RunSummary) -> None:
    """How many prompts were cut to what budget with which tokenizer, and the tasks sent
    as chat though pred.py uses no template."""
    trunc = summary.truncation
    budget = trunc.get("budget") or {}
    if trunc.get("max_input_tokens") or budget.get("max_total_tokens"):
        total = f", context {budget['max_total_tokens']}" if budget.get("max_total_tokens") else ""
        tokenizer = trunc.get("tokenizer", "")
        if trunc.get("tokenizer_stand_in"):
            tokenizer += " as a stand-in for the model's own: pass --tokenizer hf:REPO for it"
        console.print(f"truncation: {trunc['n_truncated']} prompts cut in the middle (budget "
                      f"{trunc.get('max_input_tokens')}{total}, from {trunc['source']}; tokenizer {tokenizer}), "
                      f"{trunc['tokens_removed']:,} tokens removed")
    if trunc.get("no_template_sent_as_chat"):
        console.print(f"sent as one chat message though pred.py uses no chat template (the API has no completion "
                      f"endpoint): {', '.join(trunc['no_template_sent_as_chat'])}")


def _failure_lines(console: Console, summary: RunSummary) -> None:
    """Failures, one line per (status, error); then the samples left out, with their
    reasons (a data defect by file and line), and what the scores could not cover:
    settled, so no re-run is advised for them."""
    groups = summary.failure_groups
    if groups is None:  # a run.json written before failures were grouped
        groups = [FailureGroup(status=f["status"], error=f["error"], n=1, sample_ids=[f["sample_id"]])
                  for f in summary.failures]
    for g in groups:
        if g["status"] != "skipped_budget":  # those are counted above; the hint says what to do
            more = f" and {g['n'] - len(g['sample_ids']):,} more" if g["n"] > len(g["sample_ids"]) else ""
            console.print(f"[red]{g['status'].replace('_', ' ')}[/] {shown_markup(', '.join(g['sample_ids']))}{more}: "
                          f"{shown_markup(g['error'])}")
    excluded = summary.excluded
    named = excluded.get("samples") or []
    for reason, count in (excluded.get("by_reason") or {}).items():
        ids = [e["sample_id"] for e in named if e["reason"] == reason]
        which = ", ".join(ids[:3]) + (" ..." if count > 3 else "")
        console.print(f"[yellow]excluded[/] {count} ({shown_markup(which)}): {shown_markup(reason)}")
    for line in score_notes(summary):
        console.print(line)
