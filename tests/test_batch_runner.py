"""`--batch` end to end: real `asyncbench run` subprocesses, the simulator's batch APIs
and DuckDB files, no mocks. A batch run gives the live run's answers and scores at half
the price; a run killed after submitting is re-attached by the same command without
submitting anything again; expired requests are sent again; --no-wait collects later."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from asyncbench.sim.testing import sim_subprocess
from asyncbench.store import Store

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
pytestmark = pytest.mark.skipif(not (DATA / "bamboo").is_dir(), reason="../shared/data is not beside the checkout")


def _cmd(tmp: Path, name: str, url: str, *extra: str, model: str = "openai:gpt-4o-mini",
         bench: tuple[str, ...] = ("minilongbench",)) -> list[str]:
    base = url + "/v1" if model.startswith("openai") else url
    return [sys.executable, "-m", "asyncbench.cli", "run", *bench, "--model", model, "--base-url", base,
            "--data-dir", str(DATA), "--cache", str(tmp / f"{name}.duckdb"), "--out", str(tmp / name), "--json",
            *extra]


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return dict(env, PYTHONPATH=str(REPO), **more)


def _run(cmd: list[str], **env: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(cmd, env=_env(**env), capture_output=True, text=True, timeout=300)
    run_json = Path(cmd[cmd.index("--out") + 1]) / "run.json"
    summary = json.loads(run_json.read_text()) if run_json.exists() else {}
    return done.returncode, summary, done.stderr


def _stats(url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(f"{url}/stats", timeout=10) as r:
        return dict(json.loads(r.read()))


def _reset(url: str) -> None:
    """Forget counters and the simulator's prompt cache (a second run pays in full)."""
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{url}/stats/reset", method="POST", data=b""), timeout=10).read()


def _answers(tmp: Path, name: str) -> dict[str, tuple[str | None, float | None]]:
    """The eval samples' answers and scores of the cache's one run."""
    with Store(tmp / f"{name}.duckdb") as store:
        (run,) = store.runs.runs()
        return {r.sample_id: (r.prediction, r.score) for r in store.runs.results(run.run_id) if r.purpose == "eval"}


@pytest.mark.slow
def test_a_batch_run_of_minilongbench_equals_the_live_run_at_half_the_price(tmp_path: Path) -> None:
    with sim_subprocess(["--batch-turnaround-s", "0.3"]) as url:
        rc, live, _ = _run(_cmd(tmp_path, "live", url))
        assert rc == 0
        _reset(url)
        rc, batch, err = _run(_cmd(tmp_path, "batch", url, "--batch"))
        assert rc == 0, err
        after = _stats(url)
    assert after["requests"] == 0  # nothing went live
    assert after["batches_submitted"] == 1 and after["batch_requests"] == 237
    assert "completed (total 237, completed 237, failed 0)" in err
    assert batch["scores"] == live["scores"]
    answers = _answers(tmp_path, "batch")
    assert answers and answers == _answers(tmp_path, "live")
    assert batch["cost_usd"]["total"] == pytest.approx(live["cost_usd"]["total"] / 2, rel=1e-3)
    with Store(tmp_path / "batch.duckdb") as store:
        rows = store.runs.request_rows(batch["run_id"])
        batches = store.batches.rows()
    saved, paid = sum(r.saved_usd for r in rows), sum(r.cost_usd for r in rows)
    n, collected = sum(b.n_requests for b in batches), all(b.collected for b in batches)
    assert saved == pytest.approx(paid, rel=1e-6) and (n, collected) == (237, True)
    # and the summary says what the discount saved, from the same rows
    assert batch["invocations"][-1]["saved_by_batch_usd"] == pytest.approx(paid, rel=1e-5)
    # the terminal summary (--json printed none: drawn here from the same run.json) says it
    from rich.console import Console

    from asyncbench.report.summary import print_summary
    from asyncbench.run_summary import RunSummary

    with open(os.devnull, "w") as sink:
        console = Console(record=True, width=1000, file=sink)
        print_summary(RunSummary.from_json(batch), console)
    text = console.export_text()
    assert f"by the batch discount ${paid:.4f}" in text, [line for line in text.splitlines() if "saved" in line]


@pytest.mark.slow
def test_a_batch_run_of_bamboo_through_anthropic_equals_the_live_run(tmp_path: Path) -> None:
    bench = ("bamboo", "--length", "4k")
    model = "anthropic:claude-haiku-4-5"
    with sim_subprocess(["--batch-turnaround-s", "0.3"]) as url:
        rc, live, err = _run(_cmd(tmp_path, "live", url, model=model, bench=bench))
        assert rc in (0, 3), err
        _reset(url)
        rc2, batch, err = _run(_cmd(tmp_path, "batch", url, "--batch", model=model, bench=bench))
        stats = _stats(url)
    assert rc2 == rc, err
    assert stats["batches_submitted"] == 1
    assert batch["scores"] == live["scores"]
    answers = _answers(tmp_path, "batch")
    assert answers and answers == _answers(tmp_path, "live")


