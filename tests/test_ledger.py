"""Numbers that add up (issue 13): every count, token and dollar of a run comes from its
ledger, so statuses sum to the sample count, tasks and purposes sum to the totals, and
the progress bar, the terminal summary, run.json and every `report` format agree.

Each scenario runs the real CLI in a subprocess against the built-in simulator: BAMBOO
(both lengths, with prompts shared between samples, one malformed row excluded),
100-LongBench with a judge (prior-knowledge exclusions), a jsonl file with failures,
duplicates and a budget stop, and a long-prompt run against an 8k-context server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from asyncbench.ledger import (
    PURPOSES,
    SAMPLE_STATUSES,
    SETTLED,
    InvocationEntry,
    Ledger,
    RequestEntry,
    RequestGroup,
    SampleEntry,
    StatusCount,
    account,
    merge_sample,
)
from asyncbench.report.tables import fmt_usd

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "bamboo").is_dir(), reason="../shared/data is not beside the checkout")
LEDGER_FIELDS = ("complete", "samples", "cost_usd", "tokens", "by_task", "invocations")
PROGRESS_FIELDS = ("answered", "cached", "shared", "failed", "skipped")


def progress_counts(line: str) -> tuple[tuple[int, ...], float] | None:
    """The counts and spend of one progress line, None for other lines."""
    found = [re.search(rf"\b{name} (\d+)", line) for name in PROGRESS_FIELDS]
    spend = re.search(r"\$([\d,.]+)", line)
    if not all(found) or spend is None or "tok/s" not in line:
        return None
    return tuple(int(m.group(1)) for m in found if m), float(spend.group(1).replace(",", ""))


def cli(tmp: Path, *args: str, check_json: bool = True) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="400")
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", *args, "--cache", str(tmp / "c.duckdb"),
                           "--out", str(tmp / "out"), "--progress"], env=env, capture_output=True, text=True,
                          timeout=600, cwd=tmp)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    run = json.loads((tmp / "out" / "run.json").read_text()) if check_json else {}
    if run:
        summary_agrees(done.stdout, run)
    return done, run


def report(tmp: Path, fmt: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="400")
    out = tmp / f"report.{fmt}"
    args = ["--out", str(out)] if fmt in ("md", "html") else ["--format", fmt]
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "report", "--cache", str(tmp / "c.duckdb"), *args],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp)
    assert done.returncode == 0, done.stderr[-2000:]
    return out.read_text() if fmt in ("md", "html") else done.stdout


def adds_up(run: dict[str, Any]) -> None:
    """Statuses sum to the count; tasks and purposes to the totals; invocations to the run."""
    n = run["samples"]
    assert sum(n[s] for s in SAMPLE_STATUSES) == n["total"]
    assert n["settled"] == sum(n[s] for s in SETTLED)
    assert run["complete"] == (n["settled"] == n["total"])
    tasks = run["by_task"].values()
    assert sum(t["n"] for t in tasks) == n["total"]
    for s in SAMPLE_STATUSES:
        assert sum(t[s] for t in tasks) == n[s], s
    for t in tasks:
        assert sum(t[s] for s in SAMPLE_STATUSES) == t["n"]
        assert sum(t["cost_usd"][p] for p in PURPOSES) == pytest.approx(t["cost_usd"]["total"], abs=1e-5)
    cost, tokens = run["cost_usd"], run["tokens"]
    assert sum(cost[p] for p in PURPOSES) == pytest.approx(cost["total"], abs=1e-5)
    assert sum(t["cost_usd"]["total"] for t in tasks) == pytest.approx(cost["total"], abs=1e-4)
    for kind in ("prompt_tokens", "completion_tokens", "cached_prompt_tokens"):
        assert sum(tokens[p][kind] for p in PURPOSES) == tokens["total"][kind]
        assert sum(t["tokens"][kind] for t in tasks) == tokens["total"][kind]
    assert sum(i["cost_usd"] for i in run["invocations"]) == pytest.approx(cost["total"], abs=1e-5)
    assert run["this_invocation"] == run["invocations"][-1]


def summary_agrees(stdout: str, run: dict[str, Any]) -> None:
    """The terminal summary prints the run.json figures: samples by status, cost by purpose."""
    n = run["samples"]
    text = " ".join(stdout.split())  # rich may wrap long lines
    assert f"samples {n['total']}: " + ", ".join(f"{s.replace('_', ' ')} {n[s]}" for s in SAMPLE_STATUSES) in text
    assert f"cost ${run['cost_usd']['total']:.4f}" in text
    assert f"spent ${run['this_invocation']['cost_usd']:.4f}" in text
    if not run["complete"]:
        assert run["partial"] in text


def progress_agrees(stderr: str, run: dict[str, Any]) -> None:
    """The last progress line of the evaluated model shows this invocation's sample counts,
    and the bars' spends add up to what the invocation spent."""
    lines = [line for line in stderr.splitlines() if progress_counts(line)]
    label = f"{run['benchmark']} {run['model']}"
    evals = [line for line in lines if line.startswith(label)]
    assert evals, stderr[-2000:]
    answered, cached, shared, failed, skipped = progress_counts(evals[-1])[0]  # type: ignore[index]
    this = run["this_invocation"]["invocation"]
    mine = run["samples"] if this == 1 else None  # on a first invocation the bar's counts are the run's
    if mine is not None:
        assert (answered, cached, shared, failed, skipped) == (
            mine["answered"], mine["from_cache"], mine["shared"], mine["failed"], mine["skipped_budget"])
    spends = sum(progress_counts(line)[1] for line in lines)  # type: ignore[index]
    assert spends == pytest.approx(run["this_invocation"]["cost_usd"], abs=1e-4 * max(1, len(lines)))


