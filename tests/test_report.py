"""`asyncbench report` on real simulator runs: numbers equal the store's, two runs side by
side with the papers' rows (Markdown, JSON), and the HTML report rendered in headless
Chromium with every table and plot present."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from asyncbench.cli import main as cli
from asyncbench.report.baselines import published, references_for
from asyncbench.report.data import load_runs
from asyncbench.report.model import build_report, score_cells

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
ARTIFACTS = REPO / "tests" / "artifacts"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Two MiniLongBench runs on the simulator: full prompts, and prompts cut to 1500 tokens
    (a different run whose short prompts are served from the first run's cache)."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not beside the checkout")
    tmp = tmp_path_factory.mktemp("report")
    cache = tmp / "cache.duckdb"
    ids = []
    for name, extra in (("full", []), ("cut", ["--max-input-tokens", "1500"])):
        out = tmp / name
        rc = cli(["run", "minilongbench", "--model", "sim", "--data-dir", str(SHARED_DATA), "--limit", "3",
                  "--cache", str(cache), "--out", str(out), "--no-progress", *extra])
        assert rc == 0
        ids.append(json.loads((out / "run.json").read_text())["run_id"])
    assert ids[0] != ids[1]
    return cache, ids


def _rows(cache: Path, run_id: str) -> list[tuple]:
    import duckdb

    con = duckdb.connect(str(cache), read_only=True)
    try:
        return con.execute("SELECT task, status, cached, cost_usd, latency_ms, prompt_tokens, completion_tokens "
                           "FROM results WHERE run_id = ? AND purpose = 'eval'", [run_id]).fetchall()
    finally:
        con.close()


def test_numbers_equal_the_store(two_runs: tuple[Path, list[str]]) -> None:
    cache, ids = two_runs
    runs = load_runs(cache, ids)
    report = build_report(runs)
    assert [r.run_id for r in runs] == ids
    for run, block in zip(runs, report.runs):
        rows = _rows(cache, run.run_id)
        assert sum(t.n for t in run.tasks) == len(rows) == run.summary["n_samples"]
        for t in run.tasks:
            mine = [r for r in rows if r[0] == t.task]
            spent = sum(r[3] for r in mine if r[1] == "ok" and not r[2])
            saved = sum(r[3] for r in mine if r[1] == "ok" and r[2])
            assert t.cost_usd == pytest.approx(spent, abs=1e-12)
            assert t.cost_saved_usd == pytest.approx(saved, abs=1e-12)
            assert t.prompt_tokens == sum(r[5] for r in mine)
            assert t.completion_tokens == sum(r[6] for r in mine)
            fresh = [r[4] for r in mine if not r[2]] or [r[4] for r in mine]
            for q in (50, 95, 99):
                assert getattr(t.latency, f"p{q}") == pytest.approx(round(float(np.percentile(fresh, q)), 2))
            assert t.score == run.summary["scores"]["by_task"][t.task]
        # run totals: what the engine counted equals the sum of the per-sample rows
        ev = run.summary["by_purpose"]["eval"]
        assert sum(t.cost_usd for t in run.tasks) == pytest.approx(ev["cost_usd"], rel=1e-9)
        assert sum(t.cost_saved_usd for t in run.tasks) == pytest.approx(ev["cost_saved_by_cache_usd"], rel=1e-9)
        assert sum(t.n_cached for t in run.tasks) == run.summary["n_cached"]
        for key in ("cost_usd", "cost_saved_by_cache_usd", "prompt_tokens", "completion_tokens", "requests_sent",
                    "retries", "rate_limited", "wall_s", "throughput_rps", "n_failed"):
            assert block[key] == run.summary[key]
        assert block["latency_ms"]["p95"] == run.summary["latency_ms"]["p95"]
        # the single endpoint's latency is the run's request latency
        (ep,) = block["endpoints"]
        assert ep["served"] == run.summary["requests_sent"]
        assert ep["latency"]["p50"] == run.summary["latency_ms"]["p50"]
    # the second run reused the first's answers for prompts already under the cut-off
    assert report.runs[1]["n_cached"] > 0 and report.runs[1]["cost_saved_by_cache_usd"] > 0
    board = report.leaderboards[0]
    for row, run in zip(board.rows, runs):
        assert row.cells["overall"] == run.summary["scores"]["overall"]
        assert row.cells["cat:Code"] == run.summary["scores"]["by_category"]["Code"]


def test_markdown_two_runs_with_published_rows(two_runs: tuple[Path, list[str]], tmp_path: Path) -> None:
    cache, ids = two_runs
    out = tmp_path / "report.md"
    assert cli(["report", *ids, "--cache", str(cache), "--out", str(out)]) == 0
    md = out.read_text()
    runs = load_runs(cache, ids)
    header = next(line for line in md.splitlines() if line.startswith("| model |"))
    assert "| overall |" in header and "Single-Doc QA" in header
    for run in runs:
        line = next(line for line in md.splitlines() if line.startswith(f"| {run.label} | run |"))
        assert f"| {run.summary['scores']['overall']:.2f} |" in line
    assert "| GPT-3.5-Turbo-16k | reference | 44.70 | 44.00 | 44.50 |" in md
    assert "Tables 2 and 3" in md
    # per-task table: runs side by side with the paper's per-dataset numbers
    triviaqa = next(line for line in md.splitlines() if line.startswith("| triviaqa |"))
    assert triviaqa.count("|") == 2 + 2 + 8 and "| 91.40 |" in triviaqa


def test_json_two_runs_with_published_rows(two_runs: tuple[Path, list[str]], capsys: pytest.CaptureFixture) -> None:
    cache, ids = two_runs
    capsys.readouterr()
    assert cli(["report", ids[1][:6], ids[0], "--cache", str(cache), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (board,) = data["leaderboards"]
    assert [r["run_id"] for r in board["rows"] if r["kind"] == "run"] == [ids[1], ids[0]]
    refs = [r for r in board["rows"] if r["kind"] == "reference"]
    assert [r["label"] for r in refs] == [m["name"] for m in published()["longbench"]["models"]]
    glm = next(r for r in refs if r["label"] == "ChatGLM2-6B-32k")
    assert glm["cells"]["task:passage_retrieval_en"] == 77.0 and glm["cells"]["overall"] == 41.4
    assert [b["run_id"] for b in data["runs"]] == [ids[1], ids[0]]
    assert {t["task"] for t in data["runs"][0]["tasks"]} == set(load_runs(cache, [ids[1]])[0].summary["scores"]["by_task"])


def test_user_errors(two_runs: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cache, _ = two_runs
    assert cli(["report", "zzzz", "--cache", str(cache)]) == 2
    assert "no run 'zzzz'" in capsys.readouterr().err
    assert cli(["report", "--cache", str(tmp_path / "none.duckdb")]) == 2
    assert "no cache file" in capsys.readouterr().err


def test_published_baselines_are_consistent_with_their_tables() -> None:
    """Transcription check: each category average printed in LongBench Tables 2-3 is the
    mean of its printed datasets, and each overall the mean of the categories (up to the
    paper's one-decimal rounding)."""
    from asyncbench.aggregate import CATEGORIES

    lb = published()["longbench"]["models"]
    assert len(lb) == 8
    for m in lb:
        for cat, datasets in CATEGORIES.items():
            assert m["by_category"][cat] == pytest.approx(np.mean([m["by_task"][d] for d in datasets]), abs=0.051)
        # categories printed rounded (+-0.05 each) and the overall rounded again: +-0.1
        assert m["overall"] == pytest.approx(np.mean(list(m["by_category"].values())), abs=0.1)
    e = {m["name"]: m for m in published()["longbench-e"]["models"]}
    assert e["GPT-3.5-Turbo-16k"]["by_length"] == {"0-4k": 51.5, "4-8k": 47.4, "8k+": 42.4}
    bamboo = {m["name"]: m for m in published()["bamboo"]["models"]}
    assert bamboo["gpt-3.5-turbo-16k"]["hallucination"]["senhallu_4k"] == {"precision": 68.1, "recall": 96.0, "f1": 79.7}
    assert len(bamboo["Claude2-100k"]["by_task"]) == 20
    lc = {m["name"]: m["avg_lc"] for m in published()["100-longbench"]["models"]}
    assert lc["Llama-3.1-8B-Instruct"] == -17.46 and all(v < 0 for v in lc.values())
    # each benchmark has rows, and LongBench-E rows fill its length columns
    for bench in ("longbench", "longbench-e", "minilongbench", "bamboo", "100-longbench"):
        assert references_for(bench)
    assert "len:8k+" in score_cells(references_for("longbench-e")[0].scores)
    assert references_for("jsonl:/x.jsonl") == []


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_html_report_in_headless_chromium(two_runs: tuple[Path, list[str]], tmp_path: Path) -> None:
    cache, ids = two_runs
    html = tmp_path / "report.html"
    assert cli(["report", *ids, "--cache", str(cache), "--out", str(html)]) == 0
    text = html.read_text()
    assert not re.search(r'(src|href)="(?!data:)', text), "the report must not reference external assets"
    # every embedded figure is a real PNG
    for data in re.findall(r'src="data:image/png;base64,([^"]+)"', text):
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"

    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--proxy-server=127.0.0.1:9", "--window-size=1400,4600"]
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([browser, *flags, f"--user-data-dir={profile}", "--dump-dom", html.as_uri()],
                             capture_output=True, text=True, timeout=120).stdout
    expected_tables = ["leaderboard-minilongbench", "tasks-minilongbench", "cost", "endpoints",
                       *(f"tasks-run-{i}" for i in ids)]
    expected_plots = ["plot-score-minilongbench", "plot-length-minilongbench", "plot-cost", "plot-latency"]
    for table_id in expected_tables:
        assert re.search(rf'<table id="{re.escape(table_id)}"', dom), table_id
    for plot_id in expected_plots:
        assert re.search(rf'<img id="{plot_id}"[^>]*src="data:image/png;base64,', dom), plot_id
    assert dom.count("<img ") == len(expected_plots)
    assert dom.count('<tr class="reference">') == 8

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report_html.png"
    shot.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([browser, *flags, f"--user-data-dir={profile}", f"--screenshot={shot}", html.as_uri()],
                       capture_output=True, timeout=120)
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[:2] == (4600, 1400)
    assert pixels[..., :3].std() > 0.05  # not a blank page
