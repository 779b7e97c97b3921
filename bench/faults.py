"""Runs that end under faults: a fault-free run against one with random faults, and an
endpoint that fails every request (issue 18).

    .venv/bin/python bench/faults.py [N] [CONCURRENCY]

Both runs use the real CLI against the simulator on 127.0.0.1 with a fresh cache;
results in bench/faults.md. Compare the ratio, not the seconds: the machine is noisy.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_throughput import write_data

from asyncbench.sim.testing import sim_subprocess


def run(data: Path, url: str, concurrency: int) -> tuple[dict[str, object], float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
               "--base-url", url + "/v1", "--cache", f"{tmp}/c.duckdb", "--out", tmp, "--no-progress",
               "--concurrency", str(concurrency)]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        return json.loads(Path(tmp, "run.json").read_text()), wall, done.stderr.strip().splitlines()[-1:][0] \
            if done.stderr.strip() else ""


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    conc = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    with tempfile.TemporaryDirectory() as d:
        data = Path(d) / "small.jsonl"
        write_data(data, n, (5, 20), 4)
        with sim_subprocess([]) as url:
            clean, clean_wall, _ = run(data, url, conc)
        faults = ["--error-rate", "0.2", "--drop-rate", "0.05", "--malformed-rate", "0.05", "--seed", "1"]
        with sim_subprocess(faults) as url:
            faulty, faulty_wall, _ = run(data, url, conc)
        print(f"| {n:,} samples, C={conc}, no faults | run {clean['wall_s']:.1f} s (process {clean_wall:.1f} s) | "
              f"completed {clean['samples']['settled']}/{n} |")
        print(f"| {n:,} samples, C={conc}, 20% 5xx + 5% drops + 5% malformed | run {faulty['wall_s']:.1f} s "
              f"(process {faulty_wall:.1f} s), {faulty['wall_s'] / clean['wall_s']:.2f}x the fault-free run; "
              f"retries {faulty['this_invocation']['retries']} | completed {faulty['samples']['settled']}/{n}, failed {faulty['samples']['failed']} |",
              flush=True)
        small = Path(d) / "twenty.jsonl"
        write_data(small, 20, (5, 20), 4)
        with sim_subprocess(["--error-rate", "1.0"]) as url:
            dead, dead_wall, line = run(small, url, 32)
        print(f"| 20 samples, endpoint answering 500 to everything, default settings | ended in {dead_wall:.1f} s, "
              f"completed {dead['samples']['settled']}/20 | `{line[:100]}...` |")


if __name__ == "__main__":
    main()
