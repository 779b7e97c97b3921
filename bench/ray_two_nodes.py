"""Benchmark: the Ray backend against the local one on a 2-node cluster, whole-process CPU.

Issue 41 asks for the CPU of *every* process a backend uses, not the driver's alone:
the Ray backend moves work into worker processes and adds a raylet and a GCS per
cluster, so a driver-only figure flatters it. In one invocation this script

  1. starts a head and one worker node on 127.0.0.1 (`ray.cluster_utils.Cluster` in a
     holder process of its own session, 1 CPU each, its own temp dir and ports; stopped
     by its holder and PIDs, never `ray stop`), with PYTHONPATH set to `--tree` so the
     Ray workers import that asyncbench (checked: a remote task returns
     `asyncbench.__file__`), its address kept out of /tmp/ray/ray_current_cluster (where
     another process's `ray.init()` would find and join it; a run whose workers belong to
     more than one Ray job is flagged), and one simulator subprocess (`--latency-ms 0`);
  2. writes a jsonl benchmark of N small distinct prompts (4 output tokens);
  3. for ROUNDS rounds, alternating (the shared machine's load drifts), runs
     `asyncbench run jsonl:DATA --concurrency C` with `--backend local` and with
     `--backend ray --ray-address ADDR --ray-workers W`, each into a fresh cache, then a
     10-prompt run of each (the start-up cost on a running cluster);
  4. for each run measures the wall, the driver's CPU (user+sys from `os.wait4` on the
     child; its ru_maxrss would count the parent's pages, CPU is its own), the CPU of
     every process of the cluster (utime+stime from /proc/PID/stat, read before the run,
     every 0.5 s during it, and once the workers it started have exited, 3 s at most
     after the driver: a process that ends meanwhile keeps its last reading), split into
     Ray workers (`ray::` processes: GenerationWorker, LimiterActor, other actors and
     tasks, idle or starting workers), raylet, gcs_server and the other Ray processes
     (agents, log monitor, holder), and the simulator's CPU (in neither backend's total:
     both pay it alike);
  5. checks every run answered all N (run.json `samples.answered`, none from the cache,
     N requests received by the simulator) with the same stored answers (a digest of the
     cache's key, text, finish reason, output tokens), scores and token counts for both
     backends, and prints markdown tables with the ratios Ray/local per round; `--json
     OUT` keeps the raw numbers.

Whole CPU = driver + every cluster process for Ray (the cluster's idle CPU during the run
included: a cluster costs that while it serves a run; its idle rate is printed), driver
for local.

    PYTHONPATH=. .venv/bin/python bench/ray_two_nodes.py [--n 20000] [--rounds 2] [--concurrency 64] \
        [--ray-workers 2] [--tree PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray_holder import stop_holder

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 0.5
SMALL_N = 10
# Ray's per-node agents take `ray::` titles too; they are not workers
AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")

# Runs of 1 CPU per node, a 100 MB object store, one temp dir; the head's GCS,
# dashboard and dashboard-agent ports given (free ones, not Ray's defaults another cluster may hold),
# the rest picked by the OS. Prints the address, then waits for EOF on stdin.
HOLDER = r"""
import json, sys
import ray._common.utils, ray._private.utils
from ray.cluster_utils import Cluster
# Cluster() writes its address to /tmp/ray/ray_current_cluster, where any `ray.init()`
# without an address on this host (a run's "private local instance") would find it and
# join this cluster instead of starting its own (another helper's run did, mid-benchmark),
# and its shutdown deletes that file whoever wrote it: neither here
ray._private.utils.write_ray_address = lambda *args, **kwargs: None
ray._common.utils.reset_ray_address = lambda *args, **kwargs: None
temp, gcs_port, agent_port, dash_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
args = {"num_cpus": 1, "object_store_memory": 100_000_000, "temp_dir": temp}
cluster = Cluster(initialize_head=True, shutdown_at_exit=True, head_node_args={
    **args, "gcs_server_port": gcs_port, "include_dashboard": False, "dashboard_agent_listen_port": agent_port,
    "dashboard_port": dash_port})
