"""A/B of two checkouts on the engine workloads of issue 12, interleaved in one session.

    .venv/bin/python bench/ab_engine.py OLD_TREE NEW_TREE [repeats] [long|small]

Workloads (the real CLI, `asyncbench run jsonl:...`, against the simulator on 127.0.0.1,
fresh cache each run): 1,000 unique 2k-8k-word prompts at 200 ms latency and concurrency
64; 20,000 small prompts at concurrency 256 without latency. Each tree runs with its own
code first on PYTHONPATH; runs alternate A, B, A, B... so machine noise hits both alike.
Prints the median run wall (`wall_s` of run.json), process wall and process CPU (user +
system) per tree and the ratios.
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


def one(tree: Path, data: Path, url: str, concurrency: int) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
               "--base-url", url + "/v1", "--cache", f"{tmp}/c.duckdb", "--out", tmp, "--no-progress",
               "--concurrency", str(concurrency)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        # cwd outside both trees: `python -m` puts the working directory before PYTHONPATH
        done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(tree)), cwd=tmp)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{tree}: exit {done.returncode}: {done.stderr[-2000:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return json.loads(Path(tmp, "run.json").read_text())["wall_s"], wall, cpu


def main() -> None:
    a, b = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    only = sys.argv[4] if len(sys.argv) > 4 else ""
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        write_data(tmp / "long.jsonl", 1000, (2000, 8000), 16)
        write_data(tmp / "small.jsonl", 20_000, (5, 20), 4)
        cases = [("1,000 long prompts, 200 ms, C=64", tmp / "long.jsonl", ["--latency-ms", "200"], 64),
                 ("20,000 small prompts, C=256", tmp / "small.jsonl", [], 256)]
        for label, data, sim_args, conc in cases:
            if only not in data.name:
                continue
            walls: dict[Path, list[tuple[float, float, float]]] = {a: [], b: []}
            with sim_subprocess(sim_args) as url:
                for r in range(repeats):
                    for tree in ((a, b) if r % 2 == 0 else (b, a)):  # who goes first alternates too
                        walls[tree].append(one(tree, data, url, conc))
            med = {t: [statistics.median(w[i] for w in v) for i in range(3)] for t, v in walls.items()}
            print(f"| {label} | old run {med[a][0]:.2f} s (process {med[a][1]:.2f}, CPU {med[a][2]:.2f}) | "
                  f"new run {med[b][0]:.2f} s (process {med[b][1]:.2f}, CPU {med[b][2]:.2f}) | "
                  f"new/old {med[b][0] / med[a][0]:.3f} (CPU {med[b][2] / med[a][2]:.3f}) |", flush=True)


if __name__ == "__main__":
    main()
