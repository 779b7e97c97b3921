"""Figures that disagree (issue 36 item 6): every count, token and dollar a command shows
comes from the ledger, and where it counts requests it counts what the servers received.
Each test runs the real CLI against simulator subprocesses (tests/conftest.py) and checks
a figure the command prints against its source: the simulator's /stats, or the run's
ledger summed by hand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str, cwd: Path, data: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if data is not None:
        env["ASYNCBENCH_DATA_DIR"] = str(data)
    return subprocess.run([sys.executable, "-m", "asyncbench.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _data(tmp: Path, n: int) -> str:
    path = tmp / "d.jsonl"
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"s{i}", "task": "t", "prompt": f"Question {i}: what is {i} plus one?",
                                "answers": [str(i + 1)], "max_tokens": 8, "metric": "contains"}) + "\n")
    return f"jsonl:{path}"


def test_set_requests_are_what_the_servers_received(tmp_path: Path, start_sim: Any) -> None:
    """The set summary once counted answered requests (163) where the servers received
    214: a retry after a 500, a 429 and a request that failed for good are requests sent
    too. Two models on two faulty simulators (500s on one, an RPM limit on the other):
    the set's "requests sent" is the sum of what both servers' /stats say they received,
    and it is more than the answers, so counting answers would fail here."""
    flaky = start_sim("--error-rate", "0.35", "--seed", "7")
    limited = start_sim("--rpm", "300")  # TGI sends no limit headers: its client meets 429s
    (tmp_path / "set.toml").write_text(f"""benchmarks = ["{_data(tmp_path, 12)}"]
[options]
max_input_tokens = 1000
[[models]]
model = "openai-compat:a"
base_urls = ["{flaky.base_url}/v1"]
[[models]]
model = "tgi:b"
base_urls = ["{limited.base_url}"]
concurrency = 8
""")
    done = _cli("run", "--set", str(tmp_path / "set.toml"), "--cache", str(tmp_path / "c.duckdb"),
                "--out", str(tmp_path / "set"), "--no-progress", cwd=tmp_path)
    assert done.returncode in (0, 3), done.stderr
    one, two = flaky.stats(), limited.stats()
    received = one["requests"] + two["requests"]
    assert one["requests"] > one["ok"] and two["rate_limited"] > 0  # the faults happened
    line = next(x for x in done.stdout.splitlines() if x.startswith("set: "))
    sent = re.search(r"([\d,]+) requests sent; this time ([\d,]+) sent", line)
    assert sent is not None, line
    assert int(sent.group(1).replace(",", "")) == received
    assert int(sent.group(2).replace(",", "")) == received


def _table_rows(text: str) -> dict[str, list[str]]:
    """A rich table's body rows by their first cell."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) > 2 and line.startswith("│"):
            rows[cells[0]] = cells[1:]
    return rows


def _num(cell: str) -> float:
    return float(cell.replace(",", "").replace("$", ""))


def test_dry_run_totals_are_over_every_purpose(tmp_path: Path, shared_data: Path) -> None:
    """100-LongBench with a judge: the dry run's total "tokens in" was the eval's alone
    (828,507) beside a total in dollars over eval, judge and prior (1,331,998 tokens).
    Every total (requests, tokens in, output, USD) is now the sum of the purposes' rows,
    in the table and in `--json`."""
    args = ("run", "100-longbench", "--model", "sim", "--judge", "sim", "--dry-run", "--lengths", "2k",
            "--rows", "2", "--cache", str(tmp_path / "c.duckdb"))
    shown = _cli(*args, cwd=tmp_path, data=shared_data)
    assert shown.returncode == 0, shown.stderr
    rows = _table_rows(shown.stdout)
    purposes = [rows[p] for p in ("eval", "judge", "prior")]
    assert all(_num(p[1]) > 0 for p in purposes)  # the judge and prior tokens are there to leave out
    for col in range(4):  # requests, tokens in, out (max), USD
        assert _num(rows["total"][col]) == pytest.approx(sum(_num(p[col]) for p in purposes), abs=1e-4)
    priced = json.loads(_cli(*args, "--json", cwd=tmp_path, data=shared_data).stdout)
    by = priced["by_purpose"].values()
    assert priced["estimated_prompt_tokens"] == sum(p["prompt_tokens"] for p in by) == _num(rows["total"][1])
    assert priced["estimated_max_output_tokens"] == sum(p["max_output_tokens"] for p in by)
    assert priced["estimated_requests"] == sum(p["requests"] for p in by)
    assert priced["estimated_cost_usd"] == pytest.approx(sum(p["cost_usd"] for p in by))


