"""How the terminal summary shows a run's scores: the rows they add to its table and the
lines after it. What is particular to one benchmark (MiniLongBench's estimate from its
237 anchors, 100-LongBench's LongScore, BAMBOO's lengths) the run's score object says
(`RunSummary.scores`, of its `Benchmark.SCORES` type: `title_note`, `summary_lines`), so
neither this module nor `summary.print_summary` knows a benchmark by name.
"""

from __future__ import annotations

from ..benchmarks.scores import ScoreSet
from ..json_values import as_object
from ..run_summary import RunSummary


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    if v is None:
        return "-"
    return str(v)


def readable(value: object, interval: object = None) -> str:
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


def plus_minus(interval: object) -> str:
    """" ±h": the half-width of a [lo, hi] interval (a percentile interval need not be
    symmetric; run.json has both ends), or "" when there is none."""
    if isinstance(interval, (list, tuple)) and len(interval) == 2 and None not in interval:
        return f" ±{(interval[1] - interval[0]) / 2:.2f}"
    return ""


def _overall(value: object, partial: str | None, interval: object = None) -> str:
    """A partial run's overall is never a plain number."""
    text = _fmt(value) + (plus_minus(interval) if value is not None else "")
    return f"({text}) {partial}" if partial else text


def scores_of(summary: RunSummary) -> ScoreSet:
    """The run's score object (its benchmark's score type); an empty one where the
    invocation was interrupted before scoring."""
    return summary.scores if summary.scores is not None else ScoreSet()


def score_title(summary: RunSummary) -> str:
    """The score table's title: what its numbers are averages over."""
    return "Scores" + scores_of(summary).title_note()


def score_rows(summary: RunSummary) -> list[tuple[str, str]]:
    """(label, score) rows the table shows below its tasks: categories, then overalls."""
    typed = scores_of(summary)
    scores, partial, ci = typed.data, summary.partial, typed.ci95
    rows = []
    for cat, value in typed.by_category.items():
        rows.append((f"[italic]{cat}[/]", _fmt(value) + plus_minus(as_object(ci.get("by_category")).get(cat))
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
    """The lines after the score table: what an overall covers, then the benchmark's own
    (its score type's `summary_lines`: an estimate of another benchmark, scores by length)."""
    scores = scores_of(summary)
    lines = [f"[bold]{key.replace('_', ' ')}[/]: {readable(value)}" for key, value in scores.data.items()
             if key.startswith("overall") and isinstance(value, list)]
    return lines + scores.summary_lines(readable, summary.partial)


def score_notes(summary: RunSummary) -> list[str]:
    """What a benchmark could not build (settled, so no re-run is advised for it), and
    the tasks an overall leaves out."""
    scores = scores_of(summary).data
    lines = []
    for task, cells in as_object(scores.get("unbuildable")).items():
        for length, why in as_object(cells).items():
            lines.append(f"[yellow]not built[/] {task} at {length}: {why}")
    covered = scores.get("overall_tasks")
    if isinstance(covered, list):
        asked = list(dict.fromkeys([*as_object(scores.get("by_task")), *as_object(scores.get("unbuildable"))]))
        left = [t for t in asked if t not in covered]
        if left:
            lines.append(f"overall covers {len(covered)} of {len(asked)} tasks; not {', '.join(left)} "
                         "(not built or not scored at every length)")
    return lines
