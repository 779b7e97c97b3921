"""A/B throughput of two source trees on the same workloads, runs alternating back to back.

    .venv/bin/python bench/ab_throughput.py A_TREE B_TREE [ROUNDS]

Each round runs, for A then B (then B then A on the next round, so drift cancels), the
real CLI (`python -m asyncbench.cli run jsonl:...`) with PYTHONPATH set to the tree, a
fresh cache, against one simulator process, on two workloads: 20,000 small prompts with
no latency at concurrency 64 (engine overhead), and 1,000 long prompts (2k-8k words) at
200 ms latency and concurrency 64. It prints per-workload medians of the run wall
(`wall_s` in run.json) and the CLI process's CPU seconds (user + system), and B/A.
Written for issue 26's acceptance (a restructuring must stay within 3% of the tree it
replaces); the numbers are in bench/ab_throughput.md.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_throughput import write_data

from asyncbench.sim.testing import sim_subprocess


def one(tree: str, data: Path, url: str) -> tuple[float, float, float]:
    """(run wall from run.json, process wall, process CPU seconds) of one CLI run."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
               "--base-url", url + "/v1", "--cache", f"{tmp}/c.duckdb", "--out", tmp, "--no-progress",
               "--concurrency", "64"]
        env = {**os.environ, "PYTHONPATH": tree}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode not in (0, 1):
            raise SystemExit(done.stderr)
        s = json.loads(Path(tmp, "run.json").read_text())
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return s["wall_s"], wall, cpu


def main() -> None:
    a, b = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    with tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        write_data(tmp / "small.jsonl", 20_000, (5, 20), 4)
        write_data(tmp / "long.jsonl", 1000, (2000, 8000), 16)
        for name, data, sim_args in (("20k small, no latency", tmp / "small.jsonl", []),
                                     ("1k long, 200 ms", tmp / "long.jsonl", ["--latency-ms", "200"])):
            got: dict[str, list[tuple[float, float, float]]] = {a: [], b: []}
            with sim_subprocess(sim_args) as url:
                for r in range(rounds):
                    for tree in ((a, b) if r % 2 == 0 else (b, a)):
                        got[tree].append(one(tree, data, url))
            med = {t: [statistics.median(x[i] for x in got[t]) for i in range(3)] for t in (a, b)}
            print(f"{name}: A run wall {med[a][0]:.2f} s, CPU {med[a][2]:.2f} s | "
                  f"B run wall {med[b][0]:.2f} s, CPU {med[b][2]:.2f} s | "
                  f"B/A wall {med[b][0] / med[a][0]:.3f}, CPU {med[b][2] / med[a][2]:.3f} ({rounds} rounds)")


if __name__ == "__main__":
    main()
