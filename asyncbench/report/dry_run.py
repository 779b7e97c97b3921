"""The dry run as a table (`run --dry-run`; `--json` prints the JSON): requests, tokens
and dollars by purpose, each labelled exact or upper bound, and their totals over every
purpose (one total of eval tokens beside one of all dollars once disagreed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from ..run_summary import DryRunSummary

WHY_UPPER = {"eval": "output priced at each request's max tokens",
             "judge": "every judge call the answers may need, none found cached",
             "prior": "every prior-knowledge call, none found cached"}


def _usd(v: object) -> str:
    return f"${v:,.4f}" if isinstance(v, (int, float)) else str(v)


def print_dry_run(plan: DryRunSummary, console: Console | None = None) -> None:
    console = console or Console(emoji=False)
    console.print(f"[bold]dry run[/]: {plan['benchmark']} with {plan['model']}  run {plan['run_id']}  (nothing sent)")
    left = f", {plan['left_out_as_stored']} left out as the stored run's filter left them" \
        if plan.get("left_out_as_stored") else ""
    checked = "" if plan.get("cache_checked") else " (no cache to check)"
    console.print(f"samples {plan['n_samples']:,}; eval requests {plan['requests']:,}: {plan['cached']:,} cached{checked}, "
                  f"{plan['to_send']:,} to send{left}")
    table = Table(show_lines=False)
    for name, justify in (("purpose", "left"), ("requests", "right"), ("tokens in", "right"),
                          ("out (max)", "right"), ("USD", "right"), ("estimate", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    notes = []
    for purpose, p in plan["by_purpose"].items():
        table.add_row(purpose, f"{p['requests']:,}", f"{p['prompt_tokens']:,}", f"{p['max_output_tokens']:,}",
                      _usd(p["cost_usd"]), p["estimate"])
        if p["estimate"] != "exact":
            notes.append(f"{purpose}: upper bound, {WHY_UPPER.get(purpose, 'at most')}")
        elif p.get("cached"):
            notes.append(f"{purpose}: exact, the stored run's {p['cached']:,} calls are cached")
    table.add_row("[bold]total[/]", f"{plan['estimated_requests']:,}", f"{plan['estimated_prompt_tokens']:,}",
                  f"{plan['estimated_max_output_tokens']:,}",
                  _usd(plan["estimated_cost_usd"]), plan["estimate"])
    console.print(table)
    for note in notes:
        console.print(note)
    _judge_line(plan, console)
    modes = plan["by_purpose"]["eval"].get("cost_usd_by_mode") or {}
    if modes and isinstance(modes.get("list"), (int, float)) and plan["to_send"]:
        console.print(f"eval by mode: list {_usd(modes['list'])}, --batch {_usd(modes['batch'])}, prompt cache "
                      f"{_usd(modes['prompt_cache'])}, both {_usd(modes['batch_prompt_cache'])}")
    trunc = plan.get("truncation") or {}
    if trunc.get("n_truncated"):
        console.print(f"truncation: {trunc['n_truncated']:,} prompts cut, {trunc['tokens_removed']:,} tokens removed")
    console.print(f"tokens counted with {plan['token_counting']}; `--json` prints all of this as JSON")


def _judge_line(plan: DryRunSummary, console: Console) -> None:
    """The judge priced, or, with none given to a benchmark that needs one, that the run
    will refuse without --judge and what its judge calls would be (not priced)."""
    note = plan.get("judge")
    if not note:
        return
    if note["model"] is not None:
        p = plan["by_purpose"].get("judge")
        if p is not None:
            console.print(f"judge: {note['model']} ({p['requests']:,} calls, ~{p['prompt_tokens']:,} tokens in, "
                          f"{_usd(p['cost_usd'])})", markup=False)
        return
    calls = note["unpriced_calls"] or {}
    console.print(f"judge: none given; the run needs --judge SPEC and will not start without it "
                  f"({calls.get('requests', 0):,} judge calls, ~{calls.get('prompt_tokens', 0):,} tokens in, "
                  "not priced and not in the total)", markup=False)
