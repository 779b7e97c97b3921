"""Latency percentiles, shared by run.json and the reports.

Pure Python on purpose: importing numpy costs ~50 ms at the end of every run, more than
sorting a few thousand latencies. Same definition as numpy's default (linear
interpolation between closest ranks), so the numbers match what users compute themselves.
"""

from __future__ import annotations

PERCENTILES = (50, 95, 99)


def percentile(sorted_values: list[float], q: float) -> float:
    """The q-th percentile of already sorted values (numpy's "linear" method)."""
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def percentiles(values: list[float]) -> dict[str, float | None]:
    """p50/p95/p99 rounded to 0.01 ms; None for each when there are no values."""
    if not values:
        return {f"p{q}": None for q in PERCENTILES}
    ordered = sorted(float(v) for v in values)
    return {f"p{q}": round(percentile(ordered, q), 2) for q in PERCENTILES}
