"""Benchmark: generation through the Ray backend vs the local backend, on one machine.

N small requests (a ~25-word prompt, 4 output tokens) against one simulator subprocess
with no latency, sent

  1. by the local backend (the scheduler in this process);
  2. by the Ray backend (2 generation workers on a private local Ray instance on
     127.0.0.1): batches of jobs, one actor call each, outcomes streamed back;
  3. optionally (`--before FILE`, e.g. `git show REV:asyncbench/runners/ray.py > FILE`)
     by an earlier RayRunner loaded from FILE, for a before/after comparison;

round-robin for `--rounds` rounds (the machine is shared: compare ratios within one
run). For each: wall time (throughput) and the driver's CPU seconds (`time.process_time`:
every thread of this process, Ray's own included) per request. No limit is set, so the
Ray path makes no limiter call.

    .venv/bin/python bench/ray_generation.py [--n 3000] [--concurrency 64] [--rounds 2] [--before FILE]
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

import anyio

from asyncbench.client import make_client
from asyncbench.pricing import PriceTable
from asyncbench.providers import parse_model_spec
from asyncbench.runners.local import LocalRunner
from asyncbench.runners.ray import RayRunner
from asyncbench.scheduler import Budget, Job, Outcome
from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def load_before(path: str) -> Any:
    """An earlier ray.py, as the module asyncbench.runners._ray_before: copied into the
    package for the run (Ray's workers import the actor classes by module name) and
    removed at exit."""
    import asyncbench.runners

    target = Path(asyncbench.runners.__file__).with_name("_ray_before.py")
    shutil.copyfile(path, target)
    atexit.register(target.unlink, missing_ok=True)
    return importlib.import_module("asyncbench.runners._ray_before").RayRunner


TICK = os.sysconf("SC_CLK_TCK")


def actor_cpu() -> float:
    """CPU seconds so far of this host's Ray generation workers and limiter actors (the
    `ray::` process titles): the part of the Ray backend's work done outside the driver."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not (entry / "cmdline").read_bytes().startswith((b"ray::GenerationWorker", b"ray::LimiterActor")):
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICK
    return total


async def measure(runner: Any, client: Any, n: int) -> tuple[float, float, float]:
    """(wall s, driver CPU s, workers' CPU s) of one `run` over n fresh jobs."""
    answered = 0
    errors: list[Any] = []

    def on_event(outcome: Any) -> None:
        if not isinstance(outcome, Outcome):
            return
        nonlocal answered
        answered += outcome.response is not None
        if outcome.error is not None and not errors:
            errors.append(outcome.error)

    async def jobs() -> Any:
        for i in range(n):
            yield Job(index=i, request=client.request(prompt=f"question {i} {time.time_ns()} " + "word " * 25,
                                                      max_tokens=4), tokens=40)

    wall, cpu, actors = time.perf_counter(), time.process_time(), actor_cpu()
    if hasattr(runner, "bind"):  # an earlier ray.py (--before) speaks the old seam
        await runner.run(client, jobs(), budget=Budget(None), on_outcome=on_event)
    else:
        await runner.run(client, jobs(), on_event, budget=Budget(None))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    actors = actor_cpu() - actors if isinstance(runner, RayRunner) else 0.0
    assert answered == n, (answered, n, errors)
    return wall, cpu, actors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before", help="an earlier asyncbench/runners/ray.py to compare with")
    args = parser.parse_args()
    sim, url = start_sim_subprocess(["--latency-ms", "0"])
    try:
        client = make_client(parse_model_spec("openai-compat:sim", [url + "/v1"]), PriceTable(),
                             concurrency=args.concurrency)
        ray_runner = RayRunner(None, workers=2, concurrency=args.concurrency, timeout_s=60, max_attempts=3)
        runners: dict[str, Any] = {"local": LocalRunner(60, 3), "ray": ray_runner}
        if args.before:
            runners["ray (before)"] = load_before(args.before)(None, workers=2, concurrency=args.concurrency,
                                                              timeout_s=60, max_attempts=3)
        anyio.run(compare, runners, client, args)
        for runner in reversed(list(runners.values())):
            if hasattr(runner, "bind"):
                runner.close()
            else:
                anyio.run(runner.aclose)
    finally:
        stop_sim_subprocess(sim)


async def compare(runners: dict[str, Any], client: Any, args: argparse.Namespace) -> None:
    """Round-robin rounds in one event loop (the client's HTTP session lives in it)."""
    for runner in runners.values():  # warm-up: actors started, connections open
        await measure(runner, client, 200)
    print(f"{args.n} requests, concurrency {args.concurrency}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, runner in runners.items():
            results[name].append(await measure(runner, client, args.n))
    local_wall = min(r[0] for r in results["local"])
    local_cpu = min(r[1] for r in results["local"])
    for name, rows in results.items():
        wall, cpu, actors = min(r[0] for r in rows), min(r[1] for r in rows), min(r[2] for r in rows)
        print(f"{name:13s} wall {wall:6.2f} s ({args.n / wall:6.0f} req/s, x{local_wall / wall:.2f} local's "
              f"throughput)  driver CPU {1000 * cpu / args.n:.3f} ms/request (x{cpu / local_cpu:.2f} local)"
              + (f"  workers {1000 * actors / args.n:.3f} ms/request (x{actors / local_cpu:.2f} local)"
                 if actors else ""))
    await client.aclose()


if __name__ == "__main__":
    main()
