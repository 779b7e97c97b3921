"""Per-sample results (`asyncbench samples`), the Python API, and several processes
sharing one cache file — all against real simulator runs and real DuckDB files."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

import asyncbench
from asyncbench.errors import UserError
from asyncbench.ledger import SETTLED
from asyncbench.store import Store
from tests.test_engine import write_jsonl


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], capture_output=True, text=True,
                          env=env or dict(os.environ), timeout=timeout)


def _samples_every_format(tmp_path: Path, cache: Path, run_id: str) -> list[dict]:
    """`samples` as jsonl, csv, parquet and table: the same records in each."""
    done = _cli("samples", run_id[:6], "--cache", str(cache), "--format", "jsonl")
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert _cli("samples", run_id, "--cache", str(cache), "--out", str(tmp_path / "s.csv")).returncode == 0
    assert _cli("samples", run_id, "--cache", str(cache), "--out", str(tmp_path / "s.parquet")).returncode == 0
    csv.field_size_limit(1 << 30)  # long-context prompts are one cell each
    with (tmp_path / "s.csv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["sample_id"] for r in rows] == [r["sample_id"] for r in records]
    assert [json.loads(r["references"]) for r in rows] == [r["references"] for r in records]
    con = duckdb.connect()
    table = con.execute(f"SELECT sample_id, score, usd, prompt FROM read_parquet('{tmp_path / 's.parquet'}')").fetchall()
    con.close()
    assert [(t[0], t[1], t[3]) for t in table] == [(r["sample_id"], r["score"], r["prompt"]) for r in records]
    shown = _cli("samples", run_id, "--cache", str(cache), "--task", records[0]["task"])
    assert shown.returncode == 0 and records[0]["sample_id"] in shown.stdout
    return records


def test_minilongbench_samples_in_every_format_and_the_api_equals_the_cli(tmp_path, shared_data):
    cache = tmp_path / "api.duckdb"
    result = asyncbench.evaluate("minilongbench", "sim", data_dir=shared_data, cache=cache, out=tmp_path / "o1")
    cli = _cli("run", "minilongbench", "--model", "sim", "--data-dir", str(shared_data), "--cache",
               str(tmp_path / "cli.duckdb"), "--out", str(tmp_path / "o2"), "--no-progress", "--json")
    assert cli.returncode == 0, cli.stderr
    run_json = json.loads((tmp_path / "o2" / "run.json").read_text())
    assert result.complete and result.run_id == run_json["run_id"]
    assert result.scores == run_json["scores"]
    assert result.cost == run_json["cost_usd"]
    assert asyncbench.load_run(result.run_id[:5], cache=cache) == result

    samples = result.samples
    assert len(samples) == 237 and all(isinstance(s, asyncbench.SampleRecord) for s in samples)
    # the per-sample USD adds up to the run's eval cost (run.json rounds to 6 places)
    assert round(sum(s.usd for s in samples), 6) == result.cost["eval"] > 0
    assert all(s.prompt and s.status == "answered" and s.attempts == 1 for s in samples)
    trec = [s for s in samples if s.task == "trec"]
    assert all(s.parsed == s.prediction.strip().split("\n")[0] for s in trec)  # eval.py's first line
    frame = result.to_pandas()
    assert list(frame["sample_id"]) == [s.sample_id for s in samples]

    records = _samples_every_format(tmp_path, cache, result.run_id)
    assert len(records) == 237
    assert {r["sample_id"]: r["score"] for r in records} == {s.sample_id: s.score for s in samples}
    # a re-run from the cache: the prompts are still there, nothing is paid, history kept
    again = asyncbench.evaluate("minilongbench", "sim", data_dir=shared_data, cache=cache, out=tmp_path / "o3")
    assert again.run_id == result.run_id and again.cost["total"] == result.cost["total"]
    assert all(s.status == "answered" for s in again.samples)  # the first invocation paid for them


def test_100_longbench_samples_carry_the_judge_and_the_parsed_answer(tmp_path, shared_data):
    cache = tmp_path / "c.duckdb"
    result = asyncbench.evaluate("100-longbench", "sim", judge="sim", lengths=["2k", "4k"], rows=2,
                                 data_dir=shared_data, cache=cache, out=tmp_path / "o")
    records = _samples_every_format(tmp_path, cache, result.run_id)
    judged = [r for r in records if r["judge"]]
    assert judged, "no sample shows a judge call"
    for r in judged:
        assert r["parsed"] is not None and r["score"] is not None
        assert all(call["reference"] in r["references"] for call in r["judge"])
    qa = [r for r in judged if r["judge"][0]["prompt"] == "judge_prompt"]
    assert qa and all(max(c["score"] for c in r["judge"]) == pytest.approx(r["score"]) for r in qa)
    assert all(r["prompt"] for r in records if r["status"] in SETTLED and r["status"] != "excluded")


def test_samples_filters_and_bad_input(tmp_path, start_sim):
    sim = start_sim("--error-rate", "0.3", "--seed", "5")
    data = write_jsonl(tmp_path / "d.jsonl", 30)
    cache = tmp_path / "c.duckdb"
    done = _cli("run", f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
                "--cache", str(cache), "--out", str(tmp_path / "o"), "--max-attempts", "1", "--no-progress")
    assert done.returncode in (0, 3), done.stderr
    run_id = json.loads((tmp_path / "o" / "run.json").read_text())["run_id"]
    every = json.loads("[" + ",".join(_cli("samples", run_id, "--cache", str(cache), "--format", "jsonl")
                                      .stdout.splitlines()) + "]")
    failed = [json.loads(line) for line in
              _cli("samples", run_id, "--cache", str(cache), "--failed", "--format", "jsonl").stdout.splitlines()]
    assert failed == [r for r in every if r["status"] not in SETTLED]
    assert failed and all(r["error"] and r["attempts"] == 1 and r["prompt"] for r in failed)
    for args, expected in ((("nosuchrun",), "no run 'nosuchrun'"), ((run_id, "--task", "nope"), "has no task 'nope'"),
                           ((run_id, "--out", str(tmp_path / "x.txt")), "cannot tell the format"),
                           ((run_id, "--format", "parquet"), "parquet needs --out")):
        bad = _cli("samples", *args, "--cache", str(cache))
        assert bad.returncode == 2 and expected in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_api_rejects_unknown_and_misplaced_options(tmp_path):
    with pytest.raises(UserError, match="unknown option 'max_costs'"):
        asyncbench.evaluate("minilongbench", "sim", max_costs=1.0)  # type: ignore[call-arg]
    with pytest.raises(UserError, match="--lengths is a 100-longbench option"):
        asyncbench.evaluate("minilongbench", "sim", lengths=["2k"])
    with pytest.raises(UserError, match="--length must be one of"):
        asyncbench.evaluate("bamboo", "sim", length="8k")  # type: ignore[typeddict-item]


def test_the_api_options_are_the_cli_flags():
    """Options (the TypedDict) names every run option and every benchmark option
    (tests/test_run_options.py checks their types)."""
    from asyncbench.api import Options
    from asyncbench.benchmarks import option_keys
    from asyncbench.config import run_options

    assert set(Options.__annotations__) == set(run_options()) | set(option_keys())


def test_evaluate_works_inside_a_running_event_loop(tmp_path, start_sim):
    import asyncio

    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 5)

    async def notebook_cell() -> asyncbench.EvalResult:
        return asyncbench.evaluate(f"jsonl:{data}", "openai-compat:sim", base_urls=[sim.base_url + "/v1"],
                                   cache=tmp_path / "c.duckdb", out=tmp_path / "o")

    result = asyncio.run(notebook_cell())
    assert result.complete and len(result.samples) == 5

    async def awaited() -> asyncbench.EvalResult:
        return await asyncbench.evaluate_async(f"jsonl:{data}", "openai-compat:sim", base_urls=[sim.base_url + "/v1"],
                                               cache=tmp_path / "c.duckdb", out=tmp_path / "o")

    again = asyncio.run(awaited())  # the same run again, from the cache: a second invocation
    assert (again.run_id, again.scores) == (result.run_id, result.scores)
    assert [(s.sample_id, s.score, s.usd) for s in again.samples] == [(s.sample_id, s.score, s.usd) for s in result.samples]
    assert sum(s.cached_usd for s in again.samples) == pytest.approx(sum(s.usd for s in result.samples))
    assert len(again.summary.invocations) == 2


# -- several processes, one cache ----------------------------------------------------------

def _run_cmd(data: Path, sim_url: str, model: str, cache: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", f"openai-compat:{model}",
            "--base-url", sim_url + "/v1", "--cache", str(cache), "--out", str(out), "--concurrency", "4",
            "--no-progress"]


def _per_model(store: Store) -> dict[str, int]:
    """Stored answers per model (of openai-compat:MODEL)."""
    return {name.split(":", 1)[1]: m["responses"] for name, m in store.cache.stats()["by_model"].items()}


def test_two_runs_share_one_cache_while_report_and_stats_read_it(tmp_path, start_sim):
    sim_a, sim_b = start_sim("--latency-ms", "40"), start_sim("--latency-ms", "40")
    cache = tmp_path / "c.duckdb"
    first = write_jsonl(tmp_path / "first.jsonl", 3)
    assert subprocess.run(_run_cmd(first, sim_a.base_url, "warm", cache, tmp_path / "o0"),
                          capture_output=True).returncode == 0  # a finished run for `report` to show
    data = write_jsonl(tmp_path / "d.jsonl", 120)
    procs = [subprocess.Popen(_run_cmd(data, sim.base_url, model, cache, tmp_path / model), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
             for sim, model in ((sim_a, "model-a"), (sim_b, "model-b"))]
    reads = 0
    while any(p.poll() is None for p in procs):
        for args in (("report", "--cache", str(cache), "--format", "json"), ("cache", "stats", "--cache", str(cache)),
                     ("cache", "runs", "--cache", str(cache))):
            done = _cli(*args, timeout=120)
            assert done.returncode == 0, done.stderr
            reads += 1
    for p in procs:
        assert p.wait() == 0, p.stderr.read() if p.stderr else ""
    assert reads >= 3
    summaries = [json.loads((tmp_path / m / "run.json").read_text()) for m in ("model-a", "model-b")]
    assert all(s["complete"] and s["samples"]["answered"] == 120 for s in summaries)
    with Store(cache) as store:
        per_model = _per_model(store)
        prompts = store.runs.prompts()
    assert per_model == {"warm": 3, "model-a": 120, "model-b": 120}
    assert len(prompts) == 3 + 240 and None not in prompts.values()  # each once, and readable


@pytest.mark.slow
def test_sigkill_of_one_writer_loses_at_most_its_in_flight_requests(tmp_path, start_sim):
    sim_a, sim_b = start_sim("--latency-ms", "60"), start_sim("--latency-ms", "60")
    cache = tmp_path / "c.duckdb"
    data = write_jsonl(tmp_path / "d.jsonl", 150)
    victim = subprocess.Popen(_run_cmd(data, sim_a.base_url, "model-a", cache, tmp_path / "a"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    other = subprocess.Popen(_run_cmd(data, sim_b.base_url, "model-b", cache, tmp_path / "b"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while sim_a.stats()["ok"] < 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    served = sim_a.stats()["ok"]  # answers the server sent (some may still be on the wire)
    assert other.wait(timeout=180) == 0, other.stderr.read() if other.stderr else ""
    assert _cli("run", f"jsonl:{data}", "--model", "openai-compat:model-b", "--base-url", sim_b.base_url + "/v1",
                "--cache", str(cache), "--out", str(tmp_path / "b"), "--no-progress").returncode == 0  # replays
    with Store(cache) as store:
        stored = _per_model(store)
    assert stored["model-b"] == 150
    assert not list((tmp_path / "c.duckdb.journal").glob("*.jsonl"))
    # lost: only the requests in flight (concurrency 4); answers not yet in DuckDB when it
    # died were in its journal, replayed by the next run on the cache (model-b's or this)
    assert served - 4 <= stored["model-a"] <= served
    resumed = subprocess.run(_run_cmd(data, sim_a.base_url, "model-a", cache, tmp_path / "a"), capture_output=True,
                             text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((tmp_path / "a" / "run.json").read_text())
    assert summary["complete"] and summary["invocations"][1]["sent"] == 150 - stored["model-a"]


def test_report_reads_runs_from_several_cache_files(tmp_path, start_sim):
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 6)
    ids = []
    for name in ("a", "b"):
        done = _cli("run", f"jsonl:{data}", "--model", f"openai-compat:model-{name}", "--base-url",
                    sim.base_url + "/v1", "--cache", str(tmp_path / f"{name}.duckdb"), "--out", str(tmp_path / name),
                    "--no-progress")
        assert done.returncode == 0, done.stderr
        ids.append(json.loads((tmp_path / name / "run.json").read_text())["run_id"])
    caches = ["--cache", str(tmp_path / "a.duckdb"), "--cache", str(tmp_path / "b.duckdb")]
    every = _cli("report", *caches, "--format", "json")
    assert every.returncode == 0, every.stderr
    assert [r["run_id"] for r in json.loads(every.stdout)["runs"]] == ids
    picked = _cli("report", ids[1][:6], ids[0][:6], *caches, "--format", "json")
    assert [r["run_id"] for r in json.loads(picked.stdout)["runs"]] == [ids[1], ids[0]]
    html = _cli("report", *caches, "--out", str(tmp_path / "r.html"))
    assert html.returncode == 0, html.stderr
    text = (tmp_path / "r.html").read_text()
    assert all(f'id="samples-data-{i}"' in text for i in ids)  # each run's samples from its own file
    missing = _cli("report", "nosuch", *caches)
    assert missing.returncode == 2 and "2 cache files" in missing.stderr
