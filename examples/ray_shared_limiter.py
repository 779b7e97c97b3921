"""Two `asyncbench run` processes sharing one rate limit through a Ray cluster.

Starts a one-node Ray cluster on 127.0.0.1 (its own ports and temp dir, stopped by this
script: never `ray stop`) and a simulator enforcing 300 RPM, then runs two drivers at
once, each with `--rpm 300 --ray-shared-limiter demo`: they lease from one limiter, so
together they stay at 300 RPM and the simulator answers with (almost) no 429. Drop
`--ray-shared-limiter` to see each keep its own 300 RPM and the server refuse the excess.

    PYTHONPATH=. .venv/bin/python examples/ray_shared_limiter.py   # needs the ray extra
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from ray.cluster_utils import Cluster

from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess

os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
work = Path(tempfile.mkdtemp(prefix="ab-shared-"))
temp = tempfile.mkdtemp(prefix="abex", dir="/tmp")  # short: Ray's socket paths must fit
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "temp_dir": temp, "include_dashboard": False})
sim, url = start_sim_subprocess(["--rpm", "300"])
try:
    drivers = []
    for d in ("a", "b"):
        data = work / f"{d}.jsonl"
        data.write_text("".join(json.dumps({"id": f"{d}{i}", "prompt": f"Run {d}, question {i}: say yes.",
                                            "answers": ["yes"], "max_tokens": 4}) + "\n" for i in range(40)))
        drivers.append(subprocess.Popen(
            [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
             "--base-url", f"{url}/v1", "--backend", "ray", "--ray-address", cluster.address, "--ray-workers", "1",
             "--rpm", "300", "--ray-shared-limiter", "demo", "--cache", str(work / f"{d}.duckdb"),
             "--out", str(work / d), "--no-progress"]))
    for proc in drivers:
        proc.wait()
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as r:
        stats = json.loads(r.read())
    print(f"two drivers, one 300 RPM limit: {stats['ok']} answered, {stats['rate_limited']} refused (429)")
finally:
    stop_sim_subprocess(sim)
    cluster.shutdown()
    shutil.rmtree(temp, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
