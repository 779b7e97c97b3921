"""Peak memory and CPU of the bootstrap (`intervals` and `compare`) on 100,000 samples.

    python bench/intervals_memory.py [N]

Four strata of N/4 samples each (default N = 100,000); prints the process's peak RSS
before and after one `intervals` and one `compare`, and the CPU seconds they took.
"""

from __future__ import annotations

import resource
import sys
import time

import numpy as np

from asyncbench.estimators.intervals import Plan, compare, intervals, mean_stratum


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rng = np.random.default_rng(1)
    a = rng.random(n)
    b = np.clip(a + rng.normal(0, 0.1, n), 0, 1)

    def plan(values: np.ndarray) -> Plan:
        return Plan({f"t{i}": mean_stratum(list(values[i::4])) for i in range(4)},
                    lambda st: {"overall": sum(st.values()) / 4})

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    start = time.process_time()
    intervals(plan(a))
    compare(plan(a), plan(b))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"n={n}: peak RSS {peak} MB (before {before} MB), CPU {time.process_time() - start:.2f} s")


if __name__ == "__main__":
    main()
