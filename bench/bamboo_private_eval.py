"""Count PrivateEval pass@1 of canonical solutions, of the release's original solutions,
and of empty completions, per library, in one interpreter; time the sandbox.

    python bench/bamboo_private_eval.py [--python PATH] [--workers 2]

Prints a Markdown section (results in bench/bamboo_private_eval.md).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio

from asyncbench.benchmarks.bamboo import metrics as M
from asyncbench.benchmarks.bamboo.benchmark import load_private_eval, read_jsonl
from asyncbench.benchmarks.bamboo.sandbox import Limits, check_many, isolation

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bamboo"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=30.0, help="CPU seconds per program after imports (the release: 3)")
    args = ap.parse_args()
    versions = subprocess.run([args.python, "-c", "import numpy, pandas; print(numpy.__version__, pandas.__version__)"],
                              capture_output=True, text=True).stdout.split()
    res = load_private_eval(DATA)
    rows = {}
    for level in ("4k", "16k"):
        for _, r in read_jsonl(DATA / f"private_eval_{level}.jsonl")[0]:
            rows[r["task_id"]] = r  # both levels hold the same 152 problems and solutions
    kinds = {"row canonical_solution[0]": lambda r: r["canonical_solution"][0], "empty completion": lambda r: ""}
    limits = Limits(cpu_s=args.timeout)
    print(f"## numpy {versions[0]}, pandas {versions[1]} ({args.workers} workers, {args.timeout:g} s per program; "
          f"sandbox: {isolation(args.python).describe()})\n")
    print("| completions | NumpyEval | PandasEval | TorchDataEval | format errors | wall s | programs/s |")
    print("|---|---|---|---|---|---|---|")
    failures: dict[str, str] = {}
    for label, make in kinds.items():
        programs = {t: M.private_eval_program(res.problem(t), make(r), res.keywords) for t, r in rows.items()}
        runnable = [t for t, p in programs.items() if p is not None]
        t0 = time.monotonic()
        outs = anyio.run(check_many, [programs[t] for t in runnable], limits, args.workers, args.python)
        wall = time.monotonic() - t0
        passed, total = Counter(), Counter()
        for t in rows:
            total[M.domain_of(t)] += 1
        for t, o in zip(runnable, outs):
            passed[M.domain_of(t)] += o.passed
            if not o.passed and label.startswith("row"):
                failures[t] = o.status
        cells = [f"{passed[d]}/{total[d]}" for d in ("numpy", "pandas", "torchdata")]
        print(f"| {label} | {' | '.join(cells)} | {len(rows) - len(runnable)} | {wall:.1f} | {len(runnable) / wall:.1f} |")
    originals = [M.build_program(res.problem(t), res.problem(t)["canonical_solution"][0]) for t in failures]
    outs = anyio.run(check_many, originals, limits, args.workers, args.python)
    print("\nNumpyEval/PandasEval rows failing with their canonical solution, and whether the release's original "
          "solution to the same problem passes here:\n")
    for (t, status), o in zip(failures.items(), outs):
        if M.domain_of(t) != "torchdata":
            print(f"- {t}: {status.splitlines()[0][:110]} — original: {o.status.splitlines()[0][:60]}")


if __name__ == "__main__":
    main()
