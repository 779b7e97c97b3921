"""A 20,000-sample run as a user meets it: the HTML report's size and write time, and
`asyncbench samples RUN --format table`.

Makes one `jsonl:` run of 20,000 samples (8 tasks, prompts of 500-4,000 characters, ids
`task/N`) against the built-in simulator in a temporary cache, then times, each as its own
`python -m asyncbench.cli` process (median of 3; imports included, as a user waits for them):

- `asyncbench report RUN --format html --out r.html` (its size too);
- `asyncbench samples RUN --format table --out t.txt` (the table written to a file) and
  to a pipe (stdout, 80 columns);

and, in this process, the stages of the report (load, samples, render).

    nice python bench/report_20k.py [--samples 20000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from asyncbench.cli import main as cli

REPO = Path(__file__).resolve().parents[1]


def write_data(path: Path, n: int) -> None:
    rng = random.Random(0)
    words = ["the", "of", "and", "a", "to", "in", "is", "was", "he", "for", "it", "with", "as", "his", "on",
             "river", "city", "report", "court", "vote", "music", "team", "school", "energy", "market"]
    with path.open("w") as fh:
        for i in range(n):
            task = f"task{i % 8}"
            body = " ".join(rng.choice(words) for _ in range(rng.randint(100, 800)))
            fh.write(json.dumps({"id": f"{task}/{i // 8}", "task": task, "prompt": f"{body}\nQuestion {i}?\nAnswer:",
                                 "answers": [f"answer {i}"], "max_tokens": 8, "metric": "qa_f1_score"}) + "\n")


def timed_cli(args: list[str], cwd: str, repeat: int = 3) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system) of the command. On a shared,
    loaded machine the CPU time is the better guide to an idle machine's wall time."""
    times, cpu = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], cwd=cwd, capture_output=True,
                              text=True, env=dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="80"))
        times.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"{args}: exit {done.returncode}: {done.stderr[-2000:]}")
    return statistics.median(times), statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=20_000)
    ap.add_argument("--keep", metavar="DIR", help="make the run in DIR and keep it; reused when DIR has it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        data, cache = Path(tmp) / "data.jsonl", Path(tmp) / "c.duckdb"
        if not Path(tmp, "o", "run.json").is_file():
            write_data(data, args.samples)
            t0 = time.perf_counter()
            assert cli(["run", f"jsonl:{data}", "--model", "sim", "--cache", str(cache), "--out", f"{tmp}/o",
                        "--no-progress", "--concurrency", "256"]) == 0
            print(f"run: {time.perf_counter() - t0:.0f} s (not part of the figures)")
        run_id = json.loads(Path(tmp, "o", "run.json").read_text())["run_id"]

        from asyncbench.report.data import load_runs
        from asyncbench.report.html import render_html
        from asyncbench.report.model import build_report
        from asyncbench.report.samples import load_samples
        from asyncbench.store import Store

        c0, t0 = time.process_time(), time.perf_counter()
        runs = load_runs([cache], [run_id])
        t1 = time.perf_counter()
        report = build_report(runs)
        samples = {run_id: load_samples(Store(cache), run_id)}
        t2 = time.perf_counter()
        html = render_html(report, runs, samples)
        t3 = time.perf_counter()
        print(f"in process: load_runs {t1 - t0:.2f} s, build + load_samples {t2 - t1:.2f} s, "
              f"render_html {t3 - t2:.2f} s ({len(html.encode()) / 1e6:.2f} MB); CPU {time.process_time() - c0:.2f} s")

        report_s = timed_cli(["report", run_id, "--cache", str(cache), "--format", "html", "--out", f"{tmp}/r.html"],
                             tmp)
        size = Path(tmp, "r.html").stat().st_size
        table_file = timed_cli(["samples", run_id, "--cache", str(cache), "--format", "table", "--out",
                                f"{tmp}/t.txt"], tmp)
        table_pipe = timed_cli(["samples", run_id, "--cache", str(cache), "--format", "table"], tmp)
        lines = Path(tmp, "t.txt").read_text().count("\n")
        print("\nwall s (CPU s)\n\n| samples | report html | html size (MB) | samples table to a file | to a pipe |")
        print("|---:|---:|---:|---:|---:|")
        print(f"| {args.samples:,} | {report_s[0]:.2f} ({report_s[1]:.2f}) | {size / 1e6:.2f} "
              f"| {table_file[0]:.2f} ({table_file[1]:.2f}) | {table_pipe[0]:.2f} ({table_pipe[1]:.2f}) |")
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print(f"(table file: {lines} lines)")


if __name__ == "__main__":
    main()
