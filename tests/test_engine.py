"""The evaluation engine against real simulator servers on 127.0.0.1: caching, retries,
faults, fatal errors, budgets, endpoint pools, crash-resume, secrets, bad input."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asyncbench.cli import main as cli_main
from asyncbench.store import Store


def write_jsonl(path: Path, n: int, *, words: int = 30, marker_at: int | None = None, prefix: str = "q") -> Path:
    with path.open("w") as fh:
        for i in range(n):
            body = " ".join(f"w{(i * 7 + k) % 101}" for k in range(words))
            prompt = f"Passage {i}: {body}.\nQuestion: what is item {i}?\nAnswer:"
            if marker_at is not None and i == marker_at:
                prompt = "<<SIM:CONTEXT_TOO_LONG>> " + prompt
            fh.write(json.dumps({"id": f"{prefix}{i}", "prompt": prompt, "answers": [f"w{i % 101}"],
                                 "max_tokens": 8}) + "\n")
    return path


def run_cli(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "out"
    code = cli_main(["run", *args, "--cache", str(tmp_path / "cache.duckdb"), "--out", str(out), "--no-progress"])
    summary = json.loads((out / "run.json").read_text())
    summary["_exit"] = code
    return summary


def settled(s: dict) -> int:
    return s["samples"]["answered"] + s["samples"]["from_cache"] + s["samples"]["shared"]


def sent(s: dict) -> int:
    """HTTP requests of the summary's invocation."""
    return s["this_invocation"]["requests"]


def test_rerun_is_served_from_cache(tmp_path, start_sim):
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 60)
    first = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1")
    assert first["samples"]["answered"] == 60 and sent(first) == 60 and first["samples"]["from_cache"] == 0
    before = sim.stats()["requests"]
    second = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1")
    assert sim.stats()["requests"] == before  # nothing reached the server
    # the run's record keeps what produced it; the re-run is one more invocation, free
    assert sent(second) == 0 and second["samples"] == first["samples"] and settled(second) == 60
    assert second["run_id"] == first["run_id"]
    assert second["scores"] == first["scores"]
    assert [i["requests"] for i in second["invocations"]] == [60, 0]
    assert second["invocations"][0] == first["invocations"][0]  # history is never rewritten
    assert second["cost_usd"] == first["cost_usd"] and second["this_invocation"]["cost_usd"] == 0
    assert second["this_invocation"]["saved_by_cache_usd"] == pytest.approx(first["cost_usd"]["total"], rel=1e-6)
    from asyncbench.report.data import load_runs
    from asyncbench.report.model import build_report

    (block,) = build_report(load_runs(tmp_path / "cache.duckdb", [first["run_id"]])).runs
    assert block["cost_usd"] == first["cost_usd"] and len(block["invocations"]) == 2  # what it cost to produce


def test_each_stored_request_json_hashes_to_its_key(tmp_path, start_sim):
    """`request_json` is the canonical request exactly as hashed into the cache key (the
    prompt by its sha256): anyone can check a row's key, and it names what was asked."""
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 12)
    assert run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url",
                   sim.base_url + "/v1")["_exit"] == 0
    prompts = {json.loads(line)["prompt"] for line in data.read_text().splitlines()}
    with Store(tmp_path / "cache.duckdb") as store:
        rows = [(r["key"], r["request_json"]) for r in store.cache.rows()]
    assert len(rows) == 12
    for key, request_json in rows:
        assert hashlib.sha256(request_json.encode()).hexdigest() == key
        asked = json.loads(request_json)
        assert asked["model"] == "sim" and asked["max_tokens"] == 8 and asked["messages_sha256"] is None
        assert asked["prompt_sha256"] in {hashlib.sha256(p.encode()).hexdigest() for p in prompts}

