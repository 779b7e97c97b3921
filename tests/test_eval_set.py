"""Eval sets (eval_set.py, issue 28): several models x benchmarks planned first, run
together under one budget, limits shared per provider key, resumable by re-running.
Every test runs against real simulator subprocesses on 127.0.0.1 (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from asyncbench.errors import UserError
from asyncbench.run.eval_set import (
    SetSummary,
    dry_run_set,
    execute_set,
    load_set_file,
    plan_set,
    run_configs,
    split_benchmarks,
)

REPO = Path(__file__).resolve().parents[1]
PRICES = {"models": {m: {"input": 1000.0, "output": 1000.0} for m in ("a", "b", "c")}}


def _data(tmp: Path, n: int, name: str = "d.jsonl") -> str:
    path = tmp / name
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"s{i}", "task": "t", "prompt": f"Question {i}: what is {i} plus one?",
                                "answers": [str(i + 1)], "max_tokens": 8, "metric": "contains"}) + "\n")
    return f"jsonl:{path}"


def _options(tmp: Path, **more: Any) -> dict[str, Any]:
    return {"cache": str(tmp / "c.duckdb"), "max_input_tokens": 1000, "progress": False, **more}


def _run(cfgs: list[Any]) -> SetSummary:
    async def go() -> SetSummary:
        sp = await plan_set(cfgs)
        try:
            return await execute_set(sp)
        finally:
            await sp.aclose()

    return anyio.run(go)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", *args, "--no-progress"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_split_benchmarks_keeps_task_lists() -> None:
    assert split_benchmarks("longbench:hotpotqa,qasper,minilongbench") == ["longbench:hotpotqa,qasper", "minilongbench"]
    assert split_benchmarks("jsonl:a.jsonl,jsonl:b.jsonl") == ["jsonl:a.jsonl", "jsonl:b.jsonl"]
    assert split_benchmarks("minilongbench") == ["minilongbench"]


@pytest.mark.parametrize(("text", "says"), [
    ('benchmarks = ["minilongbench"]\n[[models]]\nmodel = "sim"\nmax_cost = 1\n', "cannot be set per model"),
    ('benchmarks = ["minilongbench"]\nmodels = 3\n', "add at least one [[models]]"),
    ('benchmark = ["minilongbench"]\n[[models]]\nmodel = "sim"\n', "unknown key 'benchmark'"),
    ('benchmarks = ["minilongbench"]\n[[models]]\nmodel = "sim"\n[options]\nmax_kost = 1\n', "unknown option"),
    ('benchmarks = [\n', "not valid TOML"),
])
def test_set_file_mistakes_are_one_line(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "set.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=says.replace("[", r"\[")):
        load_set_file(path)


def test_unknown_model_is_found_before_anything_is_sent(tmp_path: Path, start_sim: Any) -> None:
    sim = start_sim()
    bench = _data(tmp_path, 3)
    done = _cli(bench, "--model", "openai-compat:a", "--model", "nosuch:x", "--base-url", f"{sim.base_url}/v1",
                "--cache", str(tmp_path / "c.duckdb"), "--max-input-tokens", "1000", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "nosuch:x" in lines[0] and "Traceback" not in done.stderr
    assert sim.stats()["requests"] == 0


def test_runs_on_one_key_share_its_limit(tmp_path: Path, start_sim: Any) -> None:
    """Issue 28's acceptance set, small: 3 models x 2 benchmarks, two models on one
    rate-limited key and one on another provider. The key's limit is learned once and
    kept by all four of its runs (<= 2 429s), so its requests take at least what the
    limit allows; the other provider's runs are not held by it."""
    rpm, n = 600, 15
    shared, other = start_sim("--rpm", str(rpm)), start_sim()
    benches = [_data(tmp_path, n), _data(tmp_path, n, "e.jsonl")]
    models = [{"model": "openai-compat:a", "base_urls": [f"{shared.base_url}/v1"]},
              {"model": "openai-compat:b", "base_urls": [f"{shared.base_url}/v1"]},
              {"model": "openai-compat:c", "base_urls": [f"{other.base_url}/v1"]}]
    cfgs = run_configs(benches, models, _options(tmp_path, out=str(tmp_path / "set")))
    started = time.monotonic()
    result = _run(cfgs)
    wall = time.monotonic() - started
    assert [(r.status, r.error) for r in result.runs] == [("complete", None)] * 6
    stats = shared.stats()
    assert stats["rate_limited"] <= 2
    assert stats["ok"] == 2 * 2 * n and other.stats()["ok"] == 2 * n
    burst = rpm / 60  # the simulator's bucket holds one second's worth (sim/limits.py)
    ideal = (stats["ok"] - burst) / (rpm / 60)
    assert wall >= ideal * 0.9
    listed = json.loads((tmp_path / "set" / "set.json").read_text())
    assert [(r["model"], r["benchmark"], r["status"]) for r in listed] == \
        [(m["model"], b, "complete") for m in models for b in benches]
    assert [r["run_id"] for r in listed] == [r.run_id for r in result.runs]


