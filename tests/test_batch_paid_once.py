"""A batch is paid once (issue 24, servers 7): a run SIGKILLed at every point of a batch
submission — before the upload, after it, after the batch exists but before its id is
on record, after it is recorded — while a second process holds the DuckDB cache, is
finished by the same command with exactly one batch billed.

Real parts only: `asyncbench run` subprocesses, the simulator's batch APIs (holding a
call at a stage with --batch-hold, so the kill lands there), a process holding the
cache file's lock, and the batch journal the run leaves behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from asyncbench.sim.testing import sim_subprocess

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
pytestmark = [pytest.mark.skipif(not (DATA / "minilongbench").exists() and not (DATA / "longbench").exists(),
                                 reason="../shared/data is not beside the checkout"), pytest.mark.slow]

HOLDER = """
import duckdb, pathlib, sys, time
path = sys.argv[1]
wait = pathlib.Path(path + ".wait")
while True:
    wait.touch()  # asks the run that keeps the file open to let go, as Store does
    try:
        con = duckdb.connect(path)
        break
    except duckdb.IOException:
        time.sleep(0.02)
wait.unlink(missing_ok=True)
print("held", flush=True)
time.sleep(600)
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return dict(env, PYTHONPATH=str(REPO), ASYNCBENCH_LOCK_WAIT_S="300")


def _stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as r:
        return dict(json.loads(r.read()))


def _cmd(tmp: Path, url: str, model: str) -> list[str]:
    base = url + "/v1" if model.startswith("openai") else url
    return [sys.executable, "-m", "asyncbench.cli", "run", "minilongbench", "--limit", "1", "--model", model,
            "--base-url", base, "--data-dir", str(DATA), "--cache", str(tmp / "c.duckdb"), "--out", str(tmp / "out"),
            "--batch", "--progress", "--json"]


def _wait_for(check: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


POINTS = [("openai:gpt-4o-mini", "upload"), ("openai:gpt-4o-mini", "create"), ("openai:gpt-4o-mini", "created"),
          ("openai:gpt-4o-mini", "recorded"), ("anthropic:claude-haiku-4-5", "create"),
          ("anthropic:claude-haiku-4-5", "created"), ("anthropic:claude-haiku-4-5", "recorded")]


@pytest.mark.parametrize("model,point", POINTS)
def test_sigkill_at_each_point_of_a_submission_with_the_cache_held_bills_one_batch(
        model: str, point: str, tmp_path: Path) -> None:
    hold = [] if point == "recorded" else ["--batch-hold", f"{point}=3"]
    with sim_subprocess(["--batch-turnaround-s", "1", *hold]) as url:
        cmd = _cmd(tmp_path, url, model)
        run = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        holder = None
        try:
            if point == "recorded":
                assert run.stderr is not None
                line = ""
                while "submitted" not in line:
                    line = run.stderr.readline()
                    assert line, "the run ended before submitting"
            else:  # the run's call is held at `point` by the simulator
                _wait_for(lambda: _stats(url)["batch_holds"] >= 1, f"the run to reach {point}")
            holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "c.duckdb")], env=_env(),
                                      stdout=subprocess.PIPE, text=True)
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            run.send_signal(signal.SIGKILL)  # while another process holds the cache
            run.wait()
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
            if run.stderr is not None:
                run.stderr.close()
            if holder is not None:
                holder.kill()
                holder.wait()
        before = _stats(url)["batches_submitted"]
        assert before == (1 if point in ("created", "recorded") else 0)
        done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
        stats = _stats(url)
    summary = json.loads((tmp_path / "out" / "run.json").read_text())
    assert done.returncode == 0 and summary["complete"], done.stderr
    assert stats["batches_submitted"] == 1, done.stderr  # one batch billed
    assert stats["requests"] == 0  # and nothing went live
    if point == "created":
        assert "found at the provider" in done.stderr, done.stderr
    assert not list((tmp_path / "c.duckdb.journal").glob("*.batches"))  # every submission resolved