def test_streamed_lookups_across_chunks_send_each_request_once(tmp_path, start_sim):
    """With concurrency 1 the first lookup chunk is one request: later chunks, duplicates
    of an earlier chunk's request and a partly cached re-run must still each be sent once."""
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 40)
    lines = data.read_text().splitlines()
    dup = json.loads(lines[0])
    dup["id"] = "dup-of-q0"
    lines[-1] = json.dumps(dup)
    data.write_text("\n".join(lines) + "\n")
    args = ["--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1", "--concurrency", "1"]
    first = run_cli(tmp_path, f"jsonl:{data}", *args)
    assert settled(first) == 40 and first["samples"]["shared"] == 1 and sent(first) == 39
    assert sim.stats()["requests"] == 39
    with Store(tmp_path / "cache.duckdb") as store:
        rows = [(r.sample_id, r.prediction) for r in store.runs.results(first["run_id"])
                if r.sample_id in ("q0", "dup-of-q0")]
    assert len({pred for _, pred in rows}) == 1 and len(rows) == 2
    more = write_jsonl(tmp_path / "more.jsonl", 50)
    more.write_text(data.read_text() + "".join(more.read_text().splitlines(keepends=True)[40:]))
    second = run_cli(tmp_path, f"jsonl:{more}", *args)
    # an edited file is a new run: its 40 known answers come from the cache, the duplicate
    # shares the one cached answer it repeats (served, and saved, once)
    assert second["run_id"] != first["run_id"]
    assert sent(second) == 10 and second["samples"]["answered"] == 10
    assert second["samples"]["from_cache"] == 39 and second["samples"]["shared"] == 1
    # the live figures (`asyncbench view`) use the summary's words: shared is not from the cache
    with Store(tmp_path / "cache.duckdb") as store:
        live = store.runs.progress(second["run_id"])
    assert (live["answered"], live["from_cache"], live["shared"], live["failed"]) == (10, 39, 1, 0)


def test_malformed_line_late_in_a_streamed_file_keeps_what_was_answered(tmp_path, start_sim):
    """Requests start while the file is read: a bad line far down stops the run with one
    line naming it, the answers already received stay in the cache, and the re-run after
    the fix pays only for the rest."""
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 600)
    good = data.read_text()
    lines = good.splitlines()
    lines[550] = '{"id": "broken", "prompt": '
    data.write_text("\n".join(lines) + "\n")
    cache = tmp_path / "c.duckdb"
    args = ["run", f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
            "--cache", str(cache), "--out", str(tmp_path / "o"), "--concurrency", "4"]
    line = _one_clean_line(_cli(*args))
    assert f"{data}:551" in line
    sent = sim.stats()["requests"]
    with Store(cache) as store:
        stored = store.cache.stats()["responses"]
    assert 0 < sent < 600 and stored == sent  # every answer received was kept
    data.write_text(good)
    assert _cli(*args).returncode == 0
    assert sim.stats()["requests"] == 600  # the fixed re-run sent only what was missing


def test_fully_cached_rerun_needs_no_server(tmp_path):
    from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess

    proc, url = start_sim_subprocess([])
    data = write_jsonl(tmp_path / "d.jsonl", 20)
    try:
        first = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", url + "/v1")
    finally:
        stop_sim_subprocess(proc)
    again = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", url + "/v1")
    assert again["_exit"] == 0 and sent(again) == 0 and settled(again) == 20 and again["scores"] == first["scores"]
    more = write_jsonl(tmp_path / "more.jsonl", 21)  # one answer missing: now the server is needed
    line = _one_clean_line(_cli("run", f"jsonl:{more}", "--model", "openai-compat:sim", "--base-url", url + "/v1",
                                "--cache", str(tmp_path / "cache.duckdb"), "--out", str(tmp_path / "o2")))
    assert "cannot reach" in line


def test_percentiles_match_numpy():
    import numpy as np

    from asyncbench.percentiles import percentiles

    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 100, 1001):
        values = list(rng.exponential(200.0, n))
        expected = {f"p{q}": round(float(np.percentile(values, q)), 2) for q in (50, 95, 99)}
        assert percentiles(values) == expected
    assert percentiles([]) == {"p50": None, "p95": None, "p99": None}