def test_models_whose_names_slug_alike_get_a_folder_each(tmp_path: Path, start_sim: Any) -> None:
    """"m/x", "m_x" and "m x" (and names equal in their first 80 characters) once shared
    one output folder, so each run's run.json overwrote the other's: the run id is in
    every run's folder name."""
    sim = start_sim()
    long = "m" * 90
    names = ["m/x", "m_x", "m x", f"{long}1", f"{long}2"]
    models = [{"model": f"openai-compat:{m}", "base_urls": [f"{sim.base_url}/v1"]} for m in names]
    cfgs = run_configs([_data(tmp_path, 2)], models, _options(tmp_path, out=str(tmp_path / "set")))
    result = _run(cfgs)
    assert [r.status for r in result.runs] == ["complete"] * len(names)
    written = sorted((tmp_path / "set").glob("*/run.json"))
    assert len(written) == len(names)
    assert {json.loads(p.read_text())["run_id"] for p in written} == {r.run_id for r in result.runs}
    assert all(p.parent.name.endswith(json.loads(p.read_text())["run_id"]) for p in written)


def test_account_sharing_is_by_key_and_endpoint(tmp_path: Path, start_sim: Any) -> None:
    one, two = start_sim(), start_sim()
    models = [{"model": "openai-compat:a", "base_urls": [f"{one.base_url}/v1"], "rpm": 120},
              {"model": "openai-compat:b", "base_urls": [f"{one.base_url}/v1"], "rpm": 60},
              {"model": "openai-compat:c", "base_urls": [f"{two.base_url}/v1"]}]
    cfgs = run_configs([_data(tmp_path, 2)], models, _options(tmp_path, dry_run=True))

    async def go() -> None:
        sp = await plan_set(cfgs)
        try:
            a, b, c = (p.client for p in sp.plans)
            assert a.limiter is b.limiter and a.pool is b.pool
            assert c.limiter is not a.limiter
            assert a.limiter.configured_rpm == 60  # the tighter of the two
            assert sp.endpoints.accounts() == 2
        finally:
            await sp.aclose()

    anyio.run(go)


def test_one_budget_across_the_set_and_its_invocations(tmp_path: Path, start_sim: Any) -> None:
    sim = start_sim()
    (tmp_path / "p.json").write_text(json.dumps(PRICES))
    models = [{"model": "openai-compat:a", "base_urls": [f"{sim.base_url}/v1"], "concurrency": 1},
              {"model": "openai-compat:b", "base_urls": [f"{sim.base_url}/v1"], "concurrency": 1}]
    cap = 0.3
    cfgs = run_configs([_data(tmp_path, 15)], models, _options(tmp_path, max_cost=cap, prices=str(tmp_path / "p.json")))
    first = _run(cfgs)
    paid = first.totals["cost_usd"]
    assert 0 < paid <= cap
    assert not first.complete and {r.status for r in first.runs} <= {"partial", "complete"}
    sent = sim.stats()["ok"]
    assert sent < 30
    again = _run(cfgs)  # the same set again: the budget counts what both runs paid before
    assert sim.stats()["ok"] == sent and again.totals["cost_usd"] == pytest.approx(paid)


def test_dry_run_prices_each_run_and_the_total(tmp_path: Path, start_sim: Any) -> None:
    sim = start_sim()
    (tmp_path / "p.json").write_text(json.dumps(PRICES))
    models = [{"model": f"openai-compat:{m}", "base_urls": [f"{sim.base_url}/v1"]} for m in ("a", "b")]
    cfgs = run_configs([_data(tmp_path, 4), _data(tmp_path, 2, "e.jsonl")], models,
                       _options(tmp_path, dry_run=True, prices=str(tmp_path / "p.json")))

    async def go() -> dict[str, Any]:
        sp = await plan_set(cfgs)
        try:
            return await dry_run_set(sp)
        finally:
            await sp.aclose()

    priced = anyio.run(go)
    runs = priced["runs"]
    assert len(runs) == 4 and priced["totals"]["requests"] == 2 * (4 + 2) == sum(r["to_send"] for r in runs)
    assert priced["totals"]["estimated_cost_usd"] == pytest.approx(sum(r["estimated_cost_usd"] for r in runs))
    batch = [r["by_purpose"]["eval"]["cost_usd_by_mode"]["batch"] for r in runs]
    assert priced["totals"]["eval_batch_usd"] == pytest.approx(sum(batch))
    assert sim.stats()["requests"] == 0


