"""100-LongBench in a real `asyncbench` process, as a new user meets it (issue 36 items 1
and 5): the dry run speaks before generating and stays flat in memory as rows grow, one
SIGINT stops generation with the command to start again, and a run that needs a judge
and has none refuses before building anything or recording a run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not (DATA / "minilongbench").is_dir(), reason="../shared/data not available")
CLI = [sys.executable, "-c", "import sys; from asyncbench.cli import main; sys.exit(main())"]


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "ASYNCBENCH_DATA_DIR": str(DATA),
            "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args, "--cache", str(tmp_path / "c.duckdb")], env=_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)


def _peak_rss_mb(tmp_path: Path, rows: int, *args: str, lengths: str = "128k", cache: str = "c.duckdb") -> float:
    """A 100-LongBench command's peak resident memory (the larger of its own and its
    simulator's), in MB, read by a wrapper process that runs only it: a child's ru_maxrss
    counts the process it was forked from, and a pytest worker may hold more than the
    command (the difference of two readings was then 0)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from raw_client_ratio import WRAP

    done = subprocess.run([sys.executable, "-c", WRAP, *CLI, "run", "100-longbench:kv_retrieval,passage_count",
                           "--model", "sim", *args, "--lengths", lengths, "--rows", str(rows), "--cache",
                           str(tmp_path / cache)], env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=900)
    measured = json.loads(done.stdout)
    assert measured["rc"] == 0, measured["stderr"]
    return float(measured["rss_kb"]) / 1024


def test_dry_run_memory_is_flat_in_the_number_of_rows(tmp_path: Path) -> None:
    """Samples are priced as they come and let go: 30 rows of 128k contexts cost about
    what 4 do (today's main held every context and every trial cut: +350 MB here)."""
    small, large = _peak_rss_mb(tmp_path, 4, "--dry-run"), _peak_rss_mb(tmp_path, 30, "--dry-run")
    assert large - small < 80, (small, large)