def reports_agree(tmp: Path, run: dict[str, Any]) -> dict[str, str]:
    """`report` in every format shows the run's own figures."""
    data = json.loads(report(tmp, "json"))
    (block,) = [b for b in data["runs"] if b["run_id"] == run["run_id"]]
    for key in LEDGER_FIELDS:
        assert block[key] == run[key], key
    texts = {fmt: report(tmp, fmt) for fmt in ("md", "table", "html")}
    total_usd = fmt_usd(run["cost_usd"]["total"])
    for fmt, text in texts.items():
        assert total_usd in text, fmt
        assert f"{run['samples']['total']:,}" in text, fmt
        if not run["complete"]:
            assert run["partial"] in text, fmt
    return texts


@needs_data
@pytest.mark.slow  # the whole of BAMBOO (~2 min on a busy 2-core machine): the acceptance run
def test_bamboo_with_shared_prompts_and_a_bad_row(tmp_path: Path) -> None:
    done, run = cli(tmp_path, "run", "bamboo", "--length", "both", "--model", "sim", "--data-dir", str(DATA))
    adds_up(run)
    n = run["samples"]
    # samples whose prompt another sample already asked share its answer: counted, not lost
    assert n["shared"] > 0 and n["answered"] + n["shared"] + n["excluded"] == n["total"]
    assert run["this_invocation"]["sent"] == n["answered"]
    # the release's malformed row is excluded with its reason: a re-run cannot fix it, the run is complete
    assert n["excluded"] == 1 and done.returncode == 0 and run["complete"] and n["settled"] - n["excluded"] == 1953
    assert "paperqa_16k.jsonl line 26" in run["excluded"]["samples"][0]["reason"]
    progress_agrees(done.stderr, run)
    reports_agree(tmp_path, run)