cluster.add_node(**args)
print(json.dumps({"address": cluster.address}), flush=True)
sys.stdin.read()
cluster.shutdown()
"""

WHERE = r"""
import sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)

@ray.remote(num_cpus=0)
def where():
    import asyncbench
    return asyncbench.__file__

print(ray.get(where.remote(), timeout=120))
ray.shutdown()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# --- /proc ---------------------------------------------------------------------------

@dataclass
class Proc:
    """One process as last read: its CPU ticks and every command line it showed (a Ray
    worker starts as default_worker.py, becomes ray::IDLE, then ray::GenerationWorker)."""

    pid: int
    comm: str
    ticks: int
    names: set[str] = field(default_factory=set)
    job: str = ""  # RAY_JOB_ID of a worker process (the raylet starts each for one job)


def _stat(pid: str) -> tuple[str, list[str]] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    return head.partition("(")[2], rest.split()


def cluster_procs(holder: int) -> dict[tuple[int, int], Proc]:
    """Every process of the cluster (the holder, its descendants, and anything left in
    its session), keyed by (PID, start time) so a reused PID is another process."""
    stats: dict[int, tuple[str, list[str]]] = {}
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(entry)) is not None:
            stats[int(entry)] = st
            children.setdefault(int(st[1][1]), []).append(int(entry))
    chosen = {holder} | {pid for pid, (_, f) in stats.items() if int(f[3]) == holder}  # f[3]: session
    todo = list(chosen)
    while todo:
        for kid in children.get(todo.pop(), []):
            if kid not in chosen:
                chosen.add(kid)
                todo.append(kid)
    out: dict[tuple[int, int], Proc] = {}
    for pid in chosen:
        if pid not in stats:
            continue
        comm, f = stats[pid]
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        # f[11], f[12]: utime, stime; f[19]: start time (fields 14, 15, 22 of stat)
        out[(pid, int(f[19]))] = Proc(pid, comm, int(f[11]) + int(f[12]), {cmd} if cmd else set(), _job(pid))
    return out


def _job(pid: int) -> str:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    return next((e[len(b"RAY_JOB_ID="):].decode() for e in env if e.startswith(b"RAY_JOB_ID=")), "")


def proc_ticks(pid: int) -> int:
    st = _stat(str(pid))
    return int(st[1][11]) + int(st[1][12]) if st else 0


def kind(p: Proc) -> str:
    """Which part of the cluster a process is (the most specific name it ever showed).
    By executable name first: the raylet's command line names default_worker.py."""
    if p.comm == "raylet":
        return "raylet"
    if p.comm == "gcs_server":
        return "gcs_server"
    names = " ".join(p.names)
    if any(agent in names for agent in AGENTS):
        return "other"
    for actor in ("GenerationWorker", "LimiterActor"):
        if f"ray::{actor}" in names:
            return actor
    if "ray::" in names or "default_worker.py" in names:
        return "other_ray_workers"  # other actors and tasks, idle and starting workers
    return "other"  # dashboard agent, runtime-env agent, log monitor, the holder


