"""The HTTP answer fuzzing of tests/test_http_fuzz.py, longer and with random seeds.

`make test` runs its properties on fixed seeds (~11,000 cases); this runs the same
properties on fresh random ones, as many cases as asked, and prints how many ran and how
long each property took (bench/http_fuzz.md has a run's figures). A failure prints
hypothesis's reproduction blob and the shrunk case, and the script exits non-zero.

    PYTHONPATH=$PWD .venv/bin/python bench/http_fuzz.py --direct 100000 --sockets 2000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import test_http_fuzz as fuzz  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def direct(test: Any, examples: int) -> int:
    """One of the module's fed-directly properties, `examples` random cases of it."""
    ran = 0

    def counted(data: st.DataObject) -> None:
        nonlocal ran
        ran += 1
        test.hypothesis.inner_test(data)

    settings(fuzz.DIRECT, max_examples=examples, derandomize=False)(given(st.data())(counted))()
    return ran


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--direct", type=int, default=100_000, help="cases fed to the parser directly, per property")
    ap.add_argument("--sockets", type=int, default=2_000, help="cases over real sockets, per transport")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    total, t_all = 0, time.perf_counter()
    for test in (fuzz.test_a_valid_answer_split_anywhere_reads_as_its_body,
                 fuzz.test_a_mutated_answer_ends_in_an_answer_or_a_classified_error,
                 fuzz.test_a_hostile_answer_ends_in_a_classified_error):
        t0, c0 = time.perf_counter(), time.process_time()
        ran = direct(test, args.direct)
        total += ran
        print(f"| {test.__name__} (fed directly) | {ran:,} | {time.perf_counter() - t0:.1f} s | "
              f"{time.process_time() - c0:.1f} CPU-s |", flush=True)
    for transport in fuzz.TRANSPORTS:
        t0, c0 = time.perf_counter(), time.process_time()
        ran = fuzz._sockets(transport, args.sockets, derandomize=False)
        total += ran
        print(f"| over sockets to {transport} | {ran:,} | {time.perf_counter() - t0:.1f} s | "
              f"{time.process_time() - c0:.1f} CPU-s (client side) |", flush=True)
    print(f"{total:,} cases in {time.perf_counter() - t_all:.0f} s; load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
