"""A run's life on the command line: `--resume` with an id prefix alone, a killed run shown
as interrupted (not running forever), `cache clear` keeping the run history unless asked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from asyncbench.sim.testing import sim_subprocess

REPO = Path(__file__).resolve().parents[1]


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=300, cwd=tmp)


def _data(tmp: Path, n: int) -> Path:
    path = tmp / "d.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"question {i}", "answers": ["a"]}) + "\n"
                            for i in range(n)))
    return path


def _answered(url: str) -> int:
    import urllib.request

    with urllib.request.urlopen(f"{url}/stats", timeout=10) as r:
        return int(json.loads(r.read())["ok"])


def runs(tmp: Path) -> str:
    done = cli(tmp, "cache", "runs", "--cache", str(tmp / "c.duckdb"))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_resume_by_prefix_alone_and_interrupted_runs(tmp_path: Path) -> None:
    data = _data(tmp_path, 200)
    with sim_subprocess(["--latency-ms", "100"]) as url:
        cmd = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:m",
               "--base-url", url + "/v1", "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o"),
               "--concurrency", "2", "--no-progress"]
        proc = subprocess.Popen(cmd, env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=tmp_path)
        # killed once it has been paid for a few answers: by the simulator's count, not a
        # sleep (Python's start-up alone took over 4 s at load 15)
        deadline = time.monotonic() + 120
        while _answered(url) < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        listed = runs(tmp_path)
        assert " interrupted " in listed and " running " not in listed, listed
        run_id = listed.split()[0]
        done = cli(tmp_path, "run", "--resume", run_id[:6], "--cache", str(tmp_path / "c.duckdb"),
                   "--out", str(tmp_path / "o"), "--no-progress")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "o" / "run.json").read_text())
    assert summary["run_id"] == run_id and summary["complete"] and len(summary["invocations"]) == 2
    assert not summary["invocations"][0]["finished"] and summary["invocations"][1]["finished"]
    # the killed invocation could not book itself: the next one books its requests and time
    killed = summary["invocations"][0]
    assert killed["requests"] >= killed["sent"] > 0 and killed["wall_s"] > 0 and killed["cost_usd"] >= 0
    assert " complete " in runs(tmp_path)


def test_run_needs_a_benchmark_or_resume(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "--model", "sim")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "--resume" in done.stderr
    done = cli(tmp_path, "run", "--resume", "zzzz", "--cache", str(tmp_path / "c.duckdb"))
    assert done.returncode == 2 and "no run 'zzzz'" in done.stderr


def test_cache_clear_keeps_run_history_unless_asked(tmp_path: Path) -> None:
    data = _data(tmp_path, 5)
    done = cli(tmp_path, "run", f"jsonl:{data}", "--model", "sim", "--cache", str(tmp_path / "c.duckdb"),
               "--out", str(tmp_path / "o"), "--no-progress")
    assert done.returncode == 0, done.stderr
    cleared = cli(tmp_path, "cache", "clear", "--yes", "--cache", str(tmp_path / "c.duckdb"))
    assert "deleted 5 cached responses" in cleared.stdout and "run history kept" in cleared.stdout
    assert "samples=5" in runs(tmp_path)
    assert cli(tmp_path, "report", "--cache", str(tmp_path / "c.duckdb"), "--format", "json").returncode == 0
    cleared = cli(tmp_path, "cache", "clear", "--yes", "--runs", "--cache", str(tmp_path / "c.duckdb"))
    assert "run history deleted" in cleared.stdout and runs(tmp_path).strip() == ""


def test_asyncbench_cache_names_the_default_cache(tmp_path: Path) -> None:
    data = _data(tmp_path, 3)
    env = dict(os.environ, PYTHONPATH=str(REPO), ASYNCBENCH_CACHE=str(tmp_path / "mine.duckdb"))
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "sim",
                           "--out", str(tmp_path / "o"), "--no-progress"], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mine.duckdb").is_file()


def test_progress_fits_80_columns_and_speaks_in_ci_logs(tmp_path: Path, monkeypatch) -> None:
    """In 80 columns the bar drops fields rather than cut numbers; without a terminal one
    plain line goes to stderr every 10 s."""
    import io

    from asyncbench import progress as P

    prog = P.RunProgress(1000, "minilongbench openai:gpt-4o-mini", enabled=False, stats=lambda: (3, 1))
    for _ in range(500):
        prog.add("sent", 100, 0.001)
    full = prog._stats()
    assert "answered 500" in full and "retries 3" in full and "429s 1" in full and "ETA" in full
    short = prog._stats(40)
    assert len(short) <= 40 and "answered 500" in short and "…" not in short
    assert short.split("  ") == [f for f in full.split("  ") if f in short.split("  ")]  # whole fields, in order
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(P, "PLAIN_EVERY_S", 0.0)
    plain = P.RunProgress(3, "jsonl m", enabled=None)
    assert plain.plain and not plain.enabled
    plain.add("sent")
    assert err.getvalue().startswith("jsonl m: 1/3  answered 1")