def test_faults_are_retried_until_every_sample_completes(tmp_path, start_sim):
    sim = start_sim("--error-rate", "0.05", "--drop-rate", "0.01", "--malformed-rate", "0.01", "--seed", "3")
    data = write_jsonl(tmp_path / "d.jsonl", 300)
    s = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
                "--concurrency", "16")
    stats = sim.stats()
    assert s["complete"] and s["samples"]["answered"] == 300
    assert stats["errors_5xx"] > 0 and stats["dropped"] > 0
    assert s["this_invocation"]["retries"] >= stats["errors_5xx"] + stats["dropped"]


def test_context_length_error_is_fatal_and_not_retried(tmp_path, start_sim):
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 20, marker_at=7)
    s = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1")
    assert s["samples"]["answered"] == 19 and s["samples"]["failed"] == 1 and s["_exit"] == 3
    assert not s["complete"] and s["partial"] == "partial 19/20"
    assert s["failures"][0]["sample_id"] == "q7" and "context" in s["failures"][0]["error"]
    assert "--max-input-tokens" in s["failures"][0]["hint"] and s["hints"] == [s["failures"][0]["hint"]]
    assert sim.stats()["context_length_errors"] == 1  # asked once, never retried
    # failures are recorded but never served as answers: a re-run asks again
    again = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1")
    assert sent(again) == 1 and again["samples"]["answered"] == 19 and again["samples"]["failed"] == 1


def test_unknown_limits_are_learned_and_retry_after_obeyed(tmp_path, start_sim):
    sim = start_sim("--rpm", "1200")
    data = write_jsonl(tmp_path / "d.jsonl", 80)
    s = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
                "--concurrency", "32")
    assert s["complete"] and s["samples"]["answered"] == 80
    stats = sim.stats()
    assert stats["ok"] == 80
    # no limits given: the run's first request goes alone (a probe) and the limiter learns
    # the account's limits from its headers before the rest go (issue 41: a single run
    # once opened with a burst of 50-55 429s against a 600-RPM server)
    assert s["this_invocation"]["rate_limited"] == stats["rate_limited"] <= 3


@pytest.mark.slow  # the limit binds: ~25 s of the server's pace
def test_limits_learned_from_a_tpm_only_server_cost_at_most_three_429s(tmp_path, start_sim):
    sim = start_sim("--tpm", "30000")  # the 60 requests count ~34k tokens: the limit binds
    data = write_jsonl(tmp_path / "d.jsonl", 60, words=200)
    s = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
                "--concurrency", "32")
    assert s["complete"] and sim.stats()["ok"] == 60
    assert s["this_invocation"]["rate_limited"] == sim.stats()["rate_limited"] <= 3


def test_known_limits_avoid_429s(tmp_path, start_sim):
    sim = start_sim("--rpm", "1200", "--tpm", "200000")
    data = write_jsonl(tmp_path / "d.jsonl", 80, words=200)
    s = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
                "--rpm", "1200", "--tpm", "200000")
    assert s["samples"]["answered"] == 80
    assert sim.stats()["rate_limited"] <= 1  # < 1% of 80 requests, rounding up


def test_budget_stops_issuing_requests(tmp_path, start_sim):
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 100, words=400)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"sim": {"input": 1000.0, "output": 1000.0}}}))
    s = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
                "--prices", str(prices), "--max-cost", "5", "--concurrency", "4")
    assert 0 < s["samples"]["answered"] < 100 and s["_exit"] == 3
    assert s["samples"]["skipped_budget"] == 100 - s["samples"]["answered"]
    assert s["cost_usd"]["total"] <= 5.0
    assert sim.stats()["requests"] == s["samples"]["answered"]
    # --max-cost is the run's: running the same command again twice spends nothing more
    for _ in range(2):
        again = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url",
                        sim.base_url + "/v1", "--prices", str(prices), "--max-cost", "5", "--concurrency", "4")
        assert again["this_invocation"]["cost_usd"] == 0 and again["cost_usd"] == s["cost_usd"]
        assert again["samples"] == s["samples"] and again["_exit"] == 3
    assert sim.stats()["requests"] == s["samples"]["answered"]
    assert len(again["invocations"]) == 3


