"""Helpers for running the simulator as a separate process (tests, benchmarks, demos,
and `--model sim`: `sim_if`, used by the commands that start a run).

A separate process keeps the simulator off the client's event loop and GIL, which is what
throughput benchmarks need; `run_sim_in_thread` (server.py) is lighter for unit tests.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

_PREFIX = "listening on "


PARENT_ENV = "ASYNCBENCH_SIM_PARENT"


def die_with_parent() -> None:
    """In a simulator started by `start_sim_subprocess`: SIGKILL when the process that
    started it dies, even by SIGKILL (Linux PR_SET_PDEATHSIG), so `--model sim` never
    leaves a server behind. Armed by the child itself at start-up rather than in a
    `preexec_fn`: Python code between fork and exec deadlocks when another thread of the
    parent held a lock at the fork (the cache is opened in a thread meanwhile: an import
    of duckdb, DuckDB's own threads), which hung 1 run in ~10 here."""
    parent = int(os.environ.get(PARENT_ENV, "0") or 0)
    if not parent:
        return
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def start_sim_subprocess(args: list[str] | None = None, timeout: float = 30.0) -> tuple[subprocess.Popen[str], str]:
    """Start `python -m asyncbench.sim --port 0 ARGS` and wait until it listens.

    Returns the process and its base URL (http://127.0.0.1:PORT). Stop it with
    `stop_sim_subprocess`.
    """
    cmd = [sys.executable, "-m", "asyncbench.sim", "--port", "0", *(args or [])]
    # the simulator needs no credentials: keep API keys out of its environment
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    env["PYTHONUNBUFFERED"] = "1"
    env[PARENT_ENV] = str(os.getpid())  # the simulator arms die_with_parent() itself
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(_PREFIX):
            return proc, line[len(_PREFIX):].strip()
        if not line and proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"simulator exited with {proc.returncode}: {err.strip()}")
    stop_sim_subprocess(proc)
    raise RuntimeError(f"simulator did not start within {timeout} s")


def stop_sim_subprocess(proc: subprocess.Popen[str]) -> None:
    """Terminate the simulator process (and kill it if it does not exit promptly)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@contextlib.contextmanager
def sim_subprocess(args: list[str] | None = None) -> Iterator[str]:
    """Context manager form of `start_sim_subprocess`, yielding the base URL."""
    proc, base_url = start_sim_subprocess(args)
    try:
        yield base_url
    finally:
        stop_sim_subprocess(proc)


@contextlib.contextmanager
def sim_if(needed: bool) -> Iterator[str | None]:
    """The simulator for a run that names it (`RunConfig.uses_sim`), yielding its base URL
    (None when not needed): started by the command that runs, so the run path itself
    never imports the simulator; stopped when the run ends, however it ends."""
    if not needed:
        yield None
        return
    with sim_subprocess(SERVING_TIMES) as base_url:
        yield base_url


# `--model sim` serves with a server's shape of latency, small enough to keep a demo
# fast: 2 ms of overhead and 8 ms of prefill per 1,000 prompt tokens before the first
# token (a 16k-token prompt waits ~130 ms, a 4k one ~34 ms), then 0.5 ms per output token,
# so that the serving latency by context length (serving.py) has the curve it has on a
# real server.
SERVING_TIMES = ["--latency-ms", "2", "--prefill-ms-per-ktok", "8", "--per-token-ms", "0.5"]
