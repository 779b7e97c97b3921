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

from asyncbench.benchmarks import score_type
from asyncbench.cli import main as cli
from asyncbench.estimators.methods import DEFAULT_METHOD
from asyncbench.report.baselines import published, references_for
from asyncbench.report.data import load_runs
from asyncbench.report.model import build_report, score_cells
from asyncbench.store import Store

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
ARTIFACTS = REPO / "tests" / "artifacts"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Two MiniLongBench runs on the simulator (all 237 anchors, so each has its estimate):
    full prompts, and prompts cut to 1500 tokens (a different run whose short prompts are
    served from the first run's cache)."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not beside the checkout")
    tmp = tmp_path_factory.mktemp("report")
    cache = tmp / "cache.duckdb"
    ids = []
    for name, extra in (("full", []), ("cut", ["--max-input-tokens", "1500"])):
        out = tmp / name
        rc = cli(["run", "minilongbench", "--model", "sim", "--data-dir", str(SHARED_DATA),
                  "--cache", str(cache), "--out", str(out), "--no-progress", *extra])
        assert rc == 0
        ids.append(json.loads((out / "run.json").read_text())["run_id"])
    assert ids[0] != ids[1]
    return cache, ids




LEDGER_FIELDS = ("complete", "samples", "cost_usd", "tokens", "by_task", "invocations")


def test_numbers_equal_the_store(two_runs: tuple[Path, list[str]]) -> None:
    """Every figure of the report is the store's ledger summed, and equals run.json's."""
    cache, ids = two_runs
    runs = load_runs(cache, ids)
    report = build_report(runs)
    assert [r.run_id for r in runs] == ids
    for run, block in zip(runs, report.runs):
        with Store(cache) as store:
            samples = [(r.task, r.status, r.latency_ms) for r in store.runs.results(run.run_id) if r.purpose == "eval"]
            paid = [(r.task, r.purpose, r.cost_usd, r.prompt_tokens, r.completion_tokens)
                    for r in store.runs.request_rows(run.run_id) if r.source == "sent"]
        assert sum(t.n for t in run.tasks) == len(samples) == run.summary["samples"]["total"]
        for t in run.tasks:
            mine = [r for r in samples if r[0] == t.task]
            assert t.n == len(mine) and sum(t.statuses.values()) == t.n
            assert t.statuses["answered"] == sum(r[1] == "answered" for r in mine)
            assert t.cost_usd["total"] == pytest.approx(sum(r[2] for r in paid if r[0] == t.task), abs=1e-6)
            assert t.prompt_tokens == sum(r[3] for r in paid if r[0] == t.task)
            assert t.completion_tokens == sum(r[4] for r in paid if r[0] == t.task)
            fresh = [r[2] for r in mine if r[1] == "answered"] or [r[2] for r in mine]
            for q in (50, 95, 99):
                assert getattr(t.latency, f"p{q}") == pytest.approx(round(float(np.percentile(fresh, q)), 2))
            assert t.score == run.summary["scores"]["by_task"][t.task]
        # the report's run figures are run.json's, and its columns add up to its totals
        for key in LEDGER_FIELDS:
            assert block[key] == run.summary[key], key
        assert sum(t.cost_usd["total"] for t in run.tasks) == pytest.approx(block["cost_usd"]["total"], abs=1e-5)
        assert sum(block["cost_usd"][p] for p in ("eval", "judge", "prior")) == pytest.approx(
            block["cost_usd"]["total"], abs=1e-5)
        assert block["cost_usd"]["total"] == pytest.approx(sum(r[2] for r in paid), abs=1e-6)
        assert block["latency_ms"]["p95"] == run.summary["latency_ms"]["p95"]
        # the single endpoint's latency is the run's request latency
        (ep,) = block["endpoints"]
        assert ep["served"] == run.summary["this_invocation"]["requests"]
        assert ep["latency"]["p50"] == run.summary["latency_ms"]["p50"]
    # the second run reused the first's answers for prompts already under the cut-off
    assert report.runs[1]["samples"]["from_cache"] > 0 and report.runs[1]["this_invocation"]["saved_by_cache_usd"] > 0
    estimated, anchors = report.leaderboards
    for row, run in zip(anchors.rows, runs):
        assert row.cells["anchor_average"] == run.summary["scores"]["anchor_average"] and "overall" not in row.cells
        assert row.cells["cat:Code"] == run.summary["scores"]["by_category"]["Code"]
    for row, run in zip(estimated.rows, runs):  # the estimate, x100, with every method's overall
        est = run.summary["scores"]["estimate"]
        assert row.cells["overall"] == pytest.approx(100 * est["overall"])
        assert row.cells["est:direct"] == pytest.approx(100 * est["direct"]["overall"])
        assert row.cells["cat:Code"] == pytest.approx(100 * est[est["method"]]["by_category"]["Code"])  # the headline's


def _section(md: str, title: str) -> list[str]:
    lines = md.splitlines()
    start = lines.index(f"## {title}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def test_markdown_two_runs_with_published_rows(two_runs: tuple[Path, list[str]], tmp_path: Path) -> None:
    cache, ids = two_runs
    out = tmp_path / "report.md"
    assert cli(["report", *ids, "--cache", str(cache), "--out", str(out)]) == 0
    md = out.read_text()
    runs = load_runs(cache, ids)
    # the estimate of the full benchmark sits with the papers' full-benchmark rows...
    estimated = _section(md, "minilongbench: estimated full LongBench")
    header = next(line for line in estimated if line.startswith("| model |"))
    assert f"| estimated overall ({DEFAULT_METHOD})* |" in header and "estimated overall (direct)" in header
    for run in runs:
        line = next(line for line in estimated if line.startswith(f"| {run.label} | run |"))
        assert f"| {100 * run.summary['scores']['estimate']['overall']:.2f} |" in line
    assert any(line.startswith("| GPT-3.5-Turbo-16k | reference | 44.70 |") for line in estimated)
    assert "Tables 2 and 3" in "\n".join(estimated)
    assert md.count("dollars are notional: the built-in simulator") == 2  # one line per simulator run
    # ...and the 237-anchor averages apart, with no published row beside them
    anchors = _section(md, "minilongbench: 237-anchor averages (not full-LongBench scores)")
    header = next(line for line in anchors if line.startswith("| model |"))
    assert "| anchor average |" in header and "Single-Doc QA" in header
    assert not any("| reference |" in line or "(paper)" in line for line in anchors)
    for run in runs:
        line = next(line for line in anchors if line.startswith(f"| {run.label} | run |"))
        scores = run.summary["scores"]
        lo, hi = scores["ci95"]["anchor_average"]  # the run's 95% interval, as its half-width
        assert f"| {scores['anchor_average']:.2f} ±{(hi - lo) / 2:.2f} |" in line
    # per-task table: runs side by side with the paper's per-dataset numbers
    triviaqa = next(line for line in estimated if line.startswith("| triviaqa"))
    assert triviaqa.count("|") == 2 + 2 + 8 and "| 91.40 |" in triviaqa


def test_json_two_runs_with_published_rows(two_runs: tuple[Path, list[str]], capsys: pytest.CaptureFixture) -> None:
    cache, ids = two_runs
    capsys.readouterr()
    assert cli(["report", ids[1][:6], ids[0], "--cache", str(cache), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    board, anchors = data["leaderboards"]
    assert [r["run_id"] for r in board["rows"] if r["kind"] == "run"] == [ids[1], ids[0]]
    assert not [r for r in anchors["rows"] if r["kind"] == "reference"]
    refs = [r for r in board["rows"] if r["kind"] == "reference"]
    assert [r["label"] for r in refs] == [m["name"] for m in published()["longbench"]["models"]]
    glm = next(r for r in refs if r["label"] == "ChatGLM2-6B-32k")
    assert glm["cells"]["task:passage_retrieval_en"] == 77.0 and glm["cells"]["overall"] == 41.4
    assert [b["run_id"] for b in data["runs"]] == [ids[1], ids[0]]
    assert {t["task"] for t in data["runs"][0]["tasks"]} == set(load_runs(cache, [ids[1]])[0].summary["scores"]["by_task"])
    for block in data["runs"]:  # the ledger's fields, as in run.json
        assert set(LEDGER_FIELDS) <= set(block) and block["invocations"][0]["invocation"] == 1


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
    from asyncbench.benchmarks.longbench.aggregate import CATEGORIES

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
    assert "len:8k+" in score_cells(references_for("longbench-e")[0].scores, kind=score_type("longbench-e"))
    assert references_for("jsonl:/x.jsonl") == []


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_html_report_in_headless_chromium(two_runs: tuple[Path, list[str]], tmp_path: Path) -> None:
    cache, ids = two_runs
    html = tmp_path / "report.html"
    assert cli(["report", *ids, "--cache", str(cache), "--out", str(html)]) == 0
    text = html.read_text()
    assert not re.search(r'(src|href)="(?!data:|#)', text), "the report must not reference external assets"
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
    est, anchors = "minilongbench-estimated-full-longbench", "minilongbench-237-anchor-averages-not-full-longbench-scores"
    expected_tables = [f"leaderboard-{est}", f"tasks-{est}", f"leaderboard-{anchors}", f"tasks-{anchors}", "cost",
                       "invocations", "serving", "endpoints", *(f"tasks-run-{i}" for i in ids)]
    expected_plots = [f"plot-score-{est}", f"plot-length-{est}", f"plot-frontier-{est}", f"plot-score-{anchors}",
                      f"plot-length-{anchors}", f"plot-frontier-{anchors}", "plot-cost", "plot-latency", "plot-prefill"]
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


def _dom(browser: str, url: str, shot: Path | None = None) -> str:
    """The DOM after the page's script ran (and a screenshot when `shot` is given)."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--proxy-server=127.0.0.1:9", "--window-size=1400,1800", "--virtual-time-budget=3000"]
    with tempfile.TemporaryDirectory() as profile:
        if shot is not None:
            shot.unlink(missing_ok=True)
            subprocess.run([browser, *flags, f"--user-data-dir={profile}", f"--screenshot={shot}", url],
                           capture_output=True, timeout=120)
            return ""
        return subprocess.run([browser, *flags, f"--user-data-dir={profile}", "--dump-dom", url],
                              capture_output=True, text=True, timeout=120).stdout


def _detail(dom: str, run_id: str) -> str:
    found = re.search(rf'<div class="detail" id="detail-{run_id}">(.*?)</div>', dom, re.DOTALL)
    assert found, "the detail pane did not open"
    return found.group(1)


def _as_text_node(text: str | None) -> str:
    text = text or ""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _visible_rows(dom: str, run_id: str) -> list[list[str]]:
    table = re.search(rf'<table id="samples-table-{run_id}">.*?<tbody>(.*?)</tbody>', dom, re.DOTALL)
    assert table, "the sample table is missing"
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1))]


@pytest.mark.slow
def test_sample_viewer_filters_sorts_and_opens_a_sample_in_headless_chromium(
        two_runs: tuple[Path, list[str]], tmp_path: Path) -> None:
    from asyncbench.report.samples import load_samples
    from asyncbench.report.viewer import readable
    from asyncbench.store import Store

    cache, ids = two_runs
    html = tmp_path / "report.html"
    assert cli(["report", *ids, "--cache", str(cache), "--out", str(html)]) == 0
    text = html.read_text()
    assert not re.search(r'(src|href)="(?!data:|#)', text) and "<script src" not in text  # still self-contained
    records = {r.sample_id: r for r in load_samples(Store(cache), ids[0])}
    # the two runs (full and cut prompts) disagree on some samples: listed, largest first
    other = {r.sample_id: r for r in load_samples(Store(cache), ids[1])}
    differ = [k for k, r in records.items() if r.score != other[k].score]
    compare = re.search(rf'<table id="compare-{ids[0]}-{ids[1]}">.*?<tbody>(.*?)</tbody>', text, re.DOTALL)
    assert compare and compare.group(1).count("<tr>") == len(differ) > 0

    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    run = ids[0]
    everything = _visible_rows(_dom(browser, f"{html.as_uri()}#samples={run}"), run)
    assert len(everything) == 237
    # filter: one task, a score range, sorted by score from the top
    url = f"{html.as_uri()}#samples={run}&task=qasper&min=0.05&max=0.9&sort=score%3Adesc"
    rows = _visible_rows(_dom(browser, url), run)
    expected = sorted((r for r in records.values() if r.task == "qasper" and r.score is not None
                       and 0.05 <= r.score <= 0.9), key=lambda r: -(r.score or 0))
    assert [row[0] for row in rows] == [r.sample_id for r in expected] and rows
    assert [float(row[3]) for row in rows] == sorted((float(row[3]) for row in rows), reverse=True)
    # status filter: every sample of this run was answered, so "failed" shows none
    assert _visible_rows(_dom(browser, f"{html.as_uri()}#samples={run}&status=failed"), run) == []
    # the detail pane: references, prediction and the prompt. The first run's prompts (full
    # contexts, ~10 MB) are kept in the file as head and tail, pointing to `samples`
    longest = max(records.values(), key=lambda r: len(r.prompt or ""))
    pane = _detail(_dom(browser, f"{html.as_uri()}#samples={run}&open={longest.sample_id}"), run)
    assert f"{longest.sample_id} ({longest.task})" in pane
    assert "characters left out of this report" in pane and f"asyncbench samples {run}" in pane
    assert _as_text_node(longest.references[0][:40]) in pane and "Prediction" in pane
    # the second run's prompts (cut to 1,500 tokens) kept whole in the file (those under the
    # report's size budget): collapsed to head and tail with a control to expand, and whole when expanded
    from asyncbench.report.viewer import COLLAPSE_OVER, FIELDS

    found = re.search(rf'<script type="application/json" id="samples-data-{ids[1]}">(.*?)</script>', text, re.DOTALL)
    assert found
    data_rows = [dict(zip(FIELDS, row)) for row in json.loads(found.group(1).replace("<\\!--", "<!--"))["rows"]]
    whole = [r for r in data_rows if not r.get("prompt_cut") and len(r.get("prompt") or "") > COLLAPSE_OVER]
    cut = other[max(whole, key=lambda r: len(r["prompt"]))["sample_id"]]
    base = f"{html.as_uri()}#samples={ids[1]}&open={cut.sample_id}"
    collapsed, expanded = _detail(_dom(browser, base), ids[1]), _detail(_dom(browser, base + "&expand=1"), ids[1])
    assert 'class="expand"' in collapsed and "characters …]" in collapsed
    tail = _as_text_node(readable(cut.prompt)[-200:])
    middle = _as_text_node(readable(cut.prompt)[len(readable(cut.prompt)) // 2:][:200])
    assert tail in collapsed and middle not in collapsed
    assert middle in expanded and 'class="expand"' not in expanded

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    _dom(browser, url + "&focus=1", ARTIFACTS / "viewer_filtered.png")
    _dom(browser, f"{html.as_uri()}#samples={run}&open={longest.sample_id}&focus=1", ARTIFACTS / "viewer_detail.png")
    from matplotlib.image import imread

    for name in ("viewer_filtered.png", "viewer_detail.png"):
        assert imread(ARTIFACTS / name)[..., :3].std() > 0.05


@pytest.mark.slow
def test_contents_scroll_numeric_ids_and_paging_in_headless_chromium(two_runs: tuple[Path, list[str]],
                                                                      tmp_path: Path) -> None:
    from asyncbench.report.samples import natural_key
    from asyncbench.report.viewer import PAGE

    cache, ids = two_runs
    html = tmp_path / "report.html"
    assert cli(["report", *ids, "--cache", str(cache), "--out", str(html)]) == 0
    text = html.read_text()
    contents = re.search(r'<nav id="contents">(.*?)</nav>', text, re.DOTALL)
    assert contents, "no table of contents"
    for anchor in re.findall(r'href="#(section-[^"]+)"', contents.group(1)):
        assert f'<h2 id="{anchor}">' in text  # every entry leads to its section
    assert "section-cost-and-latency" in contents.group(1) and "section-samples" in contents.group(1)
    assert all(f'href="#samples={i}"' in contents.group(1) for i in ids)
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    # the #samples= link scrolls to that run's viewer: in view, near the top of the 1800-pixel
    # window (as near as the end of the page allows; a probe added to a copy reads the position)
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", "<script>setTimeout(()=>{document.title='top '+Math.round("
                                  f"document.getElementById('samples-{ids[0]}').getBoundingClientRect().top)"
                                  "+' y '+Math.round(window.scrollY)},300)</script></body>"))
    title = re.search(r"<title>top (-?\d+) y (\d+)</title>", _dom(browser, f"{probe.as_uri()}#samples={ids[0]}"))
    assert title and 0 <= int(title.group(1)) < 900 and int(title.group(2)) > 5000, title
    run = ids[1]
    # ids in numeric order within a task (the database sorts them as text)
    rows = _visible_rows(_dom(browser, f"{html.as_uri()}#samples={run}&task=lcc"), run)
    shown = [row[0] for row in rows]
    assert shown == sorted(shown, key=natural_key) != sorted(shown) and len(shown) > 10
    # the table is drawn a page at a time (PAGE rows, here made 100 in a copy)
    assert f"PAGE={PAGE}" in text
    paged = tmp_path / "paged.html"
    paged.write_text(text.replace(f"PAGE={PAGE}", "PAGE=100"))
    dom = _dom(browser, f"{paged.as_uri()}#samples={run}")
    assert len(_visible_rows(dom, run)) == 100 and "show 100 more of 137" in dom