def test_endpoint_pool_routes_around_a_dead_replica(tmp_path, start_sim):
    good_a, good_b = start_sim(), start_sim()
    dead = "http://127.0.0.1:9"  # discard port: connection refused
    data = write_jsonl(tmp_path / "d.jsonl", 120)
    s = run_cli(tmp_path, f"jsonl:{data}", "--model", "openai-compat:sim", "--endpoint-id", "pool",
                "--base-url", good_a.base_url + "/v1", "--base-url", good_b.base_url + "/v1",
                "--base-url", dead + "/v1", "--concurrency", "8")
    assert s["samples"]["answered"] == 120
    served = {e["url"]: e for e in s["endpoints"]}
    # taken out after failing ("healthy" at the end depends on how long ago: its back-off is 1 s)
    assert served[dead + "/v1"]["served"] == 0 and served[dead + "/v1"]["failed"] >= 1
    a, b = good_a.stats()["ok"], good_b.stats()["ok"]
    assert a + b == 120 and min(a, b) > 20  # least-outstanding routing spreads the load


def test_dry_run_sends_nothing(tmp_path, start_sim, capsys):
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 10)
    code = cli_main(["run", f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
                     "--dry-run", "--json", "--cache", str(tmp_path / "c.duckdb")])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["requests"] == 10 and out["estimated_prompt_tokens"] > 0
    assert sim.stats()["requests"] == 0
    assert not (tmp_path / "c.duckdb").exists()


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_requests_nothing_twice(tmp_path, start_sim):
    sim = start_sim("--latency-ms", "150")
    data = write_jsonl(tmp_path / "d.jsonl", 200)
    cache = tmp_path / "cache.duckdb"
    cmd = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
           "--base-url", sim.base_url + "/v1", "--cache", str(cache), "--out", str(tmp_path / "out"),
           "--concurrency", "4", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while sim.stats()["ok"] < 40 and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with Store(cache) as store:
        stored = store.cache.stats()["responses"]
    assert 20 <= stored < 200
    prompts = [json.loads(line)["prompt"] for line in data.read_text().splitlines()]
    sim.reset()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "run.json").read_text())
    # the killed invocation paid for the answers in the cache and for those its journal
    # held (replayed by the resumed run): they stay "answered" in it
    assert summary["samples"]["answered"] == 200 and summary["complete"]
    paid = summary["invocations"][0]["sent"]
    assert stored <= paid < 200 and summary["invocations"][1]["sent"] == 200 - paid
    assert not summary["invocations"][0]["finished"] and summary["invocations"][1]["finished"]
    log = sim.stats(log=True)["log"]
    asked_again = set(log) & {hashlib.sha256(p.encode()).hexdigest() for p in prompts}
    assert len(log) == 200 - paid and len(asked_again) == 200 - paid  # only the missing ones


def test_api_key_never_stored_or_printed(tmp_path, start_sim):
    secret = "sk-test-" + "S3CR3T" * 6
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 10)
    env = dict(os.environ, OPENAI_API_KEY=secret, ASYNCBENCH_API_KEY=secret)
    cmd = [sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model", "openai-compat:sim",
           "--base-url", sim.base_url + "/v1", "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "out")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    blobs = [done.stdout, done.stderr] + [p.read_bytes().decode("latin-1") for p in tmp_path.rglob("*") if p.is_file()]
    assert all(secret not in b for b in blobs)
    # and the key did reach the server, so the test could have failed
    assert sim.stats()["requests"] == 10


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], capture_output=True, text=True,
                          env=env or dict(os.environ), timeout=120)


