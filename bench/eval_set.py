"""Issue 28's acceptance set: 3 models x 2 benchmarks against simulators, two models on
one rate-limited key (simulator A, --rpm), one on another provider (simulator B). The
set shares A's limit (one limiter, learned from A's headers); the baseline runs the same
six runs at once, each with its own limiter (what six `asyncbench run`s did). Prints
wall vs the ideal set by A's limit and the 429s each way, as Markdown rows.

    PYTHONPATH=. python bench/eval_set.py [--rpm 600] [--samples 50]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio

from asyncbench.run.eval_set import execute_set, plan_set, run_configs
from asyncbench.run.flow import run
from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess
from asyncbench.store import Store


def _stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as r:
        out: dict[str, Any] = json.loads(r.read())
        return out


def _data(tmp: Path, name: str, n: int) -> str:
    path = tmp / name
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"{name}-{i}", "task": "t", "prompt": f"{name} question {i}: what is {i} plus one?",
                                "answers": [str(i + 1)], "max_tokens": 8, "metric": "contains"}) + "\n")
    return f"jsonl:{path}"


def one(shared: bool, rpm: int, n: int) -> dict[str, float]:
    a_proc, a = start_sim_subprocess(["--rpm", str(rpm)])
    b_proc, b = start_sim_subprocess([])
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            benches = [_data(tmp, "x.jsonl", n), _data(tmp, "y.jsonl", n)]
            models = [{"model": "openai-compat:a", "base_urls": [f"{a}/v1"]},
                      {"model": "openai-compat:b", "base_urls": [f"{a}/v1"]},
                      {"model": "openai-compat:c", "base_urls": [f"{b}/v1"]}]
            cfgs = run_configs(benches, models, {"cache": str(tmp / "c.duckdb"), "max_input_tokens": 1000,
                                                 "progress": False, "out": str(tmp / "set")})

            planned: list[float] = []
            c_walls: list[float] = []

            async def as_set() -> None:
                sp = await plan_set(cfgs)
                planned.append(time.monotonic())
                try:
                    result = await execute_set(sp)
                    assert result.complete, result.to_json()
                    c_walls.extend(r.summary.wall_s or 0.0 for r in result.runs
                                   if r.summary is not None and r.model.endswith(":c"))
                finally:
                    await sp.aclose()

            async def separately() -> None:
                async with anyio.create_task_group() as tg:
                    for i, cfg in enumerate(cfgs):
                        own = dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, out=str(tmp / f"run{i}")))
                        tg.start_soon(run, own, None)

            Store(tmp / "c.duckdb").close()  # made once: six first migrations at once would collide
            started = time.monotonic()
            anyio.run(as_set if shared else separately)
            ended = time.monotonic()
            wall = ended - started
            sending = ended - planned[0] if planned else wall
        sa, sb = _stats(a), _stats(b)
    finally:
        stop_sim_subprocess(a_proc)
        stop_sim_subprocess(b_proc)
    burst = rpm / 60  # the simulator's bucket holds one second's worth
    ideal = (sa["ok"] - burst) / (rpm / 60)
    return {"wall_s": wall, "sending_s": sending, "ideal_s": ideal, "ratio": wall / ideal,
            "sending_ratio": sending / ideal, "429s": sa["rate_limited"], "c_wall_s": max(c_walls, default=0.0),
            "ok_a": sa["ok"], "ok_b": sb["ok"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rpm", type=int, default=600)
    ap.add_argument("--samples", type=int, default=50)
    args = ap.parse_args()
    print("| mode | requests on key A | on B | 429s (A) | wall s | after planning s | ideal s | wall / ideal "
          "| after planning / ideal | c's runs s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shared in (True, False):
        r = one(shared, args.rpm, args.samples)
        mode = "eval set (one limiter per key)" if shared else "6 runs at once, own limiters"
        after = f"{r['sending_s']:.1f}" if shared else "-"
        after_ratio = f"{r['sending_ratio']:.3f}" if shared else "-"
        c_wall = f"{r['c_wall_s']:.1f}" if shared else "-"
        print(f"| {mode} | {r['ok_a']} | {r['ok_b']} | {r['429s']} | {r['wall_s']:.1f} | {after} | "
              f"{r['ideal_s']:.1f} | {r['ratio']:.3f} | {after_ratio} | {c_wall} |", flush=True)


if __name__ == "__main__":
    main()
