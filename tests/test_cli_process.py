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


def test_a_reader_that_leaves_early_is_no_traceback(tmp_path) -> None:
    """`asyncbench samples RUN | head -c 100`: the pipe closes under a long output; the
    command ends quietly (exit 0: the reader has what it wanted), not with a traceback (its
    handler sat after `except Exception`, which took the error first)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    cache = tmp_path / "c.duckdb"
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"p{i} " + "x " * 400, "answers": ["a"]}) + "\n"
                            for i in range(200)))
    cli = f"{sys.executable} -c 'import sys; from asyncbench.cli import main; sys.exit(main())'"
    env = {**os.environ, "PYTHONPATH": str(root)}
    assert subprocess.run(f"{cli} run jsonl:{data} --model sim --cache {cache} --out {tmp_path}/o --no-progress",
                          shell=True, env=env, capture_output=True).returncode == 0
    run_id = json.loads((tmp_path / "o" / "run.json").read_text())["run_id"]
    done = subprocess.run(f"set -o pipefail; {cli} samples {run_id} --cache {cache} --format jsonl | head -c 100",
                          shell=True, executable="/bin/bash", env=env, capture_output=True, text=True)
    assert "Traceback" not in done.stderr and done.returncode == 0, done.stderr
