"""`asyncbench view` (issue 39): a real `asyncbench view` process over a real cache, its
JSON read over HTTP and its pages driven in headless Chromium (Playwright pointed at
Debian's chromium; skipped with the reason where either is missing)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from asyncbench.cli import main as cli_main
from asyncbench.store import Store
from asyncbench.store.rows import ResultRow

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
CLI = [sys.executable, "-c", "import sys; from asyncbench.cli import main; sys.exit(main())"]
HOSTILE = "</script><script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"
KEY = "sk-view-test-0123456789abcdefSECRET"


def _data(path: Path, variant: str) -> Path:
    """30 questions; the first prompt is hostile (the simulator's extractive answer
    repeats it); `variant` changes the odd prompts, whose references are variant "a"'s
    answers (so two variants' scores differ on those)."""
    with path.open("w") as fh:
        for i in range(30):
            lead = f"Repeat exactly: {HOSTILE}" if i == 0 else f"Item {i} is w{i}"
            extra = f" or {variant} w{(i * 3) % 7}" if i % 2 else ""
            reference = f"Item {i} is w{i}" + (f" or a w{(i * 3) % 7}" if i % 2 else "")  # run "a" answers odd ones
            fh.write(json.dumps({"id": f"q{i}", "prompt": f"{lead}{extra}", "answers": [reference], "max_tokens": 64})
                     + "\n")
    return path


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    """Two finished runs on the simulator (a key in the environment, never to be shown)."""
    from asyncbench.sim.testing import start_sim_subprocess, stop_sim_subprocess

    tmp = tmp_path_factory.mktemp("view")
    before = os.environ.get("ASYNCBENCH_API_KEY")
    os.environ["ASYNCBENCH_API_KEY"] = os.environ["SIM_VIEW_KEY"] = KEY  # openai-compat's key; the sim takes only it
    proc, url = start_sim_subprocess(["--api-key-env", "SIM_VIEW_KEY"])
    ids = []
    try:
        for name in ("a", "b"):
            data = _data(tmp / f"{name}.jsonl", name)
            rc = cli_main(["run", f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", url + "/v1",
                           "--cache", str(tmp / "cache.duckdb"),
                           "--out", str(tmp / name), "--no-progress"])
            assert rc == 0
            ids.append(json.loads((tmp / name / "run.json").read_text())["run_id"])
    finally:
        stop_sim_subprocess(proc)
        del os.environ["SIM_VIEW_KEY"]
        if before is None:
            del os.environ["ASYNCBENCH_API_KEY"]
        else:
            os.environ["ASYNCBENCH_API_KEY"] = before
    yield tmp / "cache.duckdb", ids


class View:
    """A running `asyncbench view` process on a free port; stopped by its PID."""

    def __init__(self, cache: Path) -> None:
        self.proc = subprocess.Popen([*CLI, "view", "--cache", str(cache), "--port", "0"], env=ENV,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
        if not found:
            self.proc.kill()
            pytest.fail(f"no URL from asyncbench view: {line}{self.proc.stderr.read()}")
        self.url = found.group(1)

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=60) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def json(self, path: str) -> object:
        status, body = self.get(path)
        assert status == 200, body
        return json.loads(body)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def view(cache: tuple[Path, list[str]]) -> Iterator[View]:
    v = View(cache[0])
    yield v
    v.stop()


def test_runs_samples_pages_and_filters_over_http(view: View, cache: tuple[Path, list[str]]) -> None:
    _, (a, b) = cache
    runs = view.json("/api/runs")
    assert isinstance(runs, list) and {r["run_id"] for r in runs} == {a, b}
    assert all(r["status"] == "complete" and r["score"] is not None and r["cost_usd"] > 0 for r in runs)
    page = view.json(f"/api/runs/{a}/samples?offset=10&limit=7")
    assert isinstance(page, dict) and page["total"] == 30 and len(page["samples"]) == 7
    ids = [s["sample_id"] for s in page["samples"]]
    everything = view.json(f"/api/runs/{a}/samples?limit=500")
    assert isinstance(everything, dict) and [s["sample_id"] for s in everything["samples"]][10:17] == ids
    found = view.json(f"/api/runs/{a[:6]}/samples?q=script")  # a prefix of the id works as elsewhere
    assert isinstance(found, dict) and [s["sample_id"] for s in found["samples"]] == ["q0"]
    assert found["samples"][0]["prediction"].count(HOSTILE) == 1 and found["samples"][0]["prompt"]
    side = view.json(f"/api/compare?a={a}&b={b}&limit=50")
    assert isinstance(side, dict) and side["shared"] == 30 and 0 < side["differ"] < 30
    first = side["rows"][: side["differ"]]
    assert all(r["score_a"] != r["score_b"] for r in first) and side["rows"][side["differ"]]["score_a"] == \
        side["rows"][side["differ"]]["score_b"]
    status, body = view.get("/api/runs/nosuchrun")
    assert status == 404 and json.loads(body)["error"].startswith("no run 'nosuchrun'")
    status, body = view.get(f"/api/runs/{a}/samples?offset=x")
    assert status == 400 and "offset must be a whole number" in body


def test_no_page_serves_the_key(view: View, cache: tuple[Path, list[str]]) -> None:
    _, (a, b) = cache
    bodies = [view.get(p)[1] for p in ("/", "/api/runs", f"/api/runs/{a}", f"/api/runs/{a}/samples?limit=500",
                                       f"/api/compare?a={a}&b={b}", f"/report/{a}", f"/leaderboard?runs={a},{b}")]
    assert all(bodies) and not any(KEY in body or KEY[-12:] in body for body in bodies)


def test_first_page_of_a_100k_sample_run_is_quick(tmp_path: Path) -> None:
    """Paged in the store: a run of 100,000 samples never read whole (< 1 s here; the
    test allows 5 s for a loaded machine)."""
    cache = tmp_path / "big.duckdb"
    with Store(cache) as store, store.session():
        store.runs.start_run("bigrun", "jsonl:big", "openai-compat:sim", {})
        store.runs.put_results([ResultRow("bigrun", f"s{i:06d}", "jsonl", "eval", f"k{i}", "answered", i % 2,
                                          f"answer {i}", False, None, 10, 2, 0, 0.0001, 50.0, 0, "{}", 1, "[]")
                                for i in range(100_000)], new=True)
    v = View(cache)
    try:
        started = time.monotonic()
        page = v.json("/api/runs/bigrun/samples?limit=50")
        took = time.monotonic() - started
        assert isinstance(page, dict) and page["total"] == 100_000 and len(page["samples"]) == 50
        assert took < 5, took
        last = v.json("/api/runs/bigrun/samples?limit=50&offset=99990")
        assert isinstance(last, dict) and [s["sample_id"] for s in last["samples"]][-1] == "s099999"
    finally:
        v.stop()


# -- in a real browser ------------------------------------------------------------------
def _browser():  # type: ignore[no-untyped-def]
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install 'asyncbench[test]')")
    return sync_playwright, chromium


