"""Throughput of the endpoint simulator (`asyncbench simulate`).

Starts the simulator as a subprocess (its own core), then drives it from client
processes with raw aiohttp keep-alive connections (the cheapest Python client, so the
number measures the server, not an SDK). Prints requests per second per scenario.

    python bench/sim_throughput.py [--seconds 5] [--clients 1] [--concurrency 64]

Scenarios: tiny chat prompts with no latency; 1,000 long prompts (2k-8k words) with
200 ms latency at 64 concurrent requests; and the answerer alone on the MiniLongBench
prompts (in-process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import sys
import time
from pathlib import Path

import aiohttp

from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess

_WORDS = ["alpha", "beta", "gamma", "delta", "river", "mountain", "city", "question", "answer", "paragraph", "model", "long", "context", "evaluation", "token", "budget", "server", "client", "latency"]


async def _drive(url: str, bodies: list[bytes], concurrency: int, seconds: float | None) -> tuple[int, int, float]:
    """Send bodies round-robin (or each once when seconds is None); returns (ok, failed, elapsed)."""
    ok = failed = 0
    start = time.perf_counter()
    deadline = None if seconds is None else time.perf_counter() + seconds
    queue = iter(range(len(bodies))) if seconds is None else None
    counter = 0
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as session:

        async def worker() -> None:
            nonlocal ok, failed, counter
            while True:
                if queue is not None:
                    i = next(queue, None)
                    if i is None:
                        return
                else:
                    if time.perf_counter() >= deadline:
                        return
                    i = counter % len(bodies)
                    counter += 1
                async with session.post(url, data=bodies[i], headers={"content-type": "application/json"}) as r:
                    await r.read()
                    if r.status == 200:
                        ok += 1
                    else:
                        failed += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ok, failed, time.perf_counter() - start


def _client(url: str, bodies: list[bytes], concurrency: int, seconds: float | None, out: mp.Queue) -> None:
    out.put(asyncio.run(_drive(url, bodies, concurrency, seconds)))


def _run_clients(url: str, bodies: list[bytes], clients: int, concurrency: int, seconds: float | None) -> tuple[int, int, float]:
    out: mp.Queue = mp.Queue()
    chunks = [bodies[i::clients] for i in range(clients)]
    procs = [mp.Process(target=_client, args=(url, chunk, concurrency, seconds, out)) for chunk in chunks]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return sum(r[0] for r in results), sum(r[1] for r in results), max(r[2] for r in results)


def _chat(prompt: str, max_tokens: int = 16) -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}).encode()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tiny(seconds: float, clients: int, concurrency: int) -> str:
    proc, base = start_sim_subprocess([])
    try:
        bodies = [_chat(f"Question: what is item {i}?\nAnswer:") for i in range(1000)]
        _run_clients(base + "/v1/chat/completions", bodies[:200], clients, concurrency, 1.0)  # warm-up
        cpu0 = _cpu_seconds(proc.pid)
        ok, failed, elapsed = _run_clients(base + "/v1/chat/completions", bodies, clients, concurrency, seconds)
        cpu = _cpu_seconds(proc.pid) - cpu0
    finally:
        stop_sim_subprocess(proc)
    return (f"tiny prompts, no latency, {clients} client proc x {concurrency} conns: {ok / elapsed:,.0f} req/s "
            f"({ok} ok, {failed} failed, {elapsed:.1f} s); server used {cpu / elapsed:.0%} of a core, "
            f"i.e. {ok / max(cpu, 1e-9):,.0f} req per server CPU-second")


def long_prompts(concurrency: int) -> str:
    rng = random.Random(0)
    bodies = []
    for i in range(1000):
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2000, 8000)))
        bodies.append(_chat(f"Read this.\n\n{words}.\n\nQuestion: where is the river {i}?\nAnswer:", 32))
    proc, base = start_sim_subprocess(["--latency-ms", "200"])
    try:
        cpu0 = _cpu_seconds(proc.pid)
        ok, failed, elapsed = _run_clients(base + "/v1/chat/completions", bodies, 1, concurrency, None)
        cpu = _cpu_seconds(proc.pid) - cpu0
    finally:
        stop_sim_subprocess(proc)
    ideal = 1000 / concurrency * 0.2
    mean_chars = sum(map(len, bodies)) / len(bodies)
    return (f"1,000 long prompts (2k-8k words, {mean_chars:,.0f} bytes avg), 200 ms latency, {concurrency} concurrent: "
            f"{elapsed:.2f} s ({ok / elapsed:,.0f} req/s; ideal {ideal:.2f} s; {ok} ok, {failed} failed); "
            f"server CPU {cpu / max(ok, 1) * 1000:.2f} ms per request")


def answerer_only() -> str:
    from asyncbench.sim.answerer import answer

    root = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "minilongbench" / "samples"
    prompts = [v["origin_prompt"] for f in sorted(root.glob("*.json")) for v in json.loads(f.read_text()).values()]
    if not prompts:
        return "answerer: MiniLongBench samples not found"
    start = time.perf_counter()
    for p in prompts:
        answer(p, 512)
    elapsed = time.perf_counter() - start
    chars = sum(map(len, prompts))
    return (f"answerer on {len(prompts)} MiniLongBench prompts ({chars / len(prompts):,.0f} chars avg): "
            f"{elapsed / len(prompts) * 1000:.2f} ms per prompt")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    print(answerer_only(), flush=True)
    print(tiny(args.seconds, args.clients, args.concurrency), flush=True)
    print(long_prompts(args.concurrency), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