class Sampler:
    """The cluster's processes read before a run, every SAMPLE_S during it, and at its
    end; each process's CPU over the run is its last reading less its first (zero for
    one that started during the run)."""

    def __init__(self, holder: int) -> None:
        self.holder = holder
        self.first = cluster_procs(holder)
        self.last = {k: Proc(p.pid, p.comm, p.ticks, set(p.names)) for k, p in self.first.items()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _merge(self) -> None:
        for key, p in cluster_procs(self.holder).items():
            seen = self.last.setdefault(key, p)
            seen.ticks = p.ticks
            seen.names |= p.names
            seen.job = seen.job or p.job

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._merge()

    def stop(self, tail_s: float = 3.0) -> dict[str, Any]:
        """Final readings once the workers the run started have exited (their teardown is
        the run's cost), or after `tail_s` (workers kept for the next run); the idle
        cluster's CPU over that tail is ~0.01-0.02 CPU-s per second here."""
        self._stop.set()
        self._thread.join()
        deadline = time.monotonic() + tail_s
        while True:
            self._merge()
            now = cluster_procs(self.holder)
            if time.monotonic() > deadline or not [
                    k for k in now if k not in self.first and kind(self.last[k]) != "other"]:
                break
            time.sleep(0.1)
        split: dict[str, float] = {}
        started = ended = 0
        ended_cpu = 0.0
        procs: list[dict[str, Any]] = []
        by_job: dict[str, float] = {}
        for key, p in self.last.items():
            cpu = (p.ticks - (self.first[key].ticks if key in self.first else 0)) / TICK
            split[kind(p)] = split.get(kind(p), 0.0) + cpu
            if p.job:
                by_job[p.job] = by_job.get(p.job, 0.0) + cpu
            procs.append({"pid": p.pid, "kind": kind(p), "cpu_s": cpu, "new": key not in self.first,
                          "ended": key not in now, "job": p.job, "names": sorted(n[:120] for n in p.names)})
            started += key not in self.first
            if key not in now:
                ended += 1
                ended_cpu += cpu
        return {"cpu_s": split, "cpu_s_by_job": by_job, "processes_started": started, "processes_ended": ended,
                "ended_cpu_s": ended_cpu, "processes_now": len(now), "processes": procs}


# --- the cluster, the simulator, the runs ---------------------------------------------

@contextlib.contextmanager
def cluster(env: dict[str, str], tree: Path) -> Any:
    """The holder runs in `tree`: Ray puts a driver's working directory first on its
    workers' path, which would otherwise win over PYTHONPATH."""
    temp = tempfile.mkdtemp(prefix="ab2n", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, temp, *(str(_free_port()) for _ in range(3))], env=env,
                            cwd=tree,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"the Ray cluster did not start (exit {proc.poll()})")
        yield proc.pid, json.loads(line)["address"]
    finally:
        stop_holder(proc, [pid for pid, _ in cluster_procs(proc.pid)])
        shutil.rmtree(temp, ignore_errors=True)


def write_data(path: Path, n: int, tag: str) -> None:
    """N distinct ~40-word prompts, 4 output tokens each (as test_ray_backend's node kill)."""
    with path.open("w") as f:
        for i in range(n):
            prompt = f"{tag} passage {i}: " + " ".join(f"w{(i * 13 + k) % 97}" for k in range(40)) + "\nAnswer:"
            f.write(json.dumps({"id": f"{tag}{i}", "prompt": prompt, "answers": ["w1"], "max_tokens": 4}) + "\n")


@dataclass
class Setup:
    tree: Path
    env: dict[str, str]
    url: str
    sim: int
    holder: int
    address: str
    concurrency: int
    workers: int
    tmp: Path


