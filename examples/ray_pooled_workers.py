"""Ray workers that outlive the run: the second run on a running cluster reuses them.

Starts a one-node Ray cluster on 127.0.0.1 (its own temp dir, stopped by this script:
never `ray stop`) and a simulator, then runs the same small evaluation twice with
`--backend ray --ray-address ADDR`. The first run starts the generation workers and the
limiter host (named detached actors in the `asyncbench` namespace); the second finds
them (run.json `backend.workers_reused`) and starts no Ray worker process. With no run
attached for 10 minutes they end themselves; here the cluster goes first.

    PYTHONPATH=. .venv/bin/python examples/ray_pooled_workers.py   # needs the ray extra
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ray.cluster_utils import Cluster

from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess

os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
work = Path(tempfile.mkdtemp(prefix="ab-pooled-"))
temp = tempfile.mkdtemp(prefix="abpw", dir="/tmp")  # short: Ray's socket paths must fit
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "temp_dir": temp, "include_dashboard": False})
sim, url = start_sim_subprocess(["--latency-ms", "20"])
try:
    data = work / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Question {i}: say yes.", "answers": ["yes"],
                                        "max_tokens": 4}) + "\n" for i in range(10)))
    for run in (1, 2):
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
                        "--base-url", f"{url}/v1", "--backend", "ray", "--ray-address", cluster.address,
                        "--ray-workers", "2", "--cache", str(work / f"{run}.duckdb"), "--out", str(work / f"run{run}"),
                        "--no-progress"], check=True, stdout=subprocess.DEVNULL)
        backend = json.loads((work / f"run{run}" / "run.json").read_text())["backend"]
        print(f"run {run}: {time.monotonic() - started:.1f} s, workers reused {backend['workers_reused']} "
              f"of {backend['workers']}, requests sent per node {[n['sent'] for n in backend['nodes']]}")
finally:
    stop_sim_subprocess(sim)
    cluster.shutdown()
    shutil.rmtree(temp, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
