"""Stopping a Ray cluster held by a holder process (the benchmarks' `ray.cluster_utils.Cluster`
in a session of its own): never `ray stop`, which stops every Ray on the host."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable


def stop_holder(proc: subprocess.Popen[str], members: Iterable[int]) -> None:
    """EOF to the holder (it shuts its nodes down), then SIGKILL to whatever of the
    cluster's `members` (PIDs read before) outlives it."""
    with contextlib.suppress(OSError):
        if proc.stdin:
            proc.stdin.close()
    try:
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
    for pid in members:
        if pid != proc.pid:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