def one_run(s: Setup, backend: str, data: Path, n: int, name: str) -> dict[str, Any]:
    """One `asyncbench run` as its own process; wall, driver CPU, cluster and simulator CPU."""
    out = s.tmp / name
    cmd = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
           "--base-url", f"{s.url}/v1", "--cache", str(s.tmp / f"{name}.duckdb"), "--out", str(out),
           "--no-progress", "--concurrency", str(s.concurrency), "--backend", backend]
    if backend == "ray":
        cmd += ["--ray-address", s.address, "--ray-workers", str(s.workers)]
    sim_stats("reset", s.url)
    load = os.getloadavg()[0]
    sampler = Sampler(s.holder)
    sim0 = proc_ticks(s.sim)
    with (s.tmp / f"{name}.log").open("w") as log:
        t = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=s.tree, env=s.env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - t
        child.returncode = os.waitstatus_to_exitcode(status)
    clu = sampler.stop()
    busy_jobs = sorted(j for j, cpu in clu["cpu_s_by_job"].items() if cpu > 0.05)
    if len(busy_jobs) > 1:  # a driver other than this run's used the cluster meanwhile
        print(f"WARNING: {name}: workers of {len(busy_jobs)} Ray jobs used CPU during the run: "
              f"{ {j: round(clu['cpu_s_by_job'][j], 2) for j in busy_jobs} }", flush=True)
    sim_cpu = (proc_ticks(s.sim) - sim0) / TICK
    if child.returncode != 0:
        raise SystemExit(f"{name}: exit {child.returncode}\n" + (s.tmp / f"{name}.log").read_text()[-3000:])
    summary = json.loads((out / "run.json").read_text())
    answered, cached = summary["samples"]["answered"], summary["samples"]["from_cache"]
    received = sim_stats("get", s.url)["requests"]
    if answered != n or cached or received != n:
        raise SystemExit(f"{name}: {answered} of {n} answered, {cached} from the cache, the simulator received "
                         f"{received} requests")
    driver = usage.ru_utime + usage.ru_stime
    cpu = clu["cpu_s"]
    workers = sum(v for k, v in cpu.items() if k in ("GenerationWorker", "LimiterActor", "other_ray_workers"))
    infra = sum(v for k, v in cpu.items() if k in ("raylet", "gcs_server", "other"))
    rec = {"backend": backend, "name": name, "n": n, "wall_s": wall, "driver_cpu_s": driver,
           "driver_user_s": usage.ru_utime, "driver_sys_s": usage.ru_stime, "sim_cpu_s": sim_cpu,
           "load_before": load, "load_after": os.getloadavg()[0], "answered": answered,
           "cluster": clu, "workers_cpu_s": workers if backend == "ray" else 0.0,
           "infra_cpu_s": infra if backend == "ray" else 0.0,
           "cluster_cpu_s_during_local": sum(cpu.values()) if backend == "local" else 0.0,
           "sim_requests": received, "scores": summary.get("scores"), "tokens": summary.get("tokens"),
           "answers": answers_digest(s.tmp / f"{name}.duckdb"),
           "ray_backend": summary.get("backend") if backend == "ray" else None}
    rec["whole_cpu_s"] = driver + rec["workers_cpu_s"] + rec["infra_cpu_s"]
    return rec


def answers_digest(cache: Path) -> str:
    """sha256 of the stored answers (key, text, finish reason, output tokens), by key."""
    import hashlib

    from asyncbench.store import Store

    with Store(cache) as store:
        rows = [(r["key"], r["text"], r["finish_reason"], r["completion_tokens"]) for r in store.cache.rows()]
    return f"{len(rows)}:{hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]}"


def sim_stats(what: str, url: str) -> dict[str, Any]:
    """The simulator's request counters: reset them, or read them."""
    request = urllib.request.Request(f"{url}/stats/reset", method="POST", data=b"") if what == "reset" \
        else urllib.request.Request(f"{url}/stats")
    with urllib.request.urlopen(request, timeout=30) as r:
        body = r.read()
    return json.loads(body) if what == "get" else {}


def same_answers(runs: list[dict[str, Any]]) -> None:
    """Every run of one workload scored and counted alike (the answers are deterministic)."""
    for size in {r["n"] for r in runs}:
        same = [r for r in runs if r["n"] == size]
        for r in same[1:]:
            if (r["answers"], r["scores"], r["tokens"]) != (same[0]["answers"], same[0]["scores"], same[0]["tokens"]):
                raise SystemExit(f"{r['name']} differs from {same[0]['name']}: {r['answers']} {r['scores']} "
                                 f"{r['tokens']} vs {same[0]['answers']} {same[0]['scores']} {same[0]['tokens']}")


def idle_rate(holder: int, seconds: float) -> float:
    """The cluster's CPU-s per second while nothing runs on it."""
    sampler = Sampler(holder)
    time.sleep(seconds)
    split: dict[str, float] = sampler.stop()["cpu_s"]
    return sum(split.values()) / seconds


# --- output ---------------------------------------------------------------------------

def _ms(cpu: float, n: int) -> str:
    return f"{1000 * cpu / n:.3f}"


def _s(cpu: float, shown: bool) -> str:
    return f"{cpu:.1f}" if shown else "-"


