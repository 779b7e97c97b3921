"""The terminal summary printed at the end of a run: scores, then where the money and the
time went."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    if v is None:
        return "-"
    return str(v)


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    scores = summary.get("scores") or {}
    console.print(f"[bold]{summary['benchmark']}[/] with [bold]{summary['model']}[/]  run {summary['run_id']}"
                  f"  -> {summary.get('out_dir', '')}/run.json")

    table = Table(title="Scores", show_lines=False)
    table.add_column("task")
    table.add_column("score", justify="right")
    for task, value in (scores.get("by_task") or {}).items():
        table.add_row(task, _fmt(value))
    for cat, value in (scores.get("by_category") or {}).items():
        table.add_row(f"[italic]{cat}[/]", _fmt(value))
    for key, value in scores.items():
        if key.startswith("overall") and not isinstance(value, dict):
            table.add_row(f"[bold]{key}[/]", _fmt(value))
        elif key == "overall" and isinstance(value, dict):
            for k, v in value.items():
                table.add_row(f"[bold]overall {k}[/]", _fmt(v))
    console.print(table)

    est = scores.get("estimate")
    if isinstance(est, dict) and est.get("available"):
        cost = est.get("token_cost") or {}
        saved = cost.get("saved_prompt_tokens_estimate")
        console.print(
            f"[bold]estimated full LongBench overall[/] ({est['method']}): {100 * est['overall']:.2f}"
            f"  (irt {100 * est['irt']['overall']:.2f}, direct {100 * est['direct']['overall']:.2f}); "
            f"the 237 anchors cost {100 * cost.get('fraction', 0):.1f}% of the full benchmark's tokens"
            + (f", ~{saved:,} prompt tokens saved" if saved else ""))
    elif isinstance(est, dict):
        console.print(f"[bold]estimate[/]: not available ({est.get('reason')})")
    for key in ("by_length", "longscore", "diff_16k_minus_4k"):
        if key in scores and scores[key] not in (None, {}):
            console.print(f"[bold]{key}[/]: {scores[key]}")

    lat = summary.get("latency_ms") or {}
    trunc = summary.get("truncation") or {}
    console.print(
        f"samples {summary['n_samples']}: completed {summary['n_completed']}, failed {summary['n_failed']}, "
        f"cached {summary['n_cached']}, skipped by budget {summary.get('n_skipped_budget', 0)}\n"
        f"requests {summary['requests_sent']} (retries {summary['retries']}, 429s {summary['rate_limited']}) "
        f"in {summary['wall_s']:.1f}s, {summary.get('throughput_rps') or 0:.1f} req/s; latency ms "
        f"p50 {_fmt(lat.get('p50'))} p95 {_fmt(lat.get('p95'))} p99 {_fmt(lat.get('p99'))} ({lat.get('source')})\n"
        f"tokens in {summary['prompt_tokens']:,} out {summary['completion_tokens']:,}; "
        f"cost ${summary['cost_usd']:.4f}, saved by cache ${summary['cost_saved_by_cache_usd']:.4f}"
    )
    by_task = summary.get("by_task_cost") or {}
    spent = {k: v for k, v in by_task.items() if v["cost_usd"] > 0}
    timed = {k: v for k, v in by_task.items() if v["latency_ms"].get("p50") is not None}
    if spent or timed:
        parts = []
        if spent:
            top = max(spent, key=lambda k: spent[k]["cost_usd"])
            total = sum(v["cost_usd"] for v in spent.values())
            parts.append(f"most spend: {top} ${spent[top]['cost_usd']:.4f} "
                         f"({100 * spent[top]['cost_usd'] / total:.0f}% of ${total:.4f})")
        if timed:
            slow = max(timed, key=lambda k: timed[k]["latency_ms"]["p50"])
            parts.append(f"slowest: {slow} (p50 {timed[slow]['latency_ms']['p50']:.0f} ms)")
        console.print("where it went: " + "; ".join(parts))
    for purpose, t in (summary.get("by_purpose") or {}).items():
        if purpose != "eval":
            console.print(f"  {purpose}: {t['requests']} requests, {t['cached']} cached, "
                          f"{t['prompt_tokens']:,}+{t['completion_tokens']:,} tokens, ${t['cost_usd']:.4f}")
    if trunc.get("max_input_tokens"):
        console.print(f"truncation: {trunc['n_truncated']} prompts cut in the middle to {trunc['max_input_tokens']} "
                      f"tokens ({trunc['source']}), {trunc['tokens_removed']:,} tokens removed")
    for f in summary.get("failures") or []:
        console.print(f"[red]failed[/] {f['sample_id']}: {f['error']}")
