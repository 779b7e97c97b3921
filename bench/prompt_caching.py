"""What prompt caching and the batch APIs cost on BAMBOO, via the simulator.

    .venv/bin/python bench/prompt_caching.py [MODEL ...]
    .venv/bin/python bench/prompt_caching.py plan    # the cost of finding the prefixes

For each model (default: anthropic:claude-sonnet-4-5, openai:gpt-4.1, openai:gpt-4o-mini)
BAMBOO (both lengths; the malformed row excluded) runs four times against the simulator, each with a
fresh cache and an empty simulator prompt cache: live at list price (--prompt-cache off),
live with prompt caching (auto), --batch, and --batch with prompt caching. The dollars
are the ledger's, at the shipped list prices of each model (the simulator reports the
usage a provider would: cached and cache-write tokens). Prints the rows of
bench/prompt_caching.md: USD per mode, and the share of input tokens read from cache
per dataset in the live prompt-caching run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from asyncbench.sim.testing import sim_subprocess

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
MODELS = ["anthropic:claude-sonnet-4-5", "openai:gpt-4.1", "openai:gpt-4o-mini"]
MODES = {"list": ["--prompt-cache", "off"], "prompt_cache": ["--prompt-cache", "auto"],
         "batch": ["--batch", "--prompt-cache", "off"], "batch_prompt_cache": ["--batch", "--prompt-cache", "auto"]}


def run(tmp: Path, url: str, model: str, mode: str) -> tuple[dict[str, Any], list[tuple[Any, ...]], float]:
    import duckdb

    urllib.request.urlopen(urllib.request.Request(url + "/stats/reset", method="POST", data=b""), timeout=10).read()
    base = url + "/v1" if model.startswith("openai") else url
    name = f"{model.replace(':', '_')}-{mode}"
    cmd = [sys.executable, "-m", "asyncbench.cli", "run", "bamboo", "--length", "both",
           "--model", model, "--base-url", base, "--data-dir", str(DATA), "--cache", f"{tmp}/{name}.duckdb",
           "--out", f"{tmp}/{name}", "--no-progress", "--concurrency", "32", *MODES[mode]]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    wall = time.perf_counter() - t0
    if done.returncode not in (0, 1, 3):  # 3: partial (a sample too long for the model fails)
        raise SystemExit(done.stderr[-3000:])
    con = duckdb.connect(f"{tmp}/{name}.duckdb", read_only=True)
    by_task = con.execute("SELECT task, sum(prompt_tokens), sum(cached_prompt_tokens), sum(cache_write_tokens) "
                          "FROM ledger_requests WHERE source = 'sent' GROUP BY task ORDER BY task").fetchall()
    con.close()
    return json.loads(Path(tmp, name, "run.json").read_text()), by_task, wall


def plan_cost() -> None:
    """Seconds `plan_prefixes` takes on engine_throughput.py's 1,000 unique long prompts
    (24 MB, nothing shared) and on BAMBOO's prompts (both lengths), tokens counted as the
    engine counts them for an OpenAI model (tiktoken)."""
    sys.path.insert(0, str(REPO / "bench"))
    from engine_throughput import write_data

    from asyncbench.benchmarks import parse_benchmark
    from asyncbench.benchmarks.base import LoadOptions
    from asyncbench.prompt_cache import plan_prefixes
    from asyncbench.tokenizers import get_tokenizer

    count = get_tokenizer("o200k_base").count
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "long.jsonl"
        write_data(path, 1000, (2000, 8000), 16)
        unique = [json.loads(line)["prompt"] for line in path.open()]
    bench, tasks = parse_benchmark("bamboo", {"length": "both"}, DATA)
    bamboo = [s.prompt or "" for s in bench.load(LoadOptions(data_dir=DATA, tasks=tasks, limit=None,
                                                               extra={"length": "both"}))]
    for name, texts in (("1,000 unique long prompts", unique), ("BAMBOO, both lengths", bamboo)):
        t0 = time.perf_counter()
        plan = plan_prefixes(texts, count, 1024)
        dt = time.perf_counter() - t0
        print(f"| {name} | {len(texts):,} prompts, {sum(map(len, texts)) / 1e6:.1f} MB | {dt * 1000:.0f} ms "
              f"| {len(plan.groups)} groups, {plan.marked} requests marked |")


def main() -> None:
    if sys.argv[1:] == ["plan"]:
        plan_cost()
        return
    models = sys.argv[1:] or MODELS
    cost_rows, share_rows = [], []
    with tempfile.TemporaryDirectory() as d, sim_subprocess(["--batch-turnaround-s", "0.2"]) as url:
        tmp = Path(d)
        for model in models:
            usd: dict[str, float] = {}
            scores = set()
            shares: list[tuple[Any, ...]] = []
            read_total = prompt_total = 0
            for mode in MODES:
                summary, by_task, wall = run(tmp, url, model, mode)
                usd[mode] = summary["cost_usd"]["total"]
                scores.add(json.dumps(summary["scores"], sort_keys=True))
                print(f"# {model} {mode}: ${usd[mode]:.4f} in {wall:.0f} s", file=sys.stderr, flush=True)
                if mode == "prompt_cache":
                    shares = by_task
                    prompt_total = summary["tokens"]["total"]["prompt_tokens"]
                    read_total = summary["tokens"]["total"]["cached_prompt_tokens"]
            same = "yes" if len(scores) == 1 else "NO"
            cost_rows.append(
                f"| {model} | ${usd['list']:.3f} | ${usd['prompt_cache']:.3f} ({100 * usd['prompt_cache'] / usd['list']:.0f}%) "
                f"| ${usd['batch']:.3f} ({100 * usd['batch'] / usd['list']:.0f}%) "
                f"| ${usd['batch_prompt_cache']:.3f} ({100 * usd['batch_prompt_cache'] / usd['list']:.0f}%) "
                f"| {100 * read_total / max(1, prompt_total):.0f}% | {same} |")
            for task, prompt, read, written in shares:
                share_rows.append(f"| {model} | {task} | {prompt:,} | {read:,} ({100 * read / max(1, prompt):.0f}%) "
                                  f"| {written:,} |")
    print("| model | list (live, --prompt-cache off) | live + prompt cache | --batch | --batch + prompt cache "
          "| input read from cache | same scores in all four |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(cost_rows))
    print()
    print("| model | dataset | input tokens | read from cache | written to cache |")
    print("|---|---|---|---|---|")
    print("\n".join(share_rows))


if __name__ == "__main__":
    main()