@pytest.mark.slow
def test_sigkill_after_submission_then_the_same_command_submits_nothing_new(tmp_path: Path) -> None:
    with sim_subprocess(["--batch-turnaround-s", "3"]) as url:
        cmd = _cmd(tmp_path, "b", url, "--batch", "--progress")
        proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if "submitted 237 request(s)" in line or not line:
                break
        assert "submitted" in line
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        assert _stats(url)["batches_submitted"] == 1
        rc, summary, err = _run(cmd)
        stats = _stats(url)
    assert rc == 0, err
    assert "re-attached to 1 batch(es) holding 237 request(s)" in err
    assert stats["batches_submitted"] == 1 and stats["batch_requests"] == 237 and stats["requests"] == 0
    assert summary["complete"]


@pytest.mark.slow
def test_expired_requests_go_in_the_next_batch_or_live(tmp_path: Path) -> None:
    with sim_subprocess(["--batch-turnaround-s", "0.2", "--batch-expire", "1"]) as url:
        rc, _, err = _run(_cmd(tmp_path, "again", url, "--batch", "--limit", "2"))
        stats = _stats(url)
        assert rc == 0, err
        assert stats["batches_submitted"] == 2 and "submitting them in a new batch" in err
        # 42 requests: the first batch answers 21 and expires; the other 21 go in a second
        assert stats["requests"] == 0 and (stats["ok"], stats["batch_requests"]) == (42, 63)
    with sim_subprocess(["--batch-turnaround-s", "0.2", "--batch-expire", "1"]) as url:
        rc, summary, err = _run(_cmd(tmp_path, "live", url, "--batch", "--limit", "2", "--batch-fallback", "live"))
        stats = _stats(url)
    assert rc == 0, err
    assert stats["batches_submitted"] == 1 and stats["requests"] > 0 and "sending them live" in err
    assert summary["complete"]


def test_no_wait_submits_and_exits_partial_then_the_same_command_collects(tmp_path: Path) -> None:
    with sim_subprocess(["--batch-turnaround-s", "1"]) as url:
        rc, summary, err = _run(_cmd(tmp_path, "nw", url, "--batch", "--no-wait", "--limit", "1"))
        assert rc == 3 and not summary["complete"], err
        time.sleep(1.5)
        rc, summary, err = _run(_cmd(tmp_path, "nw", url, "--batch", "--no-wait", "--limit", "1"))
        stats = _stats(url)
    assert rc == 0 and summary["complete"], err
    assert stats["batches_submitted"] == 1


@pytest.mark.slow
def test_a_batch_is_booked_on_the_collecting_invocation_and_no_wait_prints_one_pending_line(tmp_path: Path) -> None:
    """Issue 23 (numbers #5): with --no-wait the submitting invocation books 0 requests /
    $0 and the collecting one books every request and the whole spend, so the invocation
    rows add up to the run's; the submitting one's terminal summary has one pending line,
    not one per request."""
    cmd = [c for c in _cmd(tmp_path, "nw", "URL", "--batch", "--no-wait", "--limit", "1") if c != "--json"]
    with sim_subprocess(["--batch-turnaround-s", "1.5"]) as url:
        cmd = [c.replace("URL", url) for c in cmd]
        first = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
        assert first.returncode == 3, first.stderr
        time.sleep(2)
        rc, summary, err = _run(cmd + ["--json"])
        stats = _stats(url)
    assert rc == 0 and summary["complete"], err
    said = " ".join((first.stdout + first.stderr).split())  # the terminal wraps long lines
    assert said.count("pending in a batch not yet ended") == 1, first.stdout
    assert re.search(r"failed \S+, \S+, \S+ and \d+ more: transient: pending in a batch", said), said
    submit, collect = summary["invocations"]
    assert (submit["requests"], submit["cost_usd"]) == (0, 0)
    assert collect["requests"] == stats["batch_requests"] > 0
    assert collect["cost_usd"] == pytest.approx(summary["cost_usd"]["total"]) and collect["cost_usd"] > 0
    assert sum(i["requests"] for i in summary["invocations"]) == summary["samples"]["answered"] == stats["ok"]


def test_batches_are_split_to_the_providers_limits(tmp_path: Path) -> None:
    with sim_subprocess(["--batch-turnaround-s", "0.2", "--batch-max-requests", "100"]) as url:
        rc, _, err = _run(_cmd(tmp_path, "split", url, "--batch"), ASYNCBENCH_BATCH_MAX_REQUESTS="100")
        stats = _stats(url)
    assert rc == 0, err
    assert stats["batches_submitted"] == 3 and stats["batch_requests"] == 237


def test_a_provider_without_a_batch_api_is_one_clear_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", "minilongbench", "--model", "sim",
                           "--data-dir", str(DATA), "--cache", str(tmp_path / "c.duckdb"), "--batch"],
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "--batch: openai-compat:sim has no batch API (openai: and anthropic: models have one); run it without --batch")