def _one_clean_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_bad_input_gives_one_line_and_exit_2(tmp_path, start_sim):
    sim = start_sim()
    data = write_jsonl(tmp_path / "d.jsonl", 5)
    cache = tmp_path / "c.duckdb"
    ok = _cli("run", f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
              "--cache", str(cache), "--out", str(tmp_path / "o"))
    assert ok.returncode == 0, ok.stderr

    assert "unknown benchmark" in _one_clean_line(_cli("run", "nosuchbench", "--model", "sim"))
    assert "malformed model spec" in _one_clean_line(_cli("run", f"jsonl:{data}", "--model", "gpt4"))
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    assert "OPENAI_API_KEY" in _one_clean_line(
        _cli("run", f"jsonl:{data}", "--model", "openai:gpt-4o-mini", "--cache", str(cache), env=env))
    assert "cannot reach" in _one_clean_line(
        _cli("run", f"jsonl:{data}", "--model", "openai-compat:m", "--base-url", "http://127.0.0.1:9/v1",
             "--cache", str(cache)))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": \n')
    line = _one_clean_line(_cli("run", f"jsonl:{bad}", "--model", "sim", "--cache", str(cache)))
    assert f"{bad}:2" in line

    # a second process holding the cache file: clear error, nothing lost
    holder = subprocess.Popen([sys.executable, "-c",
                               f"import duckdb,time; c=duckdb.connect({str(cache)!r}); print('ok', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ok"
        line = _one_clean_line(_cli("run", f"jsonl:{data}", "--model", "openai-compat:sim",
                                    "--base-url", sim.base_url + "/v1", "--cache", str(cache),
                                    env=dict(os.environ, ASYNCBENCH_LOCK_WAIT_S="1")))
        assert "in use by another" in line
    finally:
        holder.kill()
        holder.wait()
    with Store(cache) as store:
        assert store.cache.stats()["responses"] == 5


def test_provider_errors_survive_pickling():
    """Ray workers send failures back to the driver pickled: kind and fields must survive."""
    import pickle

    from asyncbench.errors import ProviderError

    err = ProviderError("rate_limited", "slow down", status=429, retry_after=1.5, ratelimit={"limit_requests": 60.0})
    back = pickle.loads(pickle.dumps(err))
    assert (back.kind, back.message, back.status, back.retry_after, back.ratelimit) == \
        ("rate_limited", "slow down", 429, 1.5, {"limit_requests": 60.0})


def test_ray_backend_without_ray_is_one_clear_line(monkeypatch):
    """Ray is an optional extra: asking for it without it installed is a user error."""
    from asyncbench.config import RunConfig
    from asyncbench.errors import UserError
    from asyncbench.run.plan import runner_for
    from asyncbench.runners import LocalRunner

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(UserError, match=r"pip install 'asyncbench\[ray\]'"):
        runner_for(RunConfig.build("minilongbench", "sim", {"backend": "ray"}))
    assert isinstance(runner_for(RunConfig.build("minilongbench", "sim")), LocalRunner)


def test_journal_lines_reach_the_os_as_each_answer_arrives(tmp_path):
    """Each answer is in the file (what a SIGKILL leaves behind) before append returns,
    inside a running event loop and outside one."""
    import asyncio

    from asyncbench.ledger import RequestEntry
    from asyncbench.store.journal import Journal
    from asyncbench.store.rows import ResponseRow

    def row(key: str) -> ResponseRow:
        return ResponseRow(key=key, provider="p", model="m", endpoint="e", request_json="{}", text="answer",
                           finish_reason="stop", prompt_tokens=1, completion_tokens=1, cached_prompt_tokens=0,
                           latency_ms=1.0, cost_usd=0.0, served_by="", created_at=0.0, cache_write_tokens=0,
                           usage_flag=None, sent_at=None, ttft_ms=None, itl_ms=None)

    journal = Journal(tmp_path / "c.duckdb", "run")

    async def turn() -> tuple[int, int]:
        journal.append(row("a"), RequestEntry(1, "eval", "t", "sent", key="a"))
        after_one = len(journal.path.read_text().splitlines())
        journal.append(row("b"), RequestEntry(1, "eval", "t", "sent", key="b"))
        return after_one, len(journal.path.read_text().splitlines())

    assert asyncio.run(turn()) == (1, 2)
    journal.append(row("c"), RequestEntry(1, "eval", "t", "sent", key="c"))
    lines = [json.loads(line) for line in journal.path.read_text().splitlines()]
    assert [line["response"]["key"] for line in lines] == ["a", "b", "c"]
    journal.close()