def _run_json(tmp: Path, data: Path, *args: str) -> dict[str, Any]:
    done = _cli("run", *args, "--no-progress", "--json", cwd=tmp, data=data)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_leaderboard_shows_each_runs_cost_to_produce_it(tmp_path: Path, shared_data: Path) -> None:
    """A model answered from the cache read $0 and 0/0 tokens on the leaderboard. Run A
    pays for 15 MiniLongBench anchors and is run again (every answer from the cache: its
    cost must not double); run B asks the same 15 requests under another estimate method
    (another run id), every answer from A's cache. Both produce the same answers, so both
    show what A paid over its invocations, and B's dollars are marked as read from the
    cache at what they cost when paid."""
    cache = str(tmp_path / "c.duckdb")
    bench = ("minilongbench:narrativeqa,qasper", "--model", "sim", "--cache", cache)
    paid = _run_json(tmp_path, shared_data, *bench)
    again = _run_json(tmp_path, shared_data, *bench)
    cached = _run_json(tmp_path, shared_data, *bench, "--estimate-method", "irt")
    assert again["run_id"] == paid["run_id"] and again["samples"]["from_cache"] == 0
    assert cached["run_id"] != paid["run_id"] and cached["samples"]["from_cache"] == 15
    assert cached["cost_usd"]["total"] == 0  # B paid nothing itself: the ledger says so
    done = _cli("report", "--leaderboard", paid["run_id"], cached["run_id"], "--cache", cache, "--format", "json",
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    costs = {e["run_id"]: e["cost"] for e in json.loads(done.stdout)["boards"][0]["entries"]}
    made = paid["tokens"]["total"]
    for run_id in (paid["run_id"], cached["run_id"]):
        cost = costs[run_id]
        assert cost["usd"] == paid["cost_usd"]["total"] > 0
        assert (cost["prompt_tokens"], cost["completion_tokens"]) == (made["prompt_tokens"], made["completion_tokens"])
    assert costs[paid["run_id"]]["from_cache_usd"] == 0 and costs[cached["run_id"]]["from_cache_usd"] == costs[
        cached["run_id"]]["usd"]
    text = _cli("report", "--leaderboard", paid["run_id"], cached["run_id"], "--cache", cache, cwd=tmp_path).stdout
    assert "USD^:" in text and f"${paid['cost_usd']['total']:.4f}*^" in text


def _lookup(path: Path, wrong: set[int]) -> None:
    """5 look-up questions the simulator answers with the sentence holding the code; the
    gold answer is that code (scores 1) except for `wrong` (a string never in it: 0)."""
    lines = []
    for i in range(5):
        code = 1000 + 7 * i
        prompt = (f"Context: The weather was mild that day. The secret code of box {i} is {code}. Birds sang.\n"
                  f"Question: What is the secret code of box {i}?\nAnswer:")
        lines.append(json.dumps({"id": f"q{i}", "task": "lookup", "prompt": prompt, "metric": "contains",
                                 "answers": ["no such answer" if i in wrong else str(code)]}))
    path.write_text("\n".join(lines) + "\n")


def test_compare_states_its_rule_and_flags_where_the_tests_disagree(tmp_path: Path) -> None:
    """`compare` marked Multi-Doc QA distinguishable (its interval excludes 0) at p = 0.12
    without a word. Here B loses 3 of 5 samples A scores (per-sample differences -1, -1,
    -1, 0, 0): a bootstrap resample loses the whole difference only when it draws the two
    ties 5 times, (2/5)^5 = 1%, so the 95% interval excludes 0, while the sign-flip test
    finds a difference as large in 2 of the 8 sign patterns, p ~ 0.25. The mark follows
    the one stated rule (the interval), and the row says the tests disagree and why."""
    _lookup(tmp_path / "a.jsonl", set())
    _lookup(tmp_path / "b.jsonl", {0, 1, 2})
    cache = str(tmp_path / "c.duckdb")
    ids = [_run_json(tmp_path, tmp_path, f"jsonl:{tmp_path / n}", "--model", "sim", "--cache", cache)["run_id"]
           for n in ("a.jsonl", "b.jsonl")]
    done = _cli("compare", *ids, "--cache", cache, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    c = json.loads(done.stdout)
    overall = next(x for x in c["lines"] if x["key"] == "overall")
    assert overall["diff"] == -60.0 and overall["ci"][1] < 0 and overall["p"] > 0.05  # the two disagree here
    assert overall["distinguishable"] and not overall["tests_agree"] and "tests disagree" in overall["disagreement"]
    assert "excludes 0" in c["rule"] and "permutation" in c["why_disagree"]
    text = _cli("compare", *ids, "--cache", cache, cwd=tmp_path).stdout.splitlines()
    row = next(x for x in text if x.startswith("overall"))
    assert "not distinguishable" not in row and "tests disagree: interval excludes 0, p 0." in row
    assert any(x.startswith("distinguishable: the 95% paired bootstrap interval") for x in text)
    assert any("row(s) marked 'tests disagree'" in x and "permutation test" in x for x in text)


def _readme_block() -> list[str]:
    """The quick start's `make run` output block of README.md, after its command."""
    text = (REPO / "README.md").read_text()
    start = text.index("$ asyncbench run minilongbench --model sim --data-dir ../shared/data\n")
    return text[start:text.index("```", start)].splitlines()[1:]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _pattern(fragment: str) -> str:
    """A README fragment as a regex on the output: its wall time is the machine's."""
    return re.sub(r"in\\ \d+\\\.\ds", r"in\\ \\d+\\.\\ds", re.escape(fragment))


@pytest.mark.slow  # two whole MiniLongBench runs on the simulator (~15 s)
def test_readme_figures_are_a_real_runs(tmp_path: Path, shared_data: Path) -> None:
    """The README's quick start quotes `make run`'s output (its run id, samples, requests,
    dollars, tokens and scores); they were another run's and the text called
    `anchor_average` the plain mean of the anchors (it is the mean of the 6 category
    means: 15.59, where the plain mean is 17.48). The README's command runs here as
    written (../shared/data beside the working folder, the default cache moved into
    tmp_path): each table row it quotes is a row of the output, each other line (cut
    at its "...") is in the output, the re-run it promises sends 0 requests, and its
    anchor_average figures and wording are what the run computes."""
    (tmp_path / "shared").symlink_to(shared_data.parent)
    work = tmp_path / "checkout"
    work.mkdir()
    env = {"ASYNCBENCH_CACHE": str(tmp_path / "cache.duckdb"), "HOME": str(tmp_path), "COLUMNS": "100"}
    command = ["run", "minilongbench", "--model", "sim", "--data-dir", "../shared/data"]
    done = subprocess.run([sys.executable, "-m", "asyncbench.cli", *command, "--no-progress"], cwd=work,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    output = _flat(done.stdout)
    block = _readme_block()
    rows = [line for line in block if line.startswith(("│", "┃")) and "..." not in line]
    assert len(rows) >= 3
    for row in rows:  # narrativeqa's score, interval, samples, USD; the anchor average; the header
        assert _flat(row) in output, row
    segments, lines = [], []  # the prose between table rows, each cut at its "..."
    for line in [*block, "│"]:
        if line.startswith(("│", "┃", "┏", "┡", "└")):
            segments += [f.strip() for f in _flat("\n".join(lines)).split("...") if f.strip()]
            lines = []
        else:
            lines.append(line)
    for fragment in segments:
        assert re.search(_pattern(fragment), output), fragment
    prose = " ".join(segments)
    assert "requests 237 " in prose and "cost $0.3190; tokens in 2,055,556" in prose  # what is checked

    again = subprocess.run([sys.executable, "-m", "asyncbench.cli", *command, "--no-progress", "--json"], cwd=work,
                           env={**os.environ, "PYTHONPATH": str(REPO), **env}, capture_output=True, text=True,
                           timeout=300)
    summary = json.loads(again.stdout)
    assert summary["this_invocation"]["requests"] == 0  # "Run the same command again: 0 requests"
    scores = summary["scores"]
    by_category = scores["by_category"]
    assert len(by_category) == 6 and scores["anchor_average"] == pytest.approx(
        sum(by_category.values()) / 6, abs=0.006)
    samples = tmp_path / "s.jsonl"
    listed = _cli("samples", summary["run_id"], "--out", str(samples), "--cache", env["ASYNCBENCH_CACHE"], cwd=work)
    assert listed.returncode == 0, listed.stderr
    anchors = [json.loads(line)["score"] for line in samples.read_text().splitlines()]
    plain = round(100 * sum(anchors) / len(anchors), 2)
    readme = _flat((REPO / "README.md").read_text())
    assert len(anchors) == 237 and plain != scores["anchor_average"]
    assert "plain mean over the 237 anchors is `anchor_average`" not in readme
    assert ("the mean of the 6 category means" in readme and f"({scores['anchor_average']:.2f} in the run above; "
            f"the plain mean of the 237 anchors' scores is {plain:.2f})" in readme)


def test_endpoints_cover_every_invocation(tmp_path: Path, start_sim: Any) -> None:
    """The report's Endpoints table read "served 0" beside the run's requests once the
    run had been run again from the cache: it showed the last invocation only. Paid in
    the first invocation, read back in the second, the run's endpoint served what the
    simulator says it answered, in every format."""
    sim = start_sim()
    cache = str(tmp_path / "c.duckdb")
    args = (_data(tmp_path, 6), "--model", "openai-compat:a", "--base-url", f"{sim.base_url}/v1", "--cache", cache,
            "--max-input-tokens", "1000")
    first = _run_json(tmp_path, tmp_path, *args)
    again = _run_json(tmp_path, tmp_path, *args)
    assert again["this_invocation"]["requests"] == 0 and sim.stats()["ok"] == 6
    done = _cli("report", first["run_id"], "--cache", cache, "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    endpoints = json.loads(done.stdout)["runs"][0]["endpoints"]
    assert [(e["url"], e["served"]) for e in endpoints] == [(f"{sim.base_url}/v1", sim.stats()["ok"])]
    md = _cli("report", first["run_id"], "--cache", cache, "--format", "md", cwd=tmp_path).stdout
    row = next(x for x in md.splitlines() if f"{sim.base_url}/v1" in x)
    assert [c.strip() for c in row.strip("|").split("|")][2] == "6"


def test_endpoint_failures_cover_every_invocation(tmp_path: Path, start_sim: Any) -> None:
    """The Endpoints table's failed attempts are the run's, not the last invocation's: paid
    through 5xx errors in the first invocation, read back from the cache in the second,
    the run's endpoint failed as often as the simulator says it answered 5xx."""
    sim = start_sim("--error-rate", "0.3", "--seed", "5")
    cache = str(tmp_path / "c.duckdb")
    args = (_data(tmp_path, 12), "--model", "openai-compat:a", "--base-url", f"{sim.base_url}/v1", "--cache", cache,
            "--max-input-tokens", "1000")
    first = _run_json(tmp_path, tmp_path, *args)
    errors = sim.stats()["errors_5xx"]
    assert first["complete"] and errors > 0
    again = _run_json(tmp_path, tmp_path, *args)
    assert again["this_invocation"]["requests"] == 0
    done = _cli("report", first["run_id"], "--cache", cache, "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    endpoints = json.loads(done.stdout)["runs"][0]["endpoints"]
    assert [(e["served"], e["failed"]) for e in endpoints] == [(12, errors)]
