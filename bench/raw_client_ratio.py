"""asyncbench's client CPU per request against a raw aiohttp loop (issue 27, first acceptance bullet).

    PYTHONPATH=$PWD .venv/bin/python bench/raw_client_ratio.py [--big N] [--small N]

For each workload both clients run back to back on the same jsonl file against the same
simulator (`asyncbench.sim`, latency 0, its own process): asyncbench is the real CLI
(`python -m asyncbench.cli run jsonl:FILE ...`, a fresh cache), the raw side is this file
run as `raw URL FILE C`: one aiohttp ClientSession, an asyncio.Semaphore(C), the same
bodies asyncbench sends (a jsonl `prompt` row is raw text, so openai-compat posts it to
/v1/completions: `openai_wire.request_body`), JSON answers parsed, nothing written. Each measured command runs
under its own `python -c` wrapper, so RUSAGE_CHILDREN of that wrapper is the command's own
user+sys CPU and peak RSS (ru_maxrss). CPU, not wall: the 2-core machine is shared and wall
time is inflated by load, CPU much less. The script reports; it asserts nothing.

asyncbench streams live answers by default (--stream on, issue 38): the unstreamed rows run
it with `--stream off` against the raw loop reading whole JSON answers, as before; the
streamed rows run it with `--stream on` against the raw loop asking `stream: true` with
`stream_options.include_usage` and reading the event stream line by line (aiohttp's
StreamReader), taking the first content's time and parsing every event's JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

WRAP = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": done.returncode, "cpu": ru.ru_utime + ru.ru_stime, "rss_kb": ru.ru_maxrss,
                  "stderr": done.stderr[-2000:]}))
"""


def wrapped(cmd: list[str], repo: str = str(Path(__file__).resolve().parent.parent), cwd: str | None = None) -> dict:
    """The command's exit code, own CPU-s, peak RSS and stderr's tail, through a wrapper
    process that runs only it, importing asyncbench from `repo`."""
    out = subprocess.run([sys.executable, "-c", WRAP, *cmd], capture_output=True, text=True, cwd=cwd,
                         env={**os.environ, "PYTHONPATH": repo}, check=True)
    return json.loads(out.stdout)


def cost_line(res: dict, wall_s: float) -> str:
    """`rc 0, 3.21 CPU-s, peak RSS 180 MB, wall 4.0 s` (and stderr's tail when it failed)."""
    return (f"rc {res['rc']}, {res['cpu']:.2f} CPU-s, peak RSS {res['rss_kb'] / 1024:.0f} MB, wall {wall_s:.1f} s"
            + (" " + res["stderr"][-300:] if res["rc"] not in (0, 1) else ""))


def measured(cmd: list[str], cwd: str) -> dict:
    """The command's own CPU-s and peak RSS; a failure ends the benchmark."""
    res = wrapped(cmd, cwd=cwd)
    if res["rc"] not in (0, 1):
        raise SystemExit(f"{cmd[:4]} exited {res['rc']}: {res['stderr']}")
    return res


def asyncbench_cmd(data: Path, url: str, tmp: str, c: int, stream: bool = False) -> list[str]:
    return [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
            "--base-url", url + "/v1", "--cache", f"{tmp}/c.duckdb", "--out", tmp, "--no-progress",
            "--concurrency", str(c), "--stream", "on" if stream else "off"]


def raw_cmd(data: Path, url: str, c: int, stream: bool = False) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "raw-stream" if stream else "raw", url, str(data), str(c)]


async def raw_stream_loop(url: str, data: str, c: int) -> None:
    """The streaming floor: the same bodies with `stream: true` and the usage asked for;
    each event line's JSON parsed, the first content's time taken; nothing else."""
    import time

    import aiohttp

    sem = asyncio.Semaphore(c)
    endpoint = url + "/v1/completions"
    errors = 0

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c)) as session:
        async def one(body: dict) -> None:
            nonlocal errors
            try:
                t0, first, text, usage = time.perf_counter(), None, [], None
                async with session.post(endpoint, json=body) as r:
                    async for line in r.content:
                        if not line.startswith(b"data: "):
                            continue
                        payload = line[6:].strip()
                        if payload == b"[DONE]":
                            break
                        event = json.loads(payload)
                        if event.get("usage"):
                            usage = event["usage"]
                        for choice in event.get("choices") or ():
                            if choice.get("text"):
                                first = first or time.perf_counter() - t0
                                text.append(choice["text"])
                if r.status != 200 or not text or usage is None or first is None:
                    errors += 1
            finally:
                sem.release()

        tasks = set()
        with open(data) as fh:
            for line in fh:
                row = json.loads(line)
                body = {"model": "sim", "max_tokens": row["max_tokens"], "temperature": 0.0, "prompt": row["prompt"],
                        "stream": True, "stream_options": {"include_usage": True}}
                await sem.acquire()
                t = asyncio.create_task(one(body))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
    if errors:
        raise SystemExit(f"raw stream loop: {errors} failed requests")


async def raw_loop(url: str, data: str, c: int) -> None:
    """The physical floor: read, build the body, POST, parse the JSON answer; nothing else."""
    import aiohttp

    sem = asyncio.Semaphore(c)
    endpoint = url + "/v1/completions"
    errors = 0

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=c)) as session:
        async def one(body: dict) -> None:
            nonlocal errors
            try:
                async with session.post(endpoint, json=body) as r:
                    answer = await r.json()
                    if r.status != 200 or not answer["choices"][0]["text"]:
                        errors += 1
            finally:
                sem.release()

        tasks = set()
        with open(data) as fh:
            for line in fh:
                row = json.loads(line)
                body = {"model": "sim", "max_tokens": row["max_tokens"], "temperature": 0.0, "prompt": row["prompt"]}
                await sem.acquire()
                t = asyncio.create_task(one(body))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
    if errors:
        raise SystemExit(f"raw loop: {errors} failed requests")


