"""The terminal summary printed at the end of a run: scores, then where the money and the
time went."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ..ledger import SAMPLE_STATUSES, partial_label
from ..pricing import NOTIONAL, is_simulator


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    if v is None:
        return "-"
    return str(v)


def readable(value: Any, interval: Any = None) -> str:
    """A score tree as a person reads it, never a Python repr: numbers to 2 decimals (with
    " ±h" where `interval`, the same tree of [lo, hi], has one), lists joined by commas,
    mappings as "key value, ..." with nested ones in parentheses."""
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            sub = interval.get(k) if isinstance(interval, dict) else None
            text = readable(v, sub)
            parts.append(f"{str(k).replace('_', ' ')} " + (f"({text})" if isinstance(v, dict) else text))
        return ", ".join(parts)
    if isinstance(value, (list, tuple)):
        return ", ".join(readable(v) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return _fmt(value) + plus_minus(interval)
    return _fmt(value)


def plus_minus(interval: Any) -> str:
    """" ±h": the half-width of a [lo, hi] interval (a percentile interval need not be
    symmetric; run.json has both ends), or "" when there is none."""
    if isinstance(interval, (list, tuple)) and len(interval) == 2 and None not in interval:
        return f" ±{(interval[1] - interval[0]) / 2:.2f}"
    return ""


def _usd(v: float, unpriced: bool) -> str:
    return f"${v:.4f}" + (" (unpriced model: unknown)" if unpriced else "")


def _purposes(block: dict[str, Any], fmt: Any) -> str:
    """"total (eval x + judge y + prior z)", purposes with nothing left out."""
    parts = [f"{p} {fmt(v)}" for p, v in block.items() if p != "total" and v]
    return f"{fmt(block['total'])}" + (f" ({' + '.join(parts)})" if len(parts) > 1 else "")


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """Scores (subset scores marked partial), then the ledger: samples by status, this
    invocation, and what the run cost to produce by purpose and by task."""
    console = console or Console()
    scores = summary.get("scores") or {}
    by_task = summary.get("by_task") or {}
    partial = summary.get("partial")
    unpriced = bool(summary.get("unpriced"))
    console.print(f"[bold]{summary['benchmark']}[/] with [bold]{summary['model']}[/], run {summary['run_id']}")
    if summary.get("out_dir"):
        console.print(f"run.json: {summary['out_dir']}/run.json")

    est = scores.get("estimate")
    title = "Scores" + ((" (averages over the samples asked, not full-LongBench scores: the estimate follows)"
                         if isinstance(est, dict) and est.get("method") == "adaptive" else
                         " (averages over the 237 anchors, not full-LongBench scores: the estimate follows)")
                        if "estimate" in scores else "")
    ci = scores.get("ci95") or {}
    table = Table(title=title + (f" — {partial}" if partial else ""), show_lines=False)
    table.add_column("task")
    table.add_column("score ±95% CI" if ci else "score", justify="right")
    table.add_column("samples", justify="right")
    table.add_column("USD", justify="right")
    for task, value in (scores.get("by_task") or {}).items():
        t = by_task.get(task) or {}
        mark = partial_label(t) if t else ""
        table.add_row(task, _fmt(value) + plus_minus((ci.get("by_task") or {}).get(task))
                      + (f" ({mark})" if mark else ""), str(t.get("n", "")),
                      f"{(t.get('cost_usd') or {}).get('total', 0.0):.4f}")
    for task, t in by_task.items():  # tasks with no score (every sample failed, or excluded)
        if task not in (scores.get("by_task") or {}):
            table.add_row(task, "-" + (f" ({partial_label(t)})" if partial_label(t) else ""), str(t["n"]),
                          f"{t['cost_usd']['total']:.4f}")
    table.add_row("[bold]total[/]", "", str(summary["samples"]["total"]), f"{summary['cost_usd']['total']:.4f}")
    for cat, value in (scores.get("by_category") or {}).items():
        table.add_row(f"[italic]{cat}[/]", _fmt(value) + plus_minus((ci.get("by_category") or {}).get(cat))
                      + (" (partial)" if partial else ""), "", "")
    for key, value in scores.items():
        if key == "overall" and "anchor_average" in scores:
            continue  # MiniLongBench: the overall is the estimate, on its own line below
        if isinstance(value, list):  # e.g. the tasks an overall covers: a line below the table
            continue
        if key.startswith(("overall", "anchor_average")) and not isinstance(value, dict):
            table.add_row(f"[bold]{key.replace('_', ' ')}[/]", _overall(value, partial, ci.get(key)), "", "")
        elif key == "overall" and isinstance(value, dict):
            for k, v in value.items():
                table.add_row(f"[bold]overall {k}[/]", _overall(v, partial), "", "")
    console.print(table)
    for key, value in scores.items():
        if key.startswith("overall") and isinstance(value, list):
            console.print(f"[bold]{key.replace('_', ' ')}[/]: {readable(value)}")

    est = scores.get("estimate")
    if isinstance(est, dict) and est.get("available") and est.get("method") == "adaptive":
        lo, hi = est["ci95"]
        console.print(
            f"[bold]estimated full LongBench overall[/] (adaptive): {100 * est['overall']:.2f} "
            f"(95% CI {100 * lo:.2f}-{100 * hi:.2f}, SE {100 * est['se']:.2f}; target {100 * est['target_se']:.2f}) "
            f"from {est['samples_used']} samples and {est['tokens']:,} tokens; stopped: {est['stop_reason']}")
    elif isinstance(est, dict) and est.get("available"):
        cost = est.get("token_cost") or {}
        saved = cost.get("saved_prompt_tokens_estimate")
        ci90 = est.get("overall_ci90")
        others = ", ".join(f"{m} {100 * est[m]['overall']:.2f}" for m in ("irt", "direct", "blend") if m in est)
        console.print(
            f"[bold]overall[/] (estimated full LongBench, {est['method']}): [bold]{100 * est['overall']:.2f}[/]"
            + (f" [90% interval {100 * ci90[0]:.2f}-{100 * ci90[1]:.2f}]" if ci90 else "")
            + f"; {others}; "
            f"the 237 anchors cost {100 * cost.get('fraction', 0):.1f}% of the full benchmark's tokens"
            + (f", ~{saved:,} prompt tokens saved" if saved else ""))
    elif isinstance(est, dict):
        console.print(f"[bold]estimate[/]: not available ({est.get('reason')})")
    for key in ("by_length", "longscore", "diff_16k_minus_4k"):
        if key in scores and scores[key] not in (None, {}):
            console.print(f"[bold]{key.replace('_', ' ')}[/]: {readable(scores[key], ci.get(key))}"
                          + (f" ({partial})" if partial else ""))

    n = summary["samples"]
    console.print(f"samples {n['total']}: " + ", ".join(f"{k.replace('_', ' ')} {n[k]}" for k in SAMPLE_STATUSES)
                  + (f" — [bold red]{partial}[/]" if partial else " — complete"))
    this = summary["this_invocation"]
    lat = summary.get("latency_ms") or {}
    invs = summary["invocations"]
    console.print(
        f"this invocation (#{this['invocation']} of {len(invs)}): requests {this['requests']} "
        f"(retries {this['retries']}, 429s {this['rate_limited']}) in {this['wall_s']:.1f}s, "
        f"{summary.get('throughput_rps') or 0:.1f} req/s; latency ms p50 {_fmt(lat.get('p50'))} "
        f"p95 {_fmt(lat.get('p95'))} p99 {_fmt(lat.get('p99'))} ({lat.get('source')}); "
        f"spent {_usd(this['cost_usd'], unpriced)}, saved by cache ${this['saved_by_cache_usd']:.4f}"
        + (f", by the batch discount ${this['saved_by_batch_usd']:.4f}" if this.get("saved_by_batch_usd") else "")
        + (f"; provider prompt cache: {this['prompt_cache_read_tokens']:,} tokens read, "
           f"{this['prompt_cache_write_tokens']:,} written"
           if this.get("prompt_cache_read_tokens") or this.get("prompt_cache_write_tokens") else ""))
    tokens = summary["tokens"]
    console.print(
        f"to produce this run ({len(invs)} invocation{'s' if len(invs) != 1 else ''}): "
        f"cost {_purposes(summary['cost_usd'], lambda v: f'${v:.4f}')}"
        + (" [unpriced model: unknown]" if unpriced else "")
        + f"; tokens in {_purposes({p: t['prompt_tokens'] for p, t in tokens.items()}, lambda v: f'{v:,}')}"
        f", out {_purposes({p: t['completion_tokens'] for p, t in tokens.items()}, lambda v: f'{v:,}')}")
    if is_simulator(str(summary.get("model", ""))):
        console.print(f"[dim]{NOTIONAL}[/]")
    trunc = summary.get("truncation") or {}
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
    for f in summary.get("failures") or []:
        if f["status"] != "skipped_budget":  # those are counted above; the hint says what to do
            console.print(f"[red]{f['status'].replace('_', ' ')}[/] {f['sample_id']}: {f['error']}")
    _excluded(console, summary.get("excluded") or {}, scores)
    step = summary.get("next_step") or "run the same command again to retry what is not settled"
    for hint in summary.get("hints") or []:
        if hint != step:  # the closing line says it
            console.print(f"[bold]hint[/]: {hint}")
    if partial:
        console.print(f"[bold]{partial}[/]: {step}; scores above are on the settled samples only")


def _excluded(console: Console, excluded: dict[str, Any], scores: dict[str, Any]) -> None:
    """Samples left out, with their reasons (a data defect by file and line), and what a
    benchmark could not build: settled, so no re-run is advised for them."""
    named = excluded.get("samples") or []
    for reason, count in (excluded.get("by_reason") or {}).items():
        ids = [e["sample_id"] for e in named if e["reason"] == reason]
        which = ", ".join(ids[:3]) + (" ..." if count > 3 else "")
        console.print(f"[yellow]excluded[/] {count} ({which}): {reason}")
    for task, cells in (scores.get("unbuildable") or {}).items():
        for length, why in cells.items():
            console.print(f"[yellow]not built[/] {task} at {length}: {why}")
    covered = scores.get("overall_tasks")
    if isinstance(covered, list):
        asked = list(dict.fromkeys([*(scores.get("by_task") or {}), *(scores.get("unbuildable") or {})]))
        left = [t for t in asked if t not in covered]
        if left:
            console.print(f"overall covers {len(covered)} of {len(asked)} tasks; not {', '.join(left)} "
                          "(not built or not scored at every length)")


def _overall(value: Any, partial: str | None, interval: Any = None) -> str:
    """A partial run's overall is never a plain number."""
    text = _fmt(value) + (plus_minus(interval) if value is not None else "")
    return f"({text}) {partial}" if partial else text
