"""Engine throughput benchmarks against the simulator (a separate process on 127.0.0.1).

    .venv/bin/python bench/engine_throughput.py [overhead|long|limits|unknown|all] [RUN OPTIONS]

RUN OPTIONS go to the `long` scenario's `asyncbench run` (after its own), e.g.
`long --model openai:gpt-4.1 --prompt-cache off` (bench/prompt_caching.md compares
`--prompt-cache auto` and `off` this way: the simulator speaks OpenAI too).

Each scenario runs the real CLI (`asyncbench run jsonl:...`) end to end — loading, cache
lookups, scheduling, DuckDB writes, scoring — with a fresh cache, and prints one row of
bench/engine_throughput.md. Numbers are noisy on a shared 2-core machine: compare
ratios within one run.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from asyncbench.sim.testing import sim_subprocess
from asyncbench.tokenizers import approx_count


def write_data(path: Path, n: int, words: tuple[int, int], max_tokens: int, seed: int = 0) -> tuple[int, int]:
    """n unique prompts; returns (total request tokens as TPM counts them, total prompt chars)."""
    rng = random.Random(seed)
    vocab = [f"tok{i}" for i in range(5000)]
    tokens = chars = 0
    with path.open("w") as fh:
        for i in range(n):
            k = rng.randint(*words)
            prompt = f"Document {i}: " + " ".join(rng.choice(vocab) for _ in range(k)) + f"\nQuestion {i}: summarise.\nAnswer:"
            tokens += approx_count(prompt) + max_tokens
            chars += len(prompt)
            fh.write(json.dumps({"id": str(i), "prompt": prompt, "answers": ["x"], "max_tokens": max_tokens}) + "\n")
    return tokens, chars


def run(data: Path, base_url: str, *extra: str) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
               "--base-url", base_url + "/v1", "--cache", f"{tmp}/c.duckdb", "--out", tmp, "--no-progress", *extra]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode not in (0, 1):
            raise SystemExit(done.stderr)
        return json.loads(Path(tmp, "run.json").read_text()), wall


def stats(base_url: str) -> dict:
    import urllib.request

    with urllib.request.urlopen(base_url + "/stats") as r:
        return json.loads(r.read())


def overhead(tmp: Path) -> str:
    n = 5000
    write_data(tmp / "small.jsonl", n, (5, 20), 4)
    with sim_subprocess([]) as url:
        s, wall = run(tmp / "small.jsonl", url, "--concurrency", "64")
    return (f"| client overhead: {n} small requests, no latency, concurrency 64 | "
            f"{s['this_invocation']['requests'] / s['wall_s']:,.0f} req/s end to end (run wall {s['wall_s']:.2f} s, process {wall:.2f} s) | "
            f"completed {s['samples']['settled']}/{n} |")


def long_prompts(tmp: Path, *extra: str) -> str:
    n = 1000
    _, chars = write_data(tmp / "long.jsonl", n, (2000, 8000), 16)
    with sim_subprocess(["--latency-ms", "200"]) as url:
        s, wall = run(tmp / "long.jsonl", url, "--concurrency", "64", *extra)
    ideal = math.ceil(n / 64) * 0.2  # 16 waves of 64 concurrent 200 ms requests
    options = f" ({' '.join(extra)})" if extra else ""
    return (f"| {n} unique long prompts (2k-8k words, {chars / 1e6:.0f} MB), 200 ms latency, concurrency 64{options} | "
            f"run wall {s['wall_s']:.2f} s (ideal {ideal:.2f} s; process {wall:.2f} s incl. start-up) | "
            f"completed {s['samples']['settled']}/{n} |")


def limited(tmp: Path, client_knows: bool) -> str:
    n, rpm, tpm = 200, 300, 400_000
    tokens, _ = write_data(tmp / "lim.jsonl", n, (900, 1500), 64, seed=1)
    ideal = max(n / rpm, tokens / tpm) * 60
    with sim_subprocess(["--rpm", str(rpm), "--tpm", str(tpm), "--latency-ms", "50"]) as url:
        extra = ["--rpm", str(rpm), "--tpm", str(tpm)] if client_knows else []
        s, _ = run(tmp / "lim.jsonl", url, "--concurrency", "32", *extra)
        st = stats(url)
    label = "limits given to the client" if client_knows else "limits unknown to the client"
    return (f"| {n} requests, {tokens:,} tokens, sim 300 RPM + 400k TPM, {label} | "
            f"wall {s['wall_s']:.1f} s vs ideal {ideal:.1f} s ({s['wall_s'] / ideal:.3f}x); "
            f"429s {st['rate_limited']} ({100 * st['rate_limited'] / n:.1f}% of requests) | "
            f"completed {s['samples']['settled']}/{n} |")


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rows = []
        if which in ("overhead", "all"):
            rows.append(overhead(tmp))
        if which in ("long", "all"):
            rows.append(long_prompts(tmp, *sys.argv[2:]))
        if which in ("limits", "all"):
            rows.append(limited(tmp, True))
        if which in ("unknown", "all"):
            rows.append(limited(tmp, False))
        for r in rows:
            print(r, flush=True)


if __name__ == "__main__":
    main()
