"""Time 100-LongBench context generation per task and length (cl100k_base, ../shared/data).

Usage: python bench/longbench100_generate.py [ROWS]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from asyncbench.benchmarks.longbench100.generator import Generator, Unbuildable
from asyncbench.benchmarks.longbench100.sources import NEEDED_EXTRA, load_sources
from asyncbench.benchmarks.longbench100.tasks import TASKS
from asyncbench.estimators.longscore import parse_length
from asyncbench.tokenizers import get_tokenizer

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    t0 = time.perf_counter()
    sources = load_sources(DATA, {n for t in TASKS.values() for n in t.real + t.noise} | NEEDED_EXTRA)
    gen = Generator(sources, get_tokenizer("cl100k_base"), seed=42)
    print(f"load sources: {time.perf_counter() - t0:.2f} s")
    print("| length | s/row (mean over tasks) | min fill | max fill |")
    print("|---|---|---|---|")
    for length in ("2k", "8k", "32k", "128k"):
        t, fills, n = time.perf_counter(), [], 0
        for task in TASKS:
            try:
                built = gen.build(task, length, parse_length(length), rows)
            except Unbuildable:
                continue
            fills += [b.context_tokens / b.target for b in built]
            n += len(built)
        print(f"| {length} | {(time.perf_counter() - t) / max(n, 1):.3f} | {min(fills):.4f} | {max(fills):.4f} |")


if __name__ == "__main__":
    main()
