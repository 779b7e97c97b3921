"""Benchmark: what the Ray backend is for, on a 2-node local Ray cluster.

Starts a head and one worker node on 127.0.0.1 (`ray.cluster_utils.Cluster` in a holder
process, one CPU and its own temp dir each; stopped by its own holder and PIDs, never
`ray stop`), then measures

  1. PrivateEval scoring: the canonical solution and an empty completion of the first
     ROWS NumpyEval/PandasEval rows, checked in the sandbox (release environment, the
     release's 3 s CPU limit) locally (`run_programs`, 2 at a time: this machine's cores)
     and through `RayRunner.map_chunks` (chunks of 4 programs, one task per CPU of the
     two nodes), cold (first call) and warm, alternated with the local runs for ROUNDS
     rounds (the machine is shared); the verdicts must be equal;
  2. one rate limit shared by two drivers: two `asyncbench run --backend ray` processes
     started together against one simulator enforcing `--rpm RPM`, each with N requests
     and `--rpm RPM`, first each with its own limiter (today's default), then with
     `--ray-shared-limiter`: 429s the simulator sent, wall from first to last request,
     achieved RPM of the answered requests.

    PYTHONPATH=. .venv/bin/python bench/ray_what_for.py [--rows 40] [--rounds 3] [--rpm 600] [--n 100]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio
from ray_holder import stop_holder

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
NODE_ENV = {**ENV, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
HOLDER = r"""
import json, sys
from ray.cluster_utils import Cluster
temp = sys.argv[1]
args = {"num_cpus": 1, "object_store_memory": 100_000_000, "temp_dir": temp}
cluster = Cluster(initialize_head=True, shutdown_at_exit=True, head_node_args={**args, "include_dashboard": False})
cluster.add_node(**args)
print(json.dumps({"address": cluster.address}), flush=True)
sys.stdin.read()
cluster.shutdown()
"""


def _tree(root: int) -> list[int]:
    """Every descendant of `root`, read from /proc (nothing else on the host)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


@contextlib.contextmanager
def cluster() -> Any:
    temp = tempfile.mkdtemp(prefix="abwhat", dir="/tmp")
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, temp], env=NODE_ENV, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        yield json.loads(proc.stdout.readline())["address"]
    finally:
        stop_holder(proc, _tree(proc.pid))
        shutil.rmtree(temp, ignore_errors=True)


def private_eval(address: str, rows: int, rounds: int) -> None:
    from asyncbench.benchmarks.bamboo import metrics as M
    from asyncbench.benchmarks.bamboo.benchmark import load_private_eval, read_jsonl, run_programs, sandbox_interpreter
    from asyncbench.benchmarks.bamboo.sandbox import isolation
    from asyncbench.runners.ray import RayRunner

    root = DATA / "bamboo"
    res = load_private_eval(root)
    chosen = [r for _, r in read_jsonl(root / "private_eval_4k.jsonl")[0]
              if M.domain_of(r["task_id"]) in ("numpy", "pandas")][:rows]
    programs = [p for r in chosen for c in (r["canonical_solution"][0], "")
                if (p := M.private_eval_program(res.problem(r["task_id"]), c, res.keywords)) is not None]
    python, which = sandbox_interpreter({})
    print(f"PrivateEval: {len(programs)} programs ({len(chosen)} rows x canonical/empty), {which}, "
          f"sandbox {isolation(python).mode}; load average {os.getloadavg()[0]:.2f}")
    options = {"sandbox_workers": 2}
    backend = RayRunner(address, workers=1, concurrency=1, timeout_s=60, max_attempts=1)
    walls: dict[str, list[float]] = {"local": [], "ray": []}
    per_node: dict[str, int] = {}

    def spread(fn: Any, calls: list[tuple[Any, ...]]) -> list[Any]:
        """`backend.map_chunks`, noting the node each chunk ran on."""
        def where(*args: Any) -> tuple[str, Any]:
            import ray
            return ray.get_runtime_context().get_node_id(), fn(*args)

        out = backend.map_chunks(where, calls)
        for node, _ in out:
            per_node[node[:8]] = per_node.get(node[:8], 0) + 1
        return [result for _, result in out]

    try:
        t = time.perf_counter()
        cold = anyio.run(run_programs, programs, options, backend.map_chunks)
        print(f"  Ray map_chunks, cold (workers start, sandbox probed on each): {time.perf_counter() - t:.1f} s")
        for _ in range(rounds):  # alternated: the shared machine's load drifts
            t = time.perf_counter()
            local = anyio.run(run_programs, programs, options)
            walls["local"].append(time.perf_counter() - t)
            t = time.perf_counter()
            remote = anyio.run(run_programs, programs, options, spread)
            walls["ray"].append(time.perf_counter() - t)
            assert [o.status for o in remote] == [o.status for o in local] == [o.status for o in cold], \
                "Ray and local verdicts differ"
    finally:
        anyio.run(backend.aclose)
    best = {k: min(v) for k, v in walls.items()}
    print(f"  local, 2 at a time: {', '.join(f'{w:.1f}' for w in walls['local'])} s; "
          f"{sum(o.passed for o in local)} of {len(programs)} passed")
    print(f"  Ray map_chunks, 2 nodes x 1 CPU, warm: {', '.join(f'{w:.1f}' for w in walls['ray'])} s; "
          f"verdicts equal; best vs best: {best['local'] / best['ray']:.2f}x local's throughput; "
          f"chunks per node {sorted(per_node.values())}")