def row(label: str, n: int, a: dict, r: dict, start: tuple[float, float]) -> str:
    """Whole-process CPU per request and its ratio, then the same with each side's start-up
    (a 10-prompt run of the same command) taken off: the cost each further request adds."""
    ams, rms = 1000 * a["cpu"] / n, 1000 * r["cpu"] / n
    amarg, rmarg = 1000 * (a["cpu"] - start[0]) / n, 1000 * (r["cpu"] - start[1]) / n
    return (f"| {label} | {ams:.2f} | {rms:.2f} | {ams / rms:.2f} | {amarg:.2f} | {rmarg:.2f} | {amarg / rmarg:.2f} | "
            f"{a['rss_kb'] / 1024:,.0f} MB | {r['rss_kb'] / 1024:,.0f} MB |")


def startup(url: str, tmp: Path, stream: bool = False) -> tuple[float, float]:
    """CPU-s of each side on 10 prompts: interpreter, imports, planning, store, report."""
    from engine_throughput import write_data

    tiny = tmp / "tiny.jsonl"
    write_data(tiny, 10, (5, 20), 4, seed=3)
    with tempfile.TemporaryDirectory() as run_dir:
        a = measured(asyncbench_cmd(tiny, url, run_dir, 64, stream), run_dir)
        r = measured(raw_cmd(tiny, url, 64, stream), run_dir)
    return a["cpu"], r["cpu"]


def main() -> None:
    # imported here, not at the top: the raw side (this file run as `raw ...`) imports only
    # what its loop uses, so its start-up is the floor's and not this harness's
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from engine_throughput import write_data

    from asyncbench.sim.testing import sim_subprocess

    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=20_000, help="prompts in the small workloads")
    ap.add_argument("--big", type=int, default=100_000, help="prompts in the big (and warm) workload")
    ap.add_argument("--long", type=int, default=1_000, help="40 KB prompts")
    ap.add_argument("--only-stream", action="store_true", help="only the streamed rows (and their start-up)")
    args = ap.parse_args()
    # Both sides run from bytecode, as an installed package does (pip writes the .pyc files
    # at install). Without this, under PYTHONDONTWRITEBYTECODE (set on these machines) or in
    # a fresh checkout, every measured process compiled asyncbench's ~90 modules from
    # source: ~60 ms of start-up that no user pays, charged to the whole-process ratio.
    root = Path(__file__).resolve().parent
    for folder in (root.parent / "asyncbench", root):
        compileall.compile_dir(str(folder), quiet=1)
    print(f"load average at start: {os.getloadavg()}", flush=True)
    print("| workload | asyncbench ms CPU/req | raw aiohttp ms CPU/req | ratio | asyncbench ms/req "
          "less start-up | raw ms/req less start-up | ratio less start-up | asyncbench peak RSS | raw peak RSS |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory() as d, sim_subprocess(["--latency-ms", "0"]) as url:
        tmp = Path(d)
        small, big, long = tmp / "small.jsonl", tmp / "big.jsonl", tmp / "long.jsonl"
        write_data(small, args.small, (5, 20), 4)
        write_data(big, args.big, (5, 20), 4, seed=1)
        _, chars = write_data(long, args.long, (5000, 5000), 16, seed=2)  # ~40 KB each
        starts = {stream: startup(url, tmp, stream) for stream in ((True,) if args.only_stream else (False, True))}
        for stream, start in starts.items():
            print(f"start-up (10 prompts{', streamed' if stream else ''}): asyncbench {start[0]:.2f} CPU-s, "
                  f"raw {start[1]:.2f} CPU-s", flush=True)
        work = [(f"{args.small // 1000}k small, C=64", small, 64, args.small, False),
                (f"{args.small // 1000}k small, C=256", small, 256, args.small, False),
                (f"{args.long:,} x {chars / args.long / 1000:.0f} KB prompts, C=64", long, 64, args.long, False),
                (f"{args.big // 1000}k small, C=256", big, 256, args.big, False),
                (f"{args.small // 1000}k small, C=64, streamed", small, 64, args.small, True),
                (f"{args.small // 1000}k small, C=256, streamed", small, 256, args.small, True)]
        for label, data, c, n, stream in work:
            if args.only_stream and not stream:
                continue
            with tempfile.TemporaryDirectory() as run_dir:
                a = measured(asyncbench_cmd(data, url, run_dir, c, stream), run_dir)
                r = measured(raw_cmd(data, url, c, stream), run_dir)
                print(row(label, n, a, r, starts[stream]), flush=True)
                if data is big:
                    w = measured(asyncbench_cmd(data, url, run_dir, c), run_dir)
                    sent = json.loads(Path(run_dir, "run.json").read_text())["this_invocation"]["requests"]
                    print(f"| {args.big // 1000}k warm re-run ({sent} requests), C=256 | {w['cpu']:.2f} CPU-s in all "
                          f"| | | | | | {w['rss_kb'] / 1024:,.0f} MB | |", flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("raw", "raw-stream"):
        loop = raw_stream_loop if sys.argv[1] == "raw-stream" else raw_loop
        asyncio.run(loop(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    else:
        main()
