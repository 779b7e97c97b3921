"""Compare two stored runs of one benchmark: `asyncbench compare RUN_A RUN_B`.

Per task, category and overall: the paired difference B - A on the samples both runs
scored (matched by task and sample id), its 95% paired bootstrap interval (the same
resampled samples for both runs), and a two-sided paired permutation p-value (each
sample's two results swapped at random, 1,000 times: the sign-flip test for a mean);
"not distinguishable" where the interval covers 0. Run ids may be unique prefixes.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_a", metavar="RUN_A", help="the baseline run (id or unique prefix)")
    p.add_argument("run_b", metavar="RUN_B", help="the run compared with it: differences are B - A")
    p.add_argument("--cache", help="DuckDB cache file (default: ~/.cache/asyncbench/cache.duckdb)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")


def main(args: argparse.Namespace) -> int:
    from ..report.compare import compare_runs, render_text
    from ..report.data import load_runs
    from ..store import default_cache_path

    run_a, run_b = load_runs(args.cache or default_cache_path(), [args.run_a, args.run_b], samples=False)
    comparison = compare_runs(run_a, run_b)
    if args.json:
        json.dump(comparison.to_dict(), sys.stdout, indent=2, ensure_ascii=False)
        print()
    else:
        print("\n".join(render_text(comparison)))
    return 0