@needs_data
def test_100_longbench_with_a_judge(tmp_path: Path) -> None:
    done, run = cli(tmp_path, "run", "100-longbench", "--judge", "sim", "--lengths", "2k,4k", "--rows", "2",
                    "--model", "sim", "--data-dir", str(DATA))
    assert done.returncode == 0, done.stderr[-2000:]
    adds_up(run)
    prior = run["prepare"]["prior_knowledge"]
    assert run["samples"]["excluded"] == prior["excluded"] and run["complete"]
    # the cells it cannot build at short lengths are named, and the overall says what it covers
    text = " ".join(done.stdout.split())
    for task, cells in run["scores"]["unbuildable"].items():
        for length in cells:
            assert f"not built {task} at {length}: " in text
    covered = run["scores"]["overall_tasks"]
    assert run["scores"]["unbuildable"] and f"overall covers {len(covered)} of 8 tasks" in text
    tokens = run["tokens"]
    assert all(tokens[p]["prompt_tokens"] > 0 for p in PURPOSES)  # judge tokens are in the totals
    progress_agrees(done.stderr, run)
    texts = reports_agree(tmp_path, run)
    for p in PURPOSES:
        assert fmt_usd(run["cost_usd"][p]) in texts["md"]


def _jsonl(path: Path) -> Path:
    rows = []
    for i in range(40):
        prompt = f"Passage {i}: " + " ".join(f"w{(i * 7 + k) % 97}" for k in range(400)) + "\nAnswer:"
        if i in (1, 2):
            prompt = "<<SIM:CONTEXT_TOO_LONG>> " + prompt
        rows.append({"id": f"q{i}", "prompt": prompt, "answers": ["w1"], "max_tokens": 8,
                     "task": "even" if i % 2 == 0 else "odd"})
    rows[3] = dict(rows[0], id="q3", task="odd")  # the same request as q0
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_jsonl_with_failures_duplicates_and_a_budget_stop(tmp_path: Path) -> None:
    from asyncbench.sim.testing import sim_subprocess

    data = _jsonl(tmp_path / "d.jsonl")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"m": {"input": 1000.0, "output": 1000.0}}}))
    with sim_subprocess([]) as url:
        args = ["run", f"jsonl:{data}", "--model", "openai-compat:m", "--base-url", url + "/v1", "--prices",
                str(prices), "--max-cost", "6", "--concurrency", "1"]
        done, run = cli(tmp_path, *args)
        n = run["samples"]
        assert done.returncode == 3 and not run["complete"]
        assert n["failed"] == 2 and n["shared"] == 1 and n["answered"] > 0 and n["skipped_budget"] > 0
        assert run["cost_usd"]["total"] <= 6
        adds_up(run)
        progress_agrees(done.stderr, run)
        reports_agree(tmp_path, run)
        assert [f["sample_id"] for f in run["failures"] if f["status"] == "failed"] == ["q1", "q2"]
        # the budget is the run's: running the same command twice more spends nothing
        for _ in range(2):
            again_done, again = cli(tmp_path, *args)
            assert again_done.returncode == 3 and again["this_invocation"]["cost_usd"] == 0
            assert again["cost_usd"] == run["cost_usd"] and again["invocations"][0] == run["invocations"][0]
            adds_up(again)
        assert len(again["invocations"]) == 3
        # a larger budget continues the same run: the history gains an invocation
        _, fourth = cli(tmp_path, *[a if a != "6" else "1000" for a in args])
        assert fourth["run_id"] == run["run_id"] and len(fourth["invocations"]) == 4
        assert fourth["samples"]["skipped_budget"] == 0 and fourth["samples"]["failed"] == 2
        assert fourth["invocations"][:3] == again["invocations"]
        adds_up(fourth)
        # an edited file is another run, even at the same path: nothing of the old one mixes in
        data.write_text(data.read_text().replace('"q39"', '"q39-edited"'))
        _, edited = cli(tmp_path, *[a if a != "6" else "1000" for a in args])
        assert edited["run_id"] != run["run_id"] and len(edited["invocations"]) == 1
        assert edited["samples"]["total"] == 40 and "q39" not in {f["sample_id"] for f in edited["failures"]}


