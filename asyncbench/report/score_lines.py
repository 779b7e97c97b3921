"""How the terminal summary shows a run's scores: the rows they add to its table and the
lines after it. What is particular to one benchmark (MiniLongBench's estimate from its
237 anchors, 100-LongBench's LongScore and the cells it could not build, BAMBOO's
lengths) lives here, so `summary.print_summary` knows no benchmark by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..run_summary import RunSummary


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


def _overall(value: Any, partial: str | None, interval: Any = None) -> str:
    """A partial run's overall is never a plain number."""
    text = _fmt(value) + (plus_minus(interval) if value is not None else "")
    return f"({text}) {partial}" if partial else text


def _scores(summary: RunSummary) -> Mapping[str, Any]:
    return summary.scores or {}


def score_title(summary: RunSummary) -> str:
    """The score table's title: what its numbers are averages over."""
    scores = _scores(summary)
    est = scores.get("estimate")
    return "Scores" + ((" (averages over the samples asked, not full-LongBench scores: the estimate follows)"
                        if isinstance(est, dict) and est.get("method") == "adaptive" else
                        " (averages over the 237 anchors, not full-LongBench scores: the estimate follows)")
                       if "estimate" in scores else "")


def score_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """(label, score) rows the table shows below its tasks: categories, then overalls."""
    scores = _scores(summary)
    partial = summary.partial
    ci = scores.get("ci95") or {}
    rows = []
    for cat, value in (scores.get("by_category") or {}).items():
        rows.append((f"[italic]{cat}[/]", _fmt(value) + plus_minus((ci.get("by_category") or {}).get(cat))
                     + (" (partial)" if partial else "")))
    for key, value in scores.items():
        if key == "overall" and "anchor_average" in scores:
            continue  # MiniLongBench: the overall is the estimate, on its own line below
        if isinstance(value, list):  # e.g. the tasks an overall covers: a line below the table
            continue
        if key.startswith(("overall", "anchor_average")) and not isinstance(value, dict):
            rows.append((f"[bold]{key.replace('_', ' ')}[/]", _overall(value, partial, ci.get(key))))
        elif key == "overall" and isinstance(value, dict):
            for k, v in value.items():
                rows.append((f"[bold]overall {k}[/]", _overall(v, partial)))
    return rows


def score_lines(summary: RunSummary) -> list[str]:
    """The lines after the score table: what an overall covers, MiniLongBench's estimate
    of the full LongBench, and scores by length (BAMBOO, 100-LongBench's LongScore)."""
    scores = _scores(summary)
    partial = summary.partial
    ci = scores.get("ci95") or {}
    lines = []
    for key, value in scores.items():
        if key.startswith("overall") and isinstance(value, list):
            lines.append(f"[bold]{key.replace('_', ' ')}[/]: {readable(value)}")
    lines += _estimate_lines(scores.get("estimate"))
    for key in ("by_length", "longscore", "diff_16k_minus_4k"):
        if key in scores and scores[key] not in (None, {}):
            lines.append(f"[bold]{key.replace('_', ' ')}[/]: {readable(scores[key], ci.get(key))}"
                         + (f" ({partial})" if partial else ""))
    return lines


def score_notes(summary: RunSummary) -> list[str]:
    """What a benchmark could not build (settled, so no re-run is advised for it), and
    the tasks an overall leaves out."""
    scores = _scores(summary)
    lines = []
    for task, cells in (scores.get("unbuildable") or {}).items():
        for length, why in cells.items():
            lines.append(f"[yellow]not built[/] {task} at {length}: {why}")
    covered = scores.get("overall_tasks")
    if isinstance(covered, list):
        asked = list(dict.fromkeys([*(scores.get("by_task") or {}), *(scores.get("unbuildable") or {})]))
        left = [t for t in asked if t not in covered]
        if left:
            lines.append(f"overall covers {len(covered)} of {len(asked)} tasks; not {', '.join(left)} "
                         "(not built or not scored at every length)")
    return lines


def _estimate_lines(est: Any) -> list[str]:
    """MiniLongBench's estimate of the full LongBench's overall (from its 237 anchors, or
    adaptive testing's), or why there is none."""
    lines = []
    if isinstance(est, dict) and est.get("available") and est.get("method") == "adaptive":
        lo, hi = est["ci95"]
        lines.append(
            f"[bold]estimated full LongBench overall[/] (adaptive): {100 * est['overall']:.2f} "
            f"(95% CI {100 * lo:.2f}-{100 * hi:.2f}, SE {100 * est['se']:.2f}; target {100 * est['target_se']:.2f}) "
            f"from {est['samples_used']} samples and {est['tokens']:,} tokens; stopped: {est['stop_reason']}")
    elif isinstance(est, dict) and est.get("available"):
        cost = est.get("token_cost") or {}
        saved = cost.get("saved_prompt_tokens_estimate")
        ci90 = est.get("overall_ci90")
        others = ", ".join(f"{m} {100 * est[m]['overall']:.2f}" for m in ("irt", "direct", "blend") if m in est)
        lines.append(
            f"[bold]overall[/] (estimated full LongBench, {est['method']}): [bold]{100 * est['overall']:.2f}[/]"
            + (f" [90% interval {100 * ci90[0]:.2f}-{100 * ci90[1]:.2f}]" if ci90 else "")
            + f"; {others}; "
            f"the 237 anchors cost {100 * cost.get('fraction', 0):.1f}% of the full benchmark's tokens"
            + (f", ~{saved:,} prompt tokens saved" if saved else ""))
    elif isinstance(est, dict):
        lines.append(f"[bold]estimate[/]: not available ({est.get('reason')})")
    return lines
