"""Middle truncation on the 237 MiniLongBench prompts: time per prompt, and how often
the official cut (pred.py) re-encodes to more tokens than the limit so that
`truncate_middle` has to keep fewer tokens.

    .venv/bin/python bench/truncation.py [DATA_DIR]   # default ../shared/data

Prints a Markdown table (see bench/truncation.md for measured numbers).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from asyncbench.benchmarks.base import LoadOptions
from asyncbench.benchmarks.longbench.benchmark import MiniLongBench
from asyncbench.prompt_rules.cut import truncate_middle
from asyncbench.tokenizers import get_tokenizer

LIMITS = (3500, 7500, 15500, 31500)  # LongBench's model2maxlen values for 4k..32k models


def main() -> None:
    data_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1].parent / "shared" / "data"
    t0 = time.perf_counter()
    samples = MiniLongBench().load(LoadOptions(data_dir=data_dir))
    print(f"loaded {len(samples)} MiniLongBench samples in {time.perf_counter() - t0:.2f} s\n")
    print("| tokenizer | limit | truncated | shaved (over limit after official cut) | extra tokens dropped | ms/prompt median | ms/prompt max |")
    print("|---|---|---|---|---|---|---|")
    for name in ("cl100k_base", "o200k_base"):
        tok = get_tokenizer(name)
        lengths = [tok.count(s.prompt or "") for s in samples]
        for limit in LIMITS:
            times, n_trunc, n_shaved, extra = [], 0, 0, 0
            for s, n in zip(samples, lengths):
                t = time.perf_counter()
                _, removed = truncate_middle(s.prompt or "", tok, limit)
                times.append((time.perf_counter() - t) * 1000)
                if removed:
                    n_trunc += 1
                    official = n - 2 * (limit // 2)
                    if removed > official:
                        n_shaved += 1
                        extra += removed - official
            print(f"| {name} | {limit} | {n_trunc} | {n_shaved} | {extra} | {statistics.median(times):.1f} | {max(times):.1f} |")


if __name__ == "__main__":
    main()