def table(runs: list[dict[str, Any]]) -> str:
    head = ("| round | backend | wall s | requests/s | driver CPU-s | workers CPU-s | raylet+gcs+other CPU-s "
            "| whole CPU-s | sim CPU-s | ms/req driver | ms/req worker | ms/req whole | load avg |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    big = [r for r in runs if r["n"] > SMALL_N]
    for r in big:
        ray = r["backend"] == "ray"
        lines.append(
            f"| {r['round']} | {r['backend']} | {r['wall_s']:.1f} | {r['n'] / r['wall_s']:,.0f} "
            f"| {r['driver_cpu_s']:.1f} | {_s(r['workers_cpu_s'], ray)} "
            f"| {_s(r['infra_cpu_s'], ray)} | {r['whole_cpu_s']:.1f} | {r['sim_cpu_s']:.1f} "
            f"| {_ms(r['driver_cpu_s'], r['n'])} | {_ms(r['workers_cpu_s'], r['n']) if ray else '-'} "
            f"| {_ms(r['whole_cpu_s'], r['n'])} | {r['load_before']:.1f} |")
    for rnd in sorted({r["round"] for r in big}):
        loc = next(r for r in big if r["round"] == rnd and r["backend"] == "local")
        ray = next(r for r in big if r["round"] == rnd and r["backend"] == "ray")
        lines.append(
            f"| {rnd} | **Ray/local** | {ray['wall_s'] / loc['wall_s']:.2f}x | {loc['wall_s'] / ray['wall_s']:.2f}x "
            f"| {ray['driver_cpu_s'] / loc['driver_cpu_s']:.2f}x | {ray['workers_cpu_s'] / loc['whole_cpu_s']:.2f}x "
            f"of local whole | - | **{ray['whole_cpu_s'] / loc['whole_cpu_s']:.2f}x** | "
            f"{ray['sim_cpu_s'] / loc['sim_cpu_s']:.2f}x | {ray['driver_cpu_s'] / loc['driver_cpu_s']:.2f}x "
            f"| {ray['workers_cpu_s'] / loc['whole_cpu_s']:.2f}x of local whole "
            f"| {ray['whole_cpu_s'] / loc['whole_cpu_s']:.2f}x | |")
    return "\n".join(lines)


def split_table(runs: list[dict[str, Any]]) -> str:
    keys = ["GenerationWorker", "LimiterActor", "other_ray_workers", "raylet", "gcs_server", "other"]
    lines = ["| round | run | " + " | ".join(keys) + " | processes started / ended during the run (their CPU-s) |",
             "|" + "---|" * (len(keys) + 3)]
    for r in runs:
        if r["backend"] != "ray":
            continue
        c = r["cluster"]
        lines.append(f"| {r['round']} | {r['n']} prompts | " + " | ".join(f"{c['cpu_s'].get(k, 0.0):.2f}" for k in keys)
                     + f" | {c['processes_started']} / {c['processes_ended']} ({c['ended_cpu_s']:.2f}) |")
    return "\n".join(lines)


def small_table(runs: list[dict[str, Any]]) -> str:
    lines = [f"| round | backend | {SMALL_N}-prompt wall s | driver CPU-s | cluster CPU-s | whole CPU-s |",
             "|---|---|---|---|---|---|"]
    for r in runs:
        if r["n"] == SMALL_N:
            lines.append(f"| {r['round']} | {r['backend']} | {r['wall_s']:.1f} | {r['driver_cpu_s']:.1f} "
                         f"| {r['workers_cpu_s'] + r['infra_cpu_s']:.1f} | {r['whole_cpu_s']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="prompts per big run")
    parser.add_argument("--rounds", type=int, default=2, help="local / Ray rounds, alternated")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--ray-workers", type=int, default=2)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the asyncbench tree the driver and Ray workers import")
    parser.add_argument("--idle-s", type=float, default=10.0, help="seconds to read the idle cluster's CPU")
    parser.add_argument("--json", type=Path, help="write the raw numbers here")
    args = parser.parse_args()
    tree = args.tree.resolve()
    if not (tree / "asyncbench" / "__init__.py").is_file():
        raise SystemExit(f"--tree {tree}: no asyncbench package there")
    sys.path.insert(0, str(tree))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PYTHONPATH=str(tree), RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    os.environ.update(PYTHONPATH=str(tree))  # the simulator, too
    node_env = {**env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks

    from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess

    tmp = Path(tempfile.mkdtemp(prefix="ab2n-runs"))
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{started}; {os.cpu_count()} cores; load average {os.getloadavg()}; tree {tree}", flush=True)
    sim, url = start_sim_subprocess(["--latency-ms", "0"])
    runs: list[dict[str, Any]] = []
    try:
        write_data(tmp / "big.jsonl", args.n, "b")
        write_data(tmp / "small.jsonl", SMALL_N, "s")
        t = time.perf_counter()
        with cluster(node_env, args.tree) as (holder, address):
            print(f"cluster at {address} in {time.perf_counter() - t:.1f} s (holder {holder})", flush=True)
            # node_env: this driver keeps 127.0.0.1 as the cluster's address (Ray rewrites it otherwise)
            check = subprocess.run([sys.executable, "-c", WHERE, address], env=node_env, capture_output=True,
                                   text=True, timeout=180)
            if check.returncode != 0:
                raise SystemExit("remote asyncbench check failed:\n" + check.stderr[-3000:])
            remote_file = check.stdout.strip().splitlines()[-1]
            if not Path(remote_file).resolve().is_relative_to(tree):
                raise SystemExit(f"the Ray workers import {remote_file}, not the tree {tree}")
            print(f"Ray workers import {remote_file}", flush=True)
            time.sleep(3)  # the check's worker exits
            idle = idle_rate(holder, args.idle_s)
            print(f"idle cluster: {idle:.3f} CPU-s per second", flush=True)
            s = Setup(tree, env, url, sim.pid, holder, address, args.concurrency, args.ray_workers, tmp)
            for rnd in range(1, args.rounds + 1):
                order = ("local", "ray") if rnd % 2 else ("ray", "local")
                for backend in order:
                    rec = one_run(s, backend, tmp / "big.jsonl", args.n, f"r{rnd}{backend}")
                    rec["round"] = rnd
                    runs.append(rec)
                    print(f"round {rnd} {backend}: wall {rec['wall_s']:.1f} s, driver {rec['driver_cpu_s']:.1f} CPU-s, "
                          f"whole {rec['whole_cpu_s']:.1f} CPU-s, sim {rec['sim_cpu_s']:.1f}, "
                          f"cluster {rec['cluster']['cpu_s']}, load {rec['load_before']:.1f}", flush=True)
                for backend in ("ray", "local"):
                    rec = one_run(s, backend, tmp / "small.jsonl", SMALL_N, f"r{rnd}{backend}small")
                    rec["round"] = rnd
                    runs.append(rec)
                    print(f"round {rnd} {backend} {SMALL_N} prompts: wall {rec['wall_s']:.1f} s", flush=True)
    finally:
        stop_sim_subprocess(sim)
        shutil.rmtree(tmp, ignore_errors=True)
    same_answers(runs)
    loads = [r["load_before"] for r in runs] + [r["load_after"] for r in runs]
    print(f"\n{args.n:,} prompts, --concurrency {args.concurrency}, Ray: --ray-workers {args.ray_workers} on 2 nodes "
          f"x 1 CPU; load average {min(loads):.1f}-{max(loads):.1f} during the runs; "
          f"idle cluster {idle:.3f} CPU-s/s\n")
    print(table(runs))
    print("\nRay cluster CPU-s by process kind:\n")
    print(split_table(runs))
    print("\nStart-up on a running cluster:\n")
    print(small_table(runs))
    nodes = [r["ray_backend"].get("nodes") for r in runs if r["backend"] == "ray" and r["ray_backend"]]
    print(f"\nStored answers (count:sha256), equal for every run of a size: "
          f"{sorted({(r['n'], r['answers']) for r in runs})}")
    print(f"\nRay runs' nodes (run.json backend.nodes): {nodes}")
    if any(len([x for x in ns or [] if x.get("requests")]) < 2 for ns in nodes):
        print("WARNING: a Ray run did not answer requests on both nodes")
    if args.json:
        args.json.write_text(json.dumps({"started": started, "args": {k: str(v) for k, v in vars(args).items()},
                                         "address": address, "remote_asyncbench": remote_file,
                                         "idle_cluster_cpu_s_per_s": idle, "runs": runs}, indent=1, default=str))


if __name__ == "__main__":
    main()