def test_unpriced_model_with_a_budget_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "prompt": "hi"}\n')
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENAI_API_KEY="sk-test")
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model",
                           "openai:gpt-4.5-preview", "--base-url", "http://127.0.0.1:9/v1", "--max-cost", "0.0001",
                           "--cache", str(tmp_path / "c.duckdb"), "--out", str(tmp_path / "o")],
                          env=env, capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "--prices FILE" in lines[0] and "gpt-4.5-preview" in lines[0]
    dry = subprocess.run([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{data}", "--model",
                          "openai:gpt-4.5-preview", "--base-url", "http://127.0.0.1:9/v1", "--dry-run", "--json"],
                         env=env, capture_output=True, text=True, timeout=60)
    plan = json.loads(dry.stdout)
    assert dry.returncode == 0 and plan["estimated_cost_usd"] == "unpriced"


@needs_data
def test_long_prompts_against_an_8k_server_end_partial_everywhere(tmp_path: Path) -> None:
    from asyncbench.sim.testing import sim_subprocess

    pytest.importorskip("anthropic")
    # Anthropic's API does not report a context: the table's 200k is trusted, and this
    # endpoint holds 8k, so long prompts fail as "prompt is too long"
    with sim_subprocess(["--max-context-tokens", "8192"]) as url:
        done, run = cli(tmp_path, "run", "minilongbench:narrativeqa,qasper,hotpotqa,lcc", "--model",
                        "anthropic:claude-haiku-4-5", "--base-url", url, "--data-dir", str(DATA))
    n = run["samples"]
    assert done.returncode == 3 and not run["complete"] and 0 < n["failed"] < n["total"]
    assert run["partial"] == f"partial {n['settled']}/{n['total']}"
    assert any("--max-input-tokens" in h for h in run["hints"])
    adds_up(run)
    # "partial" in every output: the terminal, run.json, each report format and `cache runs`
    assert run["partial"] in done.stdout and "--max-input-tokens" in done.stdout and run["partial"] in done.stderr
    reports_agree(tmp_path, run)
    runs = subprocess.run([sys.executable, "-m", "asyncbench.cli", "cache", "runs", "--cache", str(tmp_path / "c.duckdb")],
                          env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=60)
    assert run["partial"] in runs.stdout
    # a partial run's overall is never a plain number in the table
    assert run["scores"]["overall"] is None  # MiniLongBench's overall (the estimate) needs all 237 anchors
    assert f"| {run['scores']['anchor_average']:.2f} |" not in report(tmp_path, "md")


def group(requests: Iterable[RequestEntry]) -> list[RequestGroup]:
    """Request rows summed as the store's GROUP BY sums them (for rows built in memory)."""
    out: dict[tuple[int, str, str, str], RequestGroup] = {}
    for r in requests:
        key = (r.invocation, r.task, r.purpose, r.source)
        g = out.get(key)
        if g is None:
            g = out[key] = RequestGroup(*key)
        g.n += 1
        g.prompt_tokens += r.prompt_tokens
        g.completion_tokens += r.completion_tokens
        g.cached_prompt_tokens += r.cached_prompt_tokens
        g.cost_usd += r.cost_usd
        g.saved_usd += r.saved_usd
    return list(out.values())


def count(samples: Iterable[SampleEntry]) -> list[StatusCount]:
    """Sample rows counted as the store counts them."""
    out: dict[tuple[str, str], int] = defaultdict(int)
    for e in samples:
        out[(e.task, e.status)] += 1
    return [StatusCount(t, s, n) for (t, s), n in out.items()]


