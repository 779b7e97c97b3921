"""One workload cold then warm, through the real CLI: CPU-s and peak RSS of each (issue 27).

    PYTHONPATH=$PWD .venv/bin/python bench/cold_warm.py N C [PY_SPY_PREFIX]

Writes N small jsonl prompts (bench/engine_throughput.write_data: 5-20 words, 4 max
tokens) to /tmp/cold_warm/, starts the simulator (latency 0, its own process: its CPU is
not counted), runs `python -m asyncbench.cli run jsonl:FILE --model openai-compat:sim
--concurrency C` on a fresh cache, then the same command again (every answer cached), and
prints each invocation's user+sys CPU and peak RSS, read from a wrapper process's
RUSAGE_CHILDREN. With PY_SPY_PREFIX each invocation runs under `py-spy record` (raw
format, PREFIX-cold.txt / PREFIX-warm.txt). REPO=DIR measures another checkout.
"""

import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_throughput import write_data
from raw_client_ratio import cost_line, wrapped

from asyncbench.sim.testing import sim_subprocess


def main() -> None:
    n, c = int(sys.argv[1]), sys.argv[2]
    prof = sys.argv[3] if len(sys.argv) > 3 else ""
    repo = os.environ.get("REPO", str(Path(__file__).resolve().parent.parent))
    work = Path("/tmp/cold_warm")
    work.mkdir(exist_ok=True)
    data = work / f"small{n}.jsonl"
    if not data.exists():
        write_data(data, n, (5, 20), 4)
    out = work / f"out{n}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    with sim_subprocess(["--latency-ms", "0"]) as url:
        for phase in ("cold", "warm"):
            cmd = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
                   "--base-url", url + "/v1", "--cache", f"{out}/c.duckdb", "--out", str(out), "--no-progress",
                   "--concurrency", c]
            if prof:
                cmd = ["py-spy", "record", "-r", "200", "-f", "raw", "-o", f"{prof}-{phase}.txt", "--", *cmd]
            started = time.time()
            res = wrapped(cmd, repo)
            print(f"{phase}: {cost_line(res, time.time() - started)}")


if __name__ == "__main__":
    main()