def test_dry_run_says_what_it_generates_before_it_generates(tmp_path: Path) -> None:
    """The first line out says what will be built, and the progress lines come before
    the table (main printed nothing until the table)."""
    proc = subprocess.Popen([*CLI, "run", "100-longbench", "--model", "sim", "--dry-run", "--lengths", "2k,8k",
                             "--rows", "3", "--progress", "--cache", str(tmp_path / "c.duckdb")],
                            env=_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert proc.poll() is None  # still running: the line came before the work
    rest = proc.stdout.read()
    assert proc.wait(timeout=600) == 0, rest
    assert first.startswith("asyncbench: 100-longbench: generating up to 72 samples (8 tasks x 3 lengths x 3 rows)")
    assert "samples to build" in rest and "pricing 100-longbench" in rest
    assert rest.index("pricing 100-longbench") < rest.index("dry run:")


@pytest.mark.parametrize("after_s", [0.2, 1.0])
def test_one_sigint_stops_generation_with_the_command_to_start_again(tmp_path: Path, after_s: float) -> None:
    """Generation is CPU-bound Python: the first SIGINT must stop it between two samples
    (once it cancelled a task that never yielded; only a second one got through). At
    0.2 s the signal lands while planning asks the server for its tokenizer in a worker
    thread (a shielded wait there once swallowed it, and the run went on to send every
    request), or in the run, whose samples are built in a worker thread as they are sent:
    either way one line says how to go on (start again, or resume the run it booked)."""
    argv = ["run", "100-longbench:kv_retrieval", "--model", "sim", "--lengths", "128k", "--rows", "2000",
            "--progress", "--cache", str(tmp_path / "c.duckdb")]
    proc = subprocess.Popen([*CLI, *argv], env=_env(), cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    deadline = time.monotonic() + 180
    while not any("samples to build" in line for line in lines):  # generation has begun
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail("no line saying generation began: " + "".join(lines))
        time.sleep(0.2)
    time.sleep(after_s)  # into the tokenizer probe, or the samples themselves
    os.kill(proc.pid, signal.SIGINT)
    sent = time.monotonic()
    try:
        rc = proc.wait(timeout=120)
    finally:
        proc.kill()
    stopped_in = time.monotonic() - sent
    reader.join(timeout=10)
    err = "".join(lines)
    assert rc == 130, err
    assert stopped_in < 60, stopped_in  # 2,000 rows of 128k take minutes; one sample well under a second
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err
    runs = _run(tmp_path, "cache", "runs")
    assert runs.returncode == 0, runs.stderr
    if "nothing was sent or recorded" in last:  # in planning
        assert "interrupted" in last and "to start again: asyncbench " + " ".join(argv) in last
        assert runs.stdout.strip() == "", runs.stdout
    else:  # in the run: booked, and resumable
        assert "interrupted" in last and "asyncbench run --resume" in last, last
        assert "interrupted" in runs.stdout and "complete" not in runs.stdout, runs.stdout


@pytest.mark.slow  # two real runs of 64k-token rows: ~60 s on 2 cores
def test_a_run_holds_a_window_of_samples_not_all_of_them(tmp_path: Path) -> None:
    """A real run builds the samples it keeps as it sends them, two windows at most in
    memory (engine.BUILT_WINDOW_CHARS): 24 rows of 64k-token contexts (96 samples with
    the base set) fill about one, and 96 rows cost little more (+49 MB here; 192 rows
    +58). Before, every sample was built before the first request and held to the end
    (+148 MB for 96 rows, +180 for 120)."""
    small, large = (_peak_rss_mb(tmp_path, rows, "--no-progress", lengths="64k", cache=f"c{rows}.duckdb")
                    for rows in (24, 96))
    assert large - small < 90, (small, large)


def test_missing_judge_refuses_before_building_and_records_no_run(tmp_path: Path) -> None:
    """QA and summaries need a judge: one line, exit 2, before a sample is generated (no
    "generating" line) and before a run is recorded (main recorded one, left interrupted)."""
    done = _run(tmp_path, "run", "100-longbench", "--model", "sim", "--lengths", "2k", "--rows", "2", "--progress")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--judge" in lines[0] and "single_doc_qa" in lines[0], done.stderr
    assert "generating" not in done.stderr
    runs = _run(tmp_path, "cache", "runs")
    assert runs.returncode == 0 and runs.stdout.strip() == "", runs.stdout


def test_dry_run_names_the_judge_it_prices_or_says_none_was_given(tmp_path: Path) -> None:
    """With --judge: its calls priced at the judge, named. Without: the run will need one,
    and its calls are counted but not priced into the total (main priced them at the
    evaluated model, as if it were the judge)."""
    args = ("run", "100-longbench:single_doc_qa,kv_retrieval", "--model", "sim", "--dry-run", "--lengths", "8k",
            "--rows", "2")
    judged = _run(tmp_path, *args, "--judge", "sim")
    assert judged.returncode == 0, judged.stderr
    assert "judge: openai-compat:sim (" in judged.stdout
    as_json = json.loads(_run(tmp_path, *args, "--judge", "sim", "--json").stdout)
    assert as_json["judge"]["model"] == "openai-compat:sim" and as_json["by_purpose"]["judge"]["requests"] > 0
    bare = _run(tmp_path, *args)
    assert bare.returncode == 0, bare.stderr
    assert "judge: none given; the run needs --judge SPEC" in " ".join(bare.stdout.split())
    bare_json = json.loads(_run(tmp_path, *args, "--json").stdout)
    assert "judge" not in bare_json["by_purpose"]
    assert bare_json["judge"]["model"] is None and bare_json["judge"]["unpriced_calls"]["requests"] > 0
    priced = sum(float(p["cost_usd"]) for p in bare_json["by_purpose"].values())
    assert bare_json["estimated_cost_usd"] == pytest.approx(priced)
