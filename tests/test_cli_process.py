"""What the `asyncbench` process sets up for itself before any command runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# The CLI's main in a fresh interpreter, then numpy imported as a command would, then
# the threads the process has (Linux: one /proc/self/task entry each).
PROBE = """
import os, sys
from asyncbench.cli import main
try:
    main(["run", "--help"])
except SystemExit:
    pass
import numpy
print(os.environ.get("OPENBLAS_NUM_THREADS"), len(os.listdir("/proc/self/task")))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
@pytest.mark.parametrize("given", [None, "2"])
def test_numpy_blas_runs_on_one_thread_unless_the_user_says(given: str | None) -> None:
    """numpy's OpenBLAS would start a spinning thread per core (~100 ms of CPU per run on
    2 cores) for products one thread does as fast; a value the user set is kept."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    value, threads = done.stdout.splitlines()[-1].split()
    assert value == (given or "1")
    if given is None:
        assert int(threads) == 1, "numpy started threads of its own"
    else:
        assert int(threads) == int(given)