def test_account_is_a_function_of_the_rows() -> None:
    """Unit check of the ledger arithmetic: shares, invocations and the keep-history rule."""
    samples = [SampleEntry("a", "t1", "answered", 1), SampleEntry("b", "t1", "shared", 1),
               SampleEntry("c", "t2", "failed", 2, "transient: HTTP 500"), SampleEntry("d", "t2", "excluded", 1)]
    requests = [RequestEntry(1, "eval", "t1", "sent", "k1", "a", 100, 10, 0, 0.5, latency_ms=5.0, attempts=1),
                RequestEntry(1, "eval", "t1", "shared", "k1", "b"),
                RequestEntry(1, "judge", "t1", "sent", "j1", None, 50, 5, 0, 0.25, attempts=1),
                RequestEntry(2, "eval", "t1", "from_cache", "k1", "a", 100, 10, 0, 0.0, 0.5),
                RequestEntry(2, "eval", "t2", "failed", "k3", "c", attempts=3)]
    invs = [InvocationEntry(1, 0.0, 1.0, 3, 0, 0, 0, False, True), InvocationEntry(2, 5.0, 0.5, 3, 2, 0, 2, False, True)]
    led = account(Ledger(count(samples), group(requests), invs))
    assert led["samples"]["total"] == 4 and led["samples"]["settled"] == 3 and not led["complete"]
    assert led["cost_usd"] == {"eval": 0.5, "judge": 0.25, "prior": 0.0, "total": 0.75}
    assert led["by_task"]["t1"]["cost_usd"]["total"] == 0.75 and led["by_task"]["t2"]["cost_usd"]["total"] == 0
    assert [i["cost_usd"] for i in led["invocations"]] == [0.75, 0.0]
    assert led["invocations"][1]["saved_by_cache_usd"] == 0.5
    assert led["tokens"]["total"]["prompt_tokens"] == 150
    # run.json's fields, in run.json's order: a task block's statuses, an invocation's entry first
    assert list(led["by_task"]["t2"]) == ["n", *SAMPLE_STATUSES, "settled", "complete", "cost_usd", "tokens"]
    t2 = led["by_task"]["t2"]
    assert (t2["failed"], t2["excluded"], t2["settled"], t2["n"]) == (1, 1, 1, 2)
    assert list(led["invocations"][1])[:11] == [f.name for f in fields(InvocationEntry)]
    assert led["invocations"][1]["retries"] == 2 and led["invocations"][1]["host"] == ""
    # an answer re-read from the cache keeps the invocation that produced it
    kept = merge_sample(samples[0], SampleEntry("a", "t1", "from_cache", 2))
    assert kept == samples[0]
    # paid by an invocation that died before recording its samples: booked as it would have
    assert merge_sample(None, SampleEntry("a", "t1", "from_cache", 2), paid=(1, "a")) == SampleEntry(
        "a", "t1", "answered", 1)
    assert merge_sample(None, SampleEntry("b", "t1", "shared", 2), paid=(1, "a")) == SampleEntry("b", "t1", "shared", 1)
    assert merge_sample(samples[2], SampleEntry("c", "t2", "answered", 3)).status == "answered"