def shared_limit(address: str, rpm: int, n: int) -> None:
    from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess

    sim, url = start_sim_subprocess(["--rpm", str(rpm), "--latency-ms", "20"])
    tmp = Path(tempfile.mkdtemp(prefix="abwhat-runs"))
    try:
        for d in ("a", "b"):
            (tmp / f"{d}.jsonl").write_text("".join(json.dumps(
                {"id": f"{d}{i}", "prompt": f"Driver {d}, passage {i}: " + " ".join(f"w{(i * 7 + k) % 89}" for k in range(30)),
                 "answers": ["w1"], "max_tokens": 4}) + "\n" for i in range(n)))
        for label, extra in (("own limiter each", []), ("--ray-shared-limiter", ["--ray-shared-limiter", "bench"])):
            urllib.request.urlopen(urllib.request.Request(f"{url}/stats/reset", method="POST", data=b""), timeout=10).read()
            procs = [subprocess.Popen(
                [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{tmp / f'{d}.jsonl'}", "--model", "openai-compat:sim",
                 "--base-url", f"{url}/v1", "--backend", "ray", "--ray-address", address, "--ray-workers", "1",
                 "--rpm", str(rpm), "--cache", str(tmp / f"{label[:3]}{d}.duckdb"), "--out", str(tmp / f"{label[:3]}{d}"),
                 "--no-progress", *extra], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for d in ("a", "b")]
            for p in procs:
                _, err = p.communicate(timeout=600)
                assert p.returncode == 0, err[-2000:]
            with urllib.request.urlopen(f"{url}/stats?log=1", timeout=10) as r:
                stats = json.loads(r.read())
            ok_wall = max(stats["times"]) - min(stats["times"])
            ideal = (2 * n - rpm / 60) / (rpm / 60)
            print(f"  two drivers, {label}: {stats['requests']} requests, {stats['rate_limited']} x 429, "
                  f"wall {ok_wall:.1f} s (ideal at the limit {ideal:.1f} s), "
                  f"achieved {60 * (stats['ok'] - 1) / ok_wall:.0f} RPM of {rpm} answered")
    finally:
        stop_sim_subprocess(sim)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=40, help="NumpyEval/PandasEval rows (2 programs each)")
    parser.add_argument("--rounds", type=int, default=3, help="local / warm Ray rounds, alternated")
    parser.add_argument("--rpm", type=int, default=600)
    parser.add_argument("--n", type=int, default=100, help="requests per driver")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; a 2-node local Ray cluster (head + 1 worker node, 1 CPU each) on 127.0.0.1")
    with cluster() as address:
        private_eval(address, args.rows, args.rounds)
        print(f"Shared rate limit: simulator --rpm {args.rpm}, 2 drivers x {args.n} requests, --rpm {args.rpm} each")
        shared_limit(address, args.rpm, args.n)


if __name__ == "__main__":
    main()