def test_set_file_dry_run_through_the_command(tmp_path: Path, start_sim: Any,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`run --set FILE --dry-run --json`: per-model options from the file, a flag given on
    the command line over [options] (--limit 2 over limit = 4), the set's total."""
    from asyncbench.cli import main

    sim = start_sim()
    (tmp_path / "p.json").write_text(json.dumps(PRICES))
    bench = _data(tmp_path, 6)
    (tmp_path / "set.toml").write_text(f"""benchmarks = ["{bench}"]
[options]
limit = 4
max_input_tokens = 1000
prices = "{tmp_path / 'p.json'}"
[[models]]
model = "openai-compat:a"
base_urls = ["{sim.base_url}/v1"]
[[models]]
model = "openai-compat:b"
base_url = "{sim.base_url}/v1"
rpm = 60
""")
    rc = main(["run", "--set", str(tmp_path / "set.toml"), "--dry-run", "--json", "--limit", "2",
               "--cache", str(tmp_path / "c.duckdb")])
    priced = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [(r["model"], r["to_send"]) for r in priced["runs"]] == [("openai-compat:a", 2), ("openai-compat:b", 2)]
    assert priced["totals"]["requests"] == 4 and sim.stats()["requests"] == 0


def test_a_failing_run_does_not_lose_the_others(tmp_path: Path, start_sim: Any) -> None:
    sim = start_sim()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    models = [{"model": "openai-compat:a", "base_urls": [f"{sim.base_url}/v1"]},
              {"model": "openai-compat:c", "base_urls": [f"http://127.0.0.1:{dead}/v1"]}]
    result = _run(run_configs([_data(tmp_path, 5)], models, _options(tmp_path, out=str(tmp_path / "set"))))
    good, bad = result.runs
    assert good.status == "complete" and good.summary is not None and good.summary.samples["settled"] == 5
    assert bad.status == "failed" and bad.error is not None and f"127.0.0.1:{dead}" in bad.error
    assert not result.complete
    listed = json.loads((tmp_path / "set" / "set.json").read_text())
    assert [r["status"] for r in listed] == ["complete", "failed"] and listed[1]["error"] == bad.error


@pytest.mark.slow  # two CLI processes: ~11 s on the shared machine
def test_killed_set_resumes_without_paying_twice(tmp_path: Path, start_sim: Any) -> None:
    """SIGKILL the CLI mid-set, run the same command again: every answer received before
    the kill comes from the cache; only what was in flight is asked twice."""
    n, concurrency = 30, 2  # 60 requests of 100 ms, 2 at a time: ~3 s, room for the kill under load
    sim = start_sim("--latency-ms", "100")
    bench = _data(tmp_path, n)
    args = [bench, "--model", "openai-compat:a", "--model", "openai-compat:b", "--base-url", f"{sim.base_url}/v1",
            "--cache", str(tmp_path / "c.duckdb"), "--max-input-tokens", "1000", "--concurrency", str(concurrency),
            "--out", str(tmp_path / "set")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "asyncbench.cli", "run", *args, "--no-progress"], cwd=tmp_path,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while sim.stats()["ok"] < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    before = sim.stats()["ok"]
    assert 0 < before < 2 * n, "the kill must land mid-set"
    done = _cli(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sim.stats()["ok"] <= 2 * n + concurrency  # at most the requests in flight at the kill, again
    listed = json.loads((tmp_path / "set" / "set.json").read_text())
    assert [r["status"] for r in listed] == ["complete", "complete"]


@pytest.mark.slow  # two CLI processes: ~11 s on the shared machine
def test_ctrl_c_books_every_run_and_exits_130(tmp_path: Path, start_sim: Any) -> None:
    """Ctrl-C mid-set: each run books its interrupted invocation (RunInterrupted is a
    KeyboardInterrupt: one run's must not leave the loop before the others booked), the
    command exits 130 with one line, set.json says interrupted, and a re-run finishes."""
    sim = start_sim("--latency-ms", "100")
    args = [_data(tmp_path, 30), "--model", "openai-compat:a", "--model", "openai-compat:b", "--base-url",
            f"{sim.base_url}/v1", "--cache", str(tmp_path / "c.duckdb"), "--max-input-tokens", "1000",
            "--concurrency", "2", "--out", str(tmp_path / "set"), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "asyncbench.cli", "run", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while sim.stats()["ok"] < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err
    listed = json.loads((tmp_path / "set" / "set.json").read_text())
    assert [r["status"] for r in listed] == ["interrupted", "interrupted"]
    before = sim.stats()["ok"]
    done = _cli(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sim.stats()["ok"] <= 60 + 2 and sim.stats()["ok"] > before


def test_evaluate_takes_lists(tmp_path: Path, start_sim: Any) -> None:
    import asyncbench

    sim = start_sim()
    bench = _data(tmp_path, 3)
    opts: Any = {"base_urls": [f"{sim.base_url}/v1"], "cache": tmp_path / "c.duckdb", "max_input_tokens": 1000}
    results = asyncbench.evaluate([bench], ["openai-compat:a", "openai-compat:b"], **opts)
    assert [r.model for r in results] == ["openai-compat:a", "openai-compat:b"]
    single = asyncbench.evaluate(bench, "openai-compat:a", **opts)
    assert single.run_id == results[0].run_id and sim.stats()["ok"] == 6  # the second call is all cached


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_set_on_the_ray_backend_shares_one_runner(tmp_path: Path, start_sim: Any) -> None:
    """Two models of a set on --backend ray: one local Ray (started and stopped by the
    command, token auth off for this loopback-only one), both runs complete."""
    pytest.importorskip("ray")
    sim = start_sim()
    bench = _data(tmp_path, 4)
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", bench, "--model", "openai-compat:a",
                           "--model", "openai-compat:b", "--base-url", f"{sim.base_url}/v1", "--backend", "ray",
                           "--ray-workers", "1", "--cache", str(tmp_path / "c.duckdb"), "--max-input-tokens", "1000",
                           "--out", str(tmp_path / "set"), "--no-progress"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    listed = json.loads((tmp_path / "set" / "set.json").read_text())
    assert [r["status"] for r in listed] == ["complete", "complete"]
    assert sim.stats()["ok"] == 8


def test_the_sets_leaderboard_equals_separate_runs(tmp_path: Path, start_sim: Any) -> None:
    """Issue 28's acceptance: the leaderboard of a set holds the numbers each model gets
    when it is evaluated alone (its own command, its own cache): score, interval,
    samples, tokens."""
    import asyncbench
    from asyncbench.report.leaderboard import build_leaderboard

    sim = start_sim()
    bench = _data(tmp_path, 24)
    urls = [f"{sim.base_url}/v1"]
    models = ["openai-compat:a", "openai-compat:b", "openai-compat:c"]
    done = _run(run_configs([bench], [{"model": m, "base_urls": urls} for m in models],
                            _options(tmp_path, out=str(tmp_path / "set"))))
    assert [r.status for r in done.runs] == ["complete"] * 3
    (board,) = build_leaderboard([r.run_id for r in done.runs], tmp_path / "c.duckdb").boards
    by_model = {e.model: e for e in board.entries}
    for m in models:
        alone = asyncbench.evaluate(bench, m, base_urls=urls, cache=tmp_path / f"alone-{m[-1]}.duckdb",
                                    max_input_tokens=1000, out=str(tmp_path / f"alone-{m[-1]}"))
        written = json.loads((tmp_path / f"alone-{m[-1]}" / "run.json").read_text())
        scores, tokens = written["scores"], written["tokens"]["total"]
        e = by_model[m]
        assert e.run_id == alone.run_id  # the same run, whether in a set or alone
        assert e.score == scores["overall"] and list(e.ci95 or ()) == scores["ci95"]["overall"]
        assert (e.scored, e.samples) == (24, 24)
        assert (e.cost.prompt_tokens, e.cost.completion_tokens) == (tokens["prompt_tokens"],
                                                                    tokens["completion_tokens"])


def test_a_set_shows_one_progress_row_per_run(tmp_path: Path, start_sim: Any) -> None:
    """On a terminal, one live display for the set, a row per run (issue 36: a set on a
    terminal showed no progress at all, its per-run bars turned off because each would
    redraw over the others). The terminal is script(1)'s pseudo-terminal."""
    import shlex
    import shutil

    if not shutil.which("script"):
        pytest.skip("script(1) is not installed (util-linux)")
    sim = start_sim()
    data = _data(tmp_path, 6)
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160", "TERM": "xterm"}
    cmd = [sys.executable, "-m", "asyncbench.cli", "run", data, "--model", "openai-compat:a", "--model",
           "openai-compat:b", "--base-url", f"{sim.base_url}/v1", "--cache", str(tmp_path / "c.duckdb"), "--out",
           str(tmp_path / "set"), "--max-input-tokens", "1000"]
    done = subprocess.run(["script", "-qec", shlex.join(cmd), "/dev/null"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "progress bars off" not in done.stdout
    final = [line for line in done.stdout.splitlines() if "6/6" in line]
    assert any("openai-compat:a" in line for line in final) and any("openai-compat:b" in line for line in final)