def test_a_v1_cache_is_migrated_with_its_runs_history(tmp_path: Path) -> None:
    """A cache written before the ledger: its runs get sample statuses, one invocation and
    the request rows their results imply, and `report` shows them."""
    import duckdb

    from asyncbench.report.data import load_runs
    from asyncbench.store import Store

    path = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("""CREATE TABLE runs (run_id VARCHAR PRIMARY KEY, benchmark VARCHAR, model VARCHAR, config_json VARCHAR,
                   started_at DOUBLE, finished_at DOUBLE, status VARCHAR, summary_json VARCHAR)""")
    con.execute("""CREATE TABLE results (run_id VARCHAR, sample_id VARCHAR, task VARCHAR, purpose VARCHAR, key VARCHAR,
                   status VARCHAR, score DOUBLE, prediction VARCHAR, cached BOOLEAN, error VARCHAR,
                   prompt_tokens BIGINT, completion_tokens BIGINT, cached_prompt_tokens BIGINT, cost_usd DOUBLE,
                   latency_ms DOUBLE, truncated_tokens BIGINT, meta_json VARCHAR,
                   PRIMARY KEY (run_id, sample_id, purpose))""")
    summary = {"wall_s": 3.5, "requests_sent": 3, "retries": 1, "rate_limited": 0, "n_failed": 1,
               "scores": {"overall": 50.0, "by_task": {"t": 50.0}}}
    con.execute("INSERT INTO runs VALUES ('r1', 'jsonl:x', 'openai-compat:m', '{}', 1.0, 2.0, 'partial', ?)",
                [json.dumps(summary)])
    rows = [("a", "ok", False, 0.5), ("b", "ok", True, 0.25), ("c", "failed", False, 0.0)]
    for sid, status, cached, cost in rows:
        con.execute("INSERT INTO results VALUES ('r1', ?, 't', 'eval', ?, ?, 1.0, 'p', ?, NULL, 10, 2, 0, ?, 5.0, 0, "
                    "'{}')", [sid, "k" + sid, status, cached, cost])
    con.close()
    with Store(path) as store:
        assert [s.status for s in store.runs.sample_entries("r1")] == ["answered", "from_cache", "failed"]
        led = store.runs.ledger("r1")
        assert sorted((g.source, g.n) for g in led.requests) == [("failed", 1), ("from_cache", 1), ("sent", 1)]
        assert len(led.invocations) == 1 and led.invocations[0].requests == 3 and not led.invocations[0].complete
    (run,) = load_runs(path, ["r1"])
    assert run.ledger["cost_usd"]["total"] == 0.5 and run.partial == "partial 2/3"
    assert run.ledger["invocations"][0]["saved_by_cache_usd"] == 0.25
    # and on to v3: its samples are viewable, without the prompts and references v1 never kept
    from asyncbench.report.samples import load_samples
    from asyncbench.store.schema import SCHEMA_VERSION

    records = load_samples(Store(path), "r1")
    assert [(r.sample_id, r.status, r.prompt, r.references) for r in records] == [
        ("a", "answered", None, []), ("b", "from_cache", None, []), ("c", "failed", None, [])]
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    con.close()


@needs_data
def test_dry_run_counts_cache_hits_free_and_plans_judge_and_prior_calls(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    base = [sys.executable, "-m", "asyncbench.cli", "run", "100-longbench", "--judge", "sim", "--lengths", "2k",
            "--rows", "2", "--model", "sim", "--data-dir", str(DATA), "--cache", str(tmp_path / "c.duckdb")]

    def dry() -> dict[str, Any]:
        done = subprocess.run([*base, "--dry-run", "--json"], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        plan: dict[str, Any] = json.loads(done.stdout)
        return plan

    before = dry()
    assert not (tmp_path / "c.duckdb").exists()  # a dry run creates no cache
    assert before["cached"] == 0 and before["to_send"] == before["requests"] > 0
    judge, prior = before["by_purpose"]["judge"], before["by_purpose"]["prior"]
    assert judge["requests"] > 0 and judge["cost_usd"] > 0 and prior["requests"] > 0 and prior["cost_usd"] > 0
    assert before["estimated_cost_usd"] == pytest.approx(sum(p["cost_usd"] for p in before["by_purpose"].values()))
    subprocess.run([*base, "--out", str(tmp_path / "o"), "--no-progress"], env=env, capture_output=True, timeout=300)
    after = dry()
    # every answer, judge and prior call is now in the cache: the re-run spends $0, and the
    # dry run says so exactly (the prior-filtered samples are left out again, never asked)
    ran = json.loads((tmp_path / "o" / "run.json").read_text())
    assert after["cached"] == ran["samples"]["answered"] and after["to_send"] == 0
    assert after["left_out_as_stored"] == ran["samples"]["excluded"]
    assert after["estimated_cost_usd"] == 0 and after["estimate"] == "exact"
    assert {p: b["estimate"] for p, b in after["by_purpose"].items()} == dict.fromkeys(PURPOSES, "exact")
    assert before["estimate"] == "upper bound" and before["by_purpose"]["judge"]["estimate"] == "upper bound"
    subprocess.run([*base, "--out", str(tmp_path / "o"), "--no-progress"], env=env, capture_output=True, timeout=300)
    assert json.loads((tmp_path / "o" / "run.json").read_text())["this_invocation"]["cost_usd"] == 0
    table = subprocess.run([*base, "--dry-run"], env=env, capture_output=True, text=True, timeout=300).stdout
    assert "exact" in table and "{" not in table  # a readable table by default
