"""Helpers for running the simulator as a separate process (tests, benchmarks, demos).

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
from collections.abc import Callable, Iterator

_PREFIX = "listening on "


def _die_with_parent(parent: int) -> Callable[[], None]:
    """In the child before exec: SIGKILL when the process that started it dies, even by
    SIGKILL (Linux PR_SET_PDEATHSIG), so `--model sim` never leaves a server behind."""
    def arm() -> None:
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(1)

    return arm


def start_sim_subprocess(args: list[str] | None = None, timeout: float = 30.0) -> tuple[subprocess.Popen[str], str]:
    """Start `python -m asyncbench.sim --port 0 ARGS` and wait until it listens.

    Returns the process and its base URL (http://127.0.0.1:PORT). Stop it with
    `stop_sim_subprocess`.
    """
    cmd = [sys.executable, "-m", "asyncbench.sim", "--port", "0", *(args or [])]
    # the simulator needs no credentials: keep API keys out of its environment
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_die_with_parent(os.getpid()))
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