def test_pages_in_headless_chromium_show_hostile_answers_as_text(view: View, cache: tuple[Path, list[str]],
                                                                  tmp_path: Path) -> None:
    sync_playwright, chromium = _browser()
    _, (a, b) = cache
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            # the positive control: the same text put into a page as HTML runs its script
            page.set_content(f"<div>{HOSTILE}</div>")
            page.wait_for_function("window.__pwned !== undefined", timeout=10_000)
            page = browser.new_page()
            page.goto(view.url + "/#/")
            page.wait_for_selector(f"table.runs tr[data-run='{a}']", timeout=30_000)
            page.click(f"table.runs tr[data-run='{a}'] a")
            page.wait_for_selector("table.samples tr[data-sample]", timeout=30_000)
            assert page.locator("table.samples tr[data-sample]").count() == 30
            page.goto(view.url + f"/#/run/{a}?q=script&sample=q0")  # a deep link to one sample
            page.wait_for_selector("#answer", timeout=30_000)
            assert HOSTILE in page.text_content("#answer")
            assert HOSTILE in page.text_content("table.samples")
            page.wait_for_timeout(500)
            assert page.evaluate("window.__pwned") is None
            page.screenshot(path=str(tmp_path / "sample.png"))
            page.goto(view.url + f"/#/compare/{a}/{b}")
            page.wait_for_selector("#differ", timeout=30_000)
            differ = int(page.text_content("#differ"))
            assert 0 < differ < 30 and page.locator("table.compare tr.differ").count() == differ
            assert page.evaluate("window.__pwned") is None
        finally:
            browser.close()


def test_a_running_evaluation_s_page_updates_without_a_reload(tmp_path: Path, start_sim) -> None:
    """An evaluation runs in one process while the view, in another, shows its answered
    count grow, then the run's end, on a page never reloaded."""
    sync_playwright, chromium = _browser()
    sim = start_sim("--latency-ms", "400")  # 30 requests one at a time: ~12 s
    data = _data(tmp_path / "d.jsonl", "live")
    cache = tmp_path / "cache.duckdb"
    # one finished run first, so the cache exists and the view has something to list
    assert cli_main(["run", f"jsonl:{_data(tmp_path / 'seed.jsonl', 'seed')}", "--model", "openai-compat:sim",
                     "--base-url", sim.base_url + "/v1", "--cache", str(cache), "--out", str(tmp_path / "seed"),
                     "--no-progress"]) == 0
    run = subprocess.Popen([*CLI, "run", f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url",
                            sim.base_url + "/v1", "--concurrency", "1", "--cache", str(cache), "--out",
                            str(tmp_path / "live"), "--no-progress"], env=ENV, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    v = View(cache)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                deadline = time.monotonic() + 120
                running: list[str] = []
                while not running:  # the run has started (as the runs table's JSON says)
                    assert time.monotonic() < deadline and run.poll() is None, "the run never showed as running"
                    listed = v.json("/api/runs")
                    assert isinstance(listed, list)
                    running = [r["run_id"] for r in listed if r["status"] == "running"]
                    time.sleep(0.2)
                page = browser.new_page()
                page.goto(v.url + f"/#/run/{running[0]}")
                page.wait_for_selector("#answered", timeout=30_000)
                seen = [int(page.text_content("#answered"))]
                while run.poll() is None and time.monotonic() < deadline:
                    page.wait_for_timeout(500)
                    seen.append(int(page.text_content("#answered")))
                assert run.wait(timeout=120) == 0, run.stderr.read() if run.stderr else ""
                page.wait_for_selector("#status span:text-is('complete')", timeout=30_000)
                # the even prompts are the seed run's: from the cache
                assert int(page.text_content("#answered")) + int(page.text_content("#cached")) == 30
                grew = sorted(set(seen))
                assert len(grew) >= 2 and grew[0] < 15, seen  # the count changed while it ran, no reload
            finally:
                browser.close()
    finally:
        v.stop()
        if run.poll() is None:
            run.kill()
