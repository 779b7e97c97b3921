"""Shared fixtures: the reference data directory and real simulator servers."""

from __future__ import annotations

import json
import signal
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Tests Ctrl-C a run (SIGINT to a child). A suite started in the background of a shell
# (`make test &`, a CI runner's job) inherits SIGINT ignored, and so would every child,
# which then never sees the signal: catch it here, so that children start with it at its
# default and Python's own handler.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs in a folder of its own: a run without --out writes runs/RUN_ID
    under the working directory, and tests once filled the checkout's runs/ with theirs."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not beside the checkout")
    return SHARED_DATA


class Sim:
    """A simulator subprocess on 127.0.0.1 and its /stats."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def stats(self, log: bool = False) -> dict:
        with urllib.request.urlopen(f"{self.base_url}/stats{'?log=1' if log else ''}", timeout=10) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        self._post("reset")

    def hold(self, held: bool = True) -> None:
        """Hold every answer from now on (requests are still received and counted), or
        release them."""
        self._post("hold" if held else "release")

    def _post(self, what: str) -> None:
        req = urllib.request.Request(f"{self.base_url}/stats/{what}", method="POST", data=b"")
        urllib.request.urlopen(req, timeout=10).read()


@pytest.fixture
def start_sim() -> Iterator[Callable[..., Sim]]:
    """Start simulators with CLI flags; all are stopped after the test."""
    from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess

    procs = []

    def start(*args: str) -> Sim:
        proc, base_url = start_sim_subprocess(list(args))
        procs.append(proc)
        return Sim(base_url)

    yield start
    for proc in procs:
        stop_sim_subprocess(proc)
