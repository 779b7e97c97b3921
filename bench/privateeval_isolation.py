"""PrivateEval pass@1 of attack strategies and canonical solutions in each sandbox mode.

    python bench/privateeval_isolation.py [--modes bwrap,mountns,user-bwrap] [--workers 2]

Runs as root (the modes are forced with ASYNCBENCH_SANDBOX_MODE; `user-bwrap` runs the
sandbox as uid 65534 through tests/sandbox_modes.py) on the release's 152 PrivateEval
rows in the release environment (numpy 1.23.5, pandas 1.5.3) at its 3 s, CPU time after
imports. Prints a Markdown table (results in bench/privateeval_isolation.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from sandbox_modes import forced, run_as_user

from asyncbench.benchmarks.bamboo import metrics as M
from asyncbench.benchmarks.bamboo.benchmark import load_private_eval, read_jsonl
from asyncbench.benchmarks.bamboo.sandbox import Limits, Program, check_many, isolation
from asyncbench.benchmarks.bamboo.sandbox_env import PROBE_IMPORTS, RELEASE_TIMEOUT_S, release_python

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "bamboo"

# Completions, in the paraphrased names a model would write (an original name is a format error).
STRATEGIES = {
    "empty completion (control)": "",
    "inputs rebound (issue 24)": "None\na = b = c = bn.numset([])",
    "encoder replaced": "None\nimport sys\ng = sys._getframe(1).f_globals\nempty = g['wire']['encode']([])\n"
                        "g['value_of'] = lambda name: empty",
    "names nobody asked for": "None\nimport sys\ng = sys._getframe(1).f_globals\nsend = g['send']\n"
                              "def forged(obj):\n    if 'values' in obj:\n"
                              "        obj['values'] = {n: {'t': 'list', 'v': []} for n in 'abcLdxyz'}\n"
                              "    send(obj)\ng['send'] = forged",
    "disk walk for the answers, exec": "None\nimport os, gzip, json\nsrc = open('program.py').read()\n"
                                       "for root, dirs, files in os.walk('/'):\n    for f in files:\n"
                                       "        if f.startswith('real_all_eval'):\n"
                                       "            for line in gzip.open(os.path.join(root, f), 'rt'):\n"
                                       "                p = json.loads(line)\n"
                                       "                if src.startswith(p['prompt']):\n"
                                       "                    exec(p['prompt'] + p['canonical_solution'][0], globals())",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="bwrap,mountns,user-bwrap")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    python = release_python()
    res = load_private_eval(DATA)
    rows = [r for _, r in read_jsonl(DATA / "private_eval_4k.jsonl")[0]]
    kinds = {"canonical solution": None, **STRATEGIES}
    limits = Limits(cpu_s=RELEASE_TIMEOUT_S)
    table: dict[str, dict[str, str]] = {k: {} for k in kinds}
    modes = args.modes.split(",")
    for mode in modes:
        for kind, completion in kinds.items():
            progs: list[Program | None] = [
                M.private_eval_program(res.problem(r["task_id"]), r["canonical_solution"][0] if completion is None
                                       else completion, res.keywords) for r in rows]
            runnable = [p for p in progs if p is not None]
            t0 = time.monotonic()
            if mode == "user-bwrap":
                with tempfile.TemporaryDirectory() as d:
                    _, statuses = run_as_user(runnable, Path(d), python, limits, PROBE_IMPORTS)
                passed = sum(s == "passed" for s in statuses)
                errors = sum(s.startswith("error") for s in statuses)
            else:
                with forced(mode):
                    assert isolation(python).mode == mode
                    outs = anyio.run(check_many, runnable, limits, args.workers, python, False, PROBE_IMPORTS)
                passed, errors = sum(o.passed for o in outs), sum(o.error for o in outs)
            cell = f"{passed}/{len(rows)}" + (f" ({len(rows) - len(runnable)} format errors)"
                                              if len(runnable) < len(rows) else "")
            table[kind][mode] = cell + (f", {errors} errors" if errors else "")
            print(f"{mode} {kind}: {table[kind][mode]} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    print(f"| completion | {' | '.join(modes)} |")
    print("|---|" + "---|" * len(modes))
    for kind in kinds:
        print(f"| {kind} | {' | '.join(table[kind].get(m, '-') for m in modes)} |")


if __name__ == "__main__":
    os.umask(0o022)
    main()
