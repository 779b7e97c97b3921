"""Time `asyncbench report` stages on real simulator runs: loading runs from the store,
building the report, and rendering Markdown, JSON and HTML (matplotlib plots).

Usage: python bench/report_render.py [--runs N] [--data-dir DIR]
Creates N full MiniLongBench runs (237 samples each) against the built-in simulator in a
temporary cache (different --max-input-tokens so they are distinct runs), then times each
stage (median of 5).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from asyncbench.cli import main as cli
from asyncbench.report.data import load_runs
from asyncbench.report.html import render_html
from asyncbench.report.model import build_report
from asyncbench.report.tables import render_json, render_markdown


def timed(fn, repeat: int = 5) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache.duckdb"
        for i in range(args.runs):
            cut = [] if i == 0 else ["--max-input-tokens", str(1000 * 2 ** i)]
            cli(["run", "minilongbench", "--model", "sim", "--data-dir", args.data_dir, "--cache", str(cache),
                 "--out", f"{tmp}/r{i}", "--no-progress", *cut])
        t_load, runs = timed(lambda: load_runs(cache, []))
        t_build, report = timed(lambda: build_report(runs))
        t_md, _md = timed(lambda: render_markdown(report))
        t_json, _js = timed(lambda: render_json(report))
        t_html, html = timed(lambda: render_html(report, runs), repeat=3)
        n = sum(len(r.samples) for r in runs)
        print("| runs | samples | load (ms) | build (ms) | md (ms) | json (ms) | html+plots (ms) | html size (KB) |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        print(f"| {len(runs)} | {n} | {t_load*1e3:.0f} | {t_build*1e3:.1f} | {t_md*1e3:.1f} | {t_json*1e3:.1f} | "
              f"{t_html*1e3:.0f} | {len(html)/1024:.0f} |")


if __name__ == "__main__":
    main()
