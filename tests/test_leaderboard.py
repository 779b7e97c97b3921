"""The leaderboard (report/leaderboard) on real runs against the simulator: three models on
one benchmark (a look-up file whose answer sits at a varying depth in the context; models
differ in how much of the context they keep) and a fourth whose endpoint fails half its
requests (partial). Every number is checked against what the runs and `compare` give."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from asyncbench.cli import main as cli
from asyncbench.report.compare import compare_runs
from asyncbench.report.data import load_runs
from asyncbench.report.leaderboard import Leaderboard, build_leaderboard, render_leaderboard
from asyncbench.report.leaderboard.model import Entry
from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess
from asyncbench.store import Store

REPO = Path(__file__).resolve().parents[1]
FILLER = "The weather was mild that day and the birds sang in the old garden behind the house. "


def _write_data(path: Path) -> None:
    """40 look-up questions; the sentence holding the answer sits at depth (37 i mod 40)
    of 40 filler sentences, so a prompt cut in the middle loses some answers."""
    lines = []
    for i in range(40):
        depth = (i * 37) % 40
        context = FILLER * depth + f"The secret code of box {i} is {1000 + 7 * i}. " + FILLER * (40 - depth)
        lines.append(json.dumps({"id": f"q{i}", "task": "lookup" if i % 2 else "recall", "metric": "contains",
                                 "prompt": f"Context: {context}\nQuestion: What is the secret code of box {i}?\nAnswer:",
                                 "answers": [str(1000 + 7 * i)]}))
    path.write_text("\n".join(lines) + "\n")


def _run(tmp: Path, cache: Path, name: str, args: list[str]) -> dict:
    out = tmp / name
    cli(["run", f"jsonl:{tmp / 'data.jsonl'}", "--cache", str(cache), "--out", str(out), "--no-progress", *args])
    summary: dict = json.loads((out / "run.json").read_text())
    return summary


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, dict]]]:
    """alpha: the simulator with whole prompts; beta and gamma: two models behind one
    endpoint with prompts cut to 500 tokens (the same answers: a tie); delta: whole
    prompts behind an endpoint that fails half the requests, one attempt each (partial)."""
    tmp = tmp_path_factory.mktemp("leaderboard")
    _write_data(tmp / "data.jsonl")
    cache = tmp / "cache.duckdb"
    ok, ok_url = start_sim_subprocess([])
    flaky, flaky_url = start_sim_subprocess(["--error-rate", "0.5"])
    try:
        made = {"alpha": _run(tmp, cache, "alpha", ["--model", "sim"])}
        for name in ("beta", "gamma"):
            made[name] = _run(tmp, cache, name, ["--model", f"openai-compat:{name}", "--base-url", ok_url + "/v1",
                                                 "--max-input-tokens", "500"])
        made["delta"] = _run(tmp, cache, "delta", ["--model", "openai-compat:delta", "--base-url", flaky_url + "/v1",
                                                   "--max-attempts", "1"])
    finally:
        stop_sim_subprocess(ok)
        stop_sim_subprocess(flaky)
    yield cache, made


def _board(cache: Path, made: dict[str, dict]) -> Leaderboard:
    return build_leaderboard([s["run_id"] for s in made.values()], cache)


def _by_model(lb: Leaderboard) -> dict[str, Entry]:
    return {e.model.rsplit(":", 1)[-1].replace("sim", "alpha"): e for e in lb.boards[0].entries}


def test_ranking_intervals_and_pairs_equal_the_runs_and_compare(runs: tuple[Path, dict[str, dict]]) -> None:
    cache, made = runs
    lb = _board(cache, made)
    assert len(lb.boards) == 1
    board = lb.boards[0]
    entries = _by_model(lb)
    assert set(entries) == set(made)
    for name, summary in made.items():  # each model's score and interval are its run's own
        e = entries[name]
        assert e.score == summary["scores"]["overall"]
        assert list(e.ci95 or ()) == summary["scores"]["ci95"]["overall"]
        assert e.cost.usd == summary["cost_usd"]["total"]
        assert (e.cost.prompt_tokens, e.cost.completion_tokens) == (
            summary["tokens"]["total"]["prompt_tokens"], summary["tokens"]["total"]["completion_tokens"])
        assert (e.cost.p50_ms, e.cost.p95_ms) == (summary["latency_ms"]["p50"], summary["latency_ms"]["p95"])
        assert e.samples == summary["samples"]["total"]
    complete = [e for e in board.entries if not e.partial]
    assert [e.score for e in complete] == sorted((e.score for e in complete), reverse=True)
    assert entries["alpha"].score != entries["beta"].score  # the cut costs answers: the data can rank

    # every pair equals `compare` on the same two runs (lower as A: diff = higher - lower)
    loaded = {r.run_id: r for r in load_runs(cache, [s["run_id"] for s in made.values()])}
    assert len(board.pairs) == len(board.entries) * (len(board.entries) - 1) // 2
    for p in board.pairs:
        line = next(x for x in compare_runs(loaded[p.lower], loaded[p.higher]).lines if x.key == "overall")
        assert (p.diff, list(p.ci95), p.p, p.distinguishable) == (line.diff, line.ci, line.p, line.distinguishable)
        assert p.diff >= 0  # oriented: the higher-scoring run on the common samples is `higher`

    # ranks: 1 + complete models distinguishably better, from `compare`'s verdicts
    for e in complete:
        better = 0
        for other in complete:
            if other is e:
                continue
            line = next(x for x in compare_runs(loaded[e.run_id], loaded[other.run_id]).lines if x.key == "overall")
            better += line.distinguishable and line.diff > 0
        assert e.rank == 1 + better
    assert entries["beta"].rank == entries["gamma"].rank and entries["beta"].tied  # same answers: one group
    assert not entries["alpha"].tied and entries["alpha"].rank == 1


def test_cli_compare_agrees_with_the_leaderboard(runs: tuple[Path, dict[str, dict]],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    cache, made = runs
    board = _board(cache, made).boards[0]
    pair = next(p for p in board.pairs if p.adjacent)
    capsys.readouterr()
    assert cli(["compare", pair.lower, pair.higher, "--cache", str(cache), "--json"]) == 0
    line = next(x for x in json.loads(capsys.readouterr().out)["lines"] if x["key"] == "overall")
    assert (line["diff"], line["ci"], line["p"]) == (pair.diff, list(pair.ci95), pair.p)


def test_a_partial_run_is_marked_and_never_ranked_as_complete(runs: tuple[Path, dict[str, dict]]) -> None:
    cache, made = runs
    assert not made["delta"]["complete"]  # the flaky endpoint left samples unscored
    board = _board(cache, made).boards[0]
    delta = next(e for e in board.entries if e.model.endswith(":delta"))
    settled, total = made["delta"]["samples"]["settled"], made["delta"]["samples"]["total"]
    assert delta.partial == f"partial {settled}/{total}" and delta.rank is None
    assert delta.score is not None and delta.score >= max(e.score or 0 for e in board.entries if not e.partial)
    assert board.entries[-1] is delta  # below every complete run despite its score
    assert all(e.rank is not None for e in board.entries if not e.partial)


def test_formats_render(runs: tuple[Path, dict[str, dict]]) -> None:
    cache, made = runs
    lb = _board(cache, made)
    entries = _by_model(lb)
    table = render_leaderboard(lb, "table")
    assert max(len(line) for line in table.splitlines()) <= 100
    assert "partial" in table and "not distinguishable" in table
    md = render_leaderboard(lb, "md")
    assert md.startswith("# asyncbench leaderboard") and f"({entries['delta'].partial})" in md
    assert "| # | model |" in md and "2=" in md
    data = json.loads(render_leaderboard(lb, "json"))
    assert data == json.loads(json.dumps(lb.to_dict()))
    assert [e["run_id"] for e in data["boards"][0]["entries"]] == [e.run_id for e in lb.boards[0].entries]
    html = render_leaderboard(lb, "html")
    assert 'id="leaderboard-jsonl' in html and 'id="pairs-jsonl' in html and 'id="disagree-jsonl' in html
    assert 'src="http' not in html and "<link" not in html  # self-contained
    # serving latency: the table, the prefill curve and the score/cost/TTFT frontier (issue 38)
    assert 'id="serving-jsonl' in html and 'id="plot-prefill-jsonl' in html and 'id="plot-frontier-jsonl' in html
    assert "serving latency (ms) by context length" in md and "TTFT ms p50/95" in md
    assert all(e["serving"]["measured"] > 0 and "points" not in e for e in data["boards"][0]["entries"])
    disagree = lb.boards[0].disagreements
    assert disagree and all(len({s for s in d.scores if s is not None}) > 1 for d in disagree)
    assert f'id="samples-{entries["alpha"].run_id}"' in html  # the viewer of the disagreeing samples


def test_cli_leaderboard_set_file_and_bad_input(runs: tuple[Path, dict[str, dict]], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    cache, made = runs
    ids = [s["run_id"] for s in made.values()]
    capsys.readouterr()
    assert cli(["report", "--leaderboard", *(i[:8] for i in ids), "--cache", str(cache), "--format", "json"]) == 0
    entries = json.loads(capsys.readouterr().out)["boards"][0]["entries"]
    assert sorted(e["run_id"] for e in entries) == sorted(ids)

    members = [{"model": s["model"], "benchmark": s["benchmark"], "run_id": s["run_id"], "status": "complete"}
               for s in made.values()]
    members.append({"model": "openai:gpt-x", "benchmark": made["alpha"]["benchmark"], "run_id": None,
                    "status": "pending"})
    (tmp_path / "set.json").write_text(json.dumps(members))
    out = tmp_path / "board.md"
    assert cli(["report", "--set", str(tmp_path), "--cache", str(cache), "--out", str(out)]) == 0
    text = out.read_text()
    assert "openai:gpt-x on " in text and "no run yet" in text
    assert all(s["run_id"][:8] in text for s in made.values())

    (tmp_path / "bad.json").write_text(json.dumps({"runs": ids}))
    capsys.readouterr()
    assert cli(["report", "--set", str(tmp_path / "bad.json"), "--cache", str(cache)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json" in err[0]


@pytest.mark.slow
def test_published_rows_beside_a_longbench_family_run(shared_data: Path, tmp_path: Path) -> None:
    """MiniLongBench (LongBench's family): models ranked by the anchor average (what its
    intervals and comparisons cover), its estimate of full LongBench beside the papers'
    LongBench overall, which are listed but not ranked."""
    from asyncbench.report.baselines import references_for

    cache = tmp_path / "c.duckdb"
    made = []
    for name, extra in (("full", []), ("cut", ["--max-input-tokens", "1500"])):
        out = tmp_path / name
        assert cli(["run", "minilongbench", "--model", "sim", "--data-dir", str(shared_data), "--cache", str(cache),
                    "--out", str(out), "--no-progress", *extra]) == 0
        made.append(json.loads((out / "run.json").read_text()))
    lb = build_leaderboard([s["run_id"] for s in made], cache)
    board = lb.boards[0]
    assert board.score_name == "anchor_average" and board.estimate_name
    for summary in made:
        e = next(x for x in board.entries if x.run_id == summary["run_id"])
        assert e.score == summary["scores"]["anchor_average"] and e.estimate == summary["scores"]["overall"]
        assert list(e.ci95 or ()) == summary["scores"]["ci95"]["anchor_average"]
    published = {r.name: r for r in references_for("minilongbench")}
    assert board.references and {r.name for r in board.references} == set(published)
    for ref in board.references:  # the papers' full-LongBench overall, beside the estimate, unranked
        assert ref.score is None and ref.estimate_target == published[ref.name].scores["overall"]
    md = render_leaderboard(lb, "md")
    assert all(f"| ref | {r.name} |" in md for r in board.references)
    assert render_leaderboard(lb, "table").count("\n  ref ") == len(board.references)
    assert max(len(line) for line in render_leaderboard(lb, "table").splitlines()) <= 100


@pytest.mark.slow
def test_a_run_killed_before_it_finished_is_listed_unranked(runs: tuple[Path, dict[str, dict]]) -> None:
    """A run killed mid-way (no summary, nothing recorded yet) is on the board as "not
    finished", below the complete runs, with no score and no rank."""

    cache, made = runs
    tmp = cache.parent
    sim, url = start_sim_subprocess(["--latency-ms", "400"])
    try:
        run = subprocess.Popen([sys.executable, "-m", "asyncbench.cli", "run", f"jsonl:{tmp / 'data.jsonl'}", "--model",
                                "openai-compat:epsilon", "--base-url", url + "/v1", "--cache", str(cache), "--out",
                                str(tmp / "killed"), "--no-progress", "--concurrency", "2"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(r.model.endswith(":epsilon") for r in Store(cache).runs.runs()):
            time.sleep(0.2)
        time.sleep(1.0)  # some requests in flight
        run.send_signal(signal.SIGKILL)
        run.wait()
    finally:
        stop_sim_subprocess(sim)
    killed = next(r for r in Store(cache).runs.runs() if r.model.endswith(":epsilon"))
    assert not killed.summary_json
    lb = build_leaderboard([*(s["run_id"] for s in made.values()), killed.run_id[:8]], cache)
    board = lb.boards[0]
    last = board.entries[-1]
    assert last.run_id == killed.run_id and last.partial.startswith("not finished")
    assert last.rank is None and last.score is None
    assert all(p.higher != killed.run_id and p.lower != killed.run_id for p in board.pairs)
    assert "not finished" in render_leaderboard(lb, "table")


@pytest.mark.parametrize("bench", ["longbench", "longbench-e", "100-longbench", "bamboo"])
def test_published_rows_show_summary_numbers_only_over_the_tasks_run(bench: str) -> None:
    """A run of every task the paper's table has sits beside the paper's overall, length
    bins, LongScore...; a run of a subset beside the paper's per-task numbers only."""
    from asyncbench.benchmarks import score_type
    from asyncbench.report.baselines import references_for
    from asyncbench.report.leaderboard.model import _references
    from asyncbench.report.model import score_cells

    kind = score_type(bench)
    published = references_for(bench)
    cells = [score_cells(r.scores, kind.COLUMNS, kind=kind) for r in published]
    tasks = list(dict.fromkeys(t for r in published for t in [*(r.scores.get("by_task") or {}), *r.task_order]))
    keys = tuple(dict.fromkeys([*(k for c in cells for k in c), *(f"task:{t}" for t in tasks)]))
    full, note = _references(bench, kind, keys)
    assert [r.name for r in full] == [r.name for r in published] and "did not run" not in note
    for row, ref, c in zip(full, published, cells):
        assert row.score == kind.from_json(ref.scores).overall
        assert row.cells == {k: c.get(k) for k in keys}
    some = tuple(k for k in keys if not k.startswith("task:")) + tuple(f"task:{t}" for t in tasks[:2])
    subset, note = _references(f"{bench}:{','.join(tasks[:2]) or 'part'}", kind, some)
    assert all(r.score is None and all(v is None for k, v in r.cells.items() if not k.startswith("task:"))
               for r in subset)
    by_name = {r.name: c for r, c in zip(published, cells)}
    task_keys = [k for k in some if k.startswith("task:")]
    # a paper without per-task numbers (LongBench-E's by length, 100-LongBench's LongScore) has nothing to show
    assert [r.name for r in subset] == [r.name for r in published if any(by_name[r.name].get(k) is not None
                                                                         for k in task_keys)]
    assert all(row.cells[k] == by_name[row.name].get(k) for row in subset for k in task_keys)
    summary = any(v is not None for c in cells for k, v in c.items() if not k.startswith("task:"))
    assert ("did not run" in note) == summary  # BAMBOO's paper prints per-dataset numbers only
