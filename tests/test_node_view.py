"""A Ray run's requests and workers per node, as the user sees them: the end-of-run summary
and the report (Markdown, HTML, terminal, JSON) render run.json's `backend.nodes` as one
table whose total row is the sum of its columns; a lost node is marked; a local run's
output is unchanged; an older or malformed Ray block renders what it has. The run is a
real one (a JSONL file on the simulator, stored in a real DuckDB cache) whose `backend`
is replaced by the block `RayRunner.placement` writes, so no Ray cluster is needed."""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from asyncbench.cli import main as cli
from asyncbench.report.data import RunReport, load_runs
from asyncbench.report.html import render_html
from asyncbench.report.model import build_report
from asyncbench.report.summary import print_summary
from asyncbench.report.tables import print_tables, render_json, render_markdown
from asyncbench.run_summary import RunSummary

REPO = Path(__file__).resolve().parents[1]

# Two nodes: the second lost mid-run; its worker's one unanswered job handed again to a
# replacement started on the first (which so ran two workers). "sent" counts HTTP
# requests, retries and the lost node's in-flight request included.
NODES = [{"node": "a1b2c3d4e5f6", "ip": "127.0.0.1", "requests": 2, "workers": 2, "sent": 3},
         {"node": "0f9e8d7c6b5a", "ip": "127.0.0.2", "requests": 1, "workers": 1, "sent": 2, "lost": True}]
RAY = {"name": "ray", "address": "127.0.0.1:6379", "workers": 2, "shared_limiter": None, "workers_replaced": 1,
       "requests_resent": 1, "batches": 4, "limiter_leases": 0, "jobs_per_worker": [2, 1], "nodes": NODES}
# run.json of a Ray run from before nodes were kept
OLD_RAY = {"name": "ray", "address": "127.0.0.1:6379", "workers": 2, "shared_limiter": None}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    """A finished local run of examples/my_data.jsonl on the simulator: its cache and run.json."""
    tmp = tmp_path_factory.mktemp("nodes")
    assert cli(["run", f"jsonl:{REPO / 'examples' / 'my_data.jsonl'}", "--model", "sim", "--cache",
                str(tmp / "c.duckdb"), "--out", str(tmp / "o"), "--no-progress"]) == 0
    summary = json.loads((tmp / "o" / "run.json").read_text())
    assert summary["backend"] == {"name": "local"}
    return tmp / "c.duckdb", summary


def _summary_text(summary: dict[str, object], backend: object, width: int = 200) -> list[str]:
    out = io.StringIO()
    print_summary(RunSummary.from_json({**summary, "backend": backend}),
                  Console(file=out, width=width, no_color=True, force_terminal=False))
    return out.getvalue().splitlines()


def _added(local: list[str], shown: list[str]) -> list[str]:
    """The lines `shown` has beyond `local`, asserting they are one block and every
    other line is the local run's, in its order."""
    k = next((i for i, (a, b) in enumerate(zip(local, shown)) if a != b), len(local))
    block = shown[k:k + len(shown) - len(local)]
    assert shown[:k] + shown[k + len(block):] == local
    return block


def _numbers(cells: list[str]) -> list[int]:
    return [int(c.replace(",", "")) for c in cells]


def test_the_summary_shows_each_node_its_lost_marker_and_totals_that_add_up(run: tuple[Path, dict]) -> None:
    _, summary = run
    local = _summary_text(summary, {"name": "local"})
    block = _added(local, _summary_text(summary, RAY))
    head, columns, *rows, total = block
    assert head == ("Ray nodes (this invocation; sent: HTTP requests, retries included); workers replaced 1, "
                    "requests handed again 1:")
    assert columns.split() == ["node", "ip", "workers", "answered", "sent", "lost"]
    assert [r.split()[:2] for r in rows] == [[n["node"], n["ip"]] for n in NODES]
    assert [r.split()[-1] == "lost" for r in rows] == [False, True]  # the lost node's row only
    figures = [_numbers(r.split()[2:5]) for r in rows]
    assert figures == [[n["workers"], n["requests"], n["sent"]] for n in NODES]
    assert total.split()[0] == "total"
    sums = _numbers(total.split()[1:])
    assert sums == [sum(column) for column in zip(*figures)]
    # the answered total is run.json's: this run's answered samples, the jobs per worker
    assert sums[1] == summary["samples"]["answered"] == sum(RAY["jobs_per_worker"])
    # at 80 columns the heading wraps, the table's rows never do
    narrow = _added(_summary_text(summary, {"name": "local"}, 80), _summary_text(summary, RAY, 80))
    assert narrow[-len(block) + 1:] == block[1:]


def test_a_local_run_and_a_ray_run_json_without_nodes_show_no_node_lines(run: tuple[Path, dict]) -> None:
    _, summary = run
    local = _summary_text(summary, {"name": "local"})
    assert not [line for line in local if line.startswith(("Ray", "  node "))]
    assert _summary_text(summary, {}) == local
    assert _summary_text(summary, OLD_RAY) == local
    # no nodes kept but a worker replaced: that line alone
    assert _added(local, _summary_text(summary, {**OLD_RAY, "workers_replaced": 2})) == ["Ray: workers replaced 2"]


def test_an_older_or_malformed_ray_block_renders_what_it_has(run: tuple[Path, dict]) -> None:
    _, summary = run
    local = _summary_text(summary, {"name": "local"})
    no_sent = [{k: v for k, v in n.items() if k not in ("sent", "lost")} for n in NODES]
    head, columns, *rows, total = _added(local, _summary_text(summary, {**OLD_RAY, "nodes": no_sent}))
    assert head == "Ray nodes (this invocation):"
    assert columns.split() == ["node", "ip", "workers", "answered"]
    assert total.split() == ["total", "3", "3"]
    bad = {**RAY, "workers_replaced": "1", "nodes": ["x", {"node": 7, "requests": "2", "workers": 1, "lost": "yes"},
                                                        {"node": "b", "requests": 4, "workers": 2, "sent": 5}]}
    head, columns, *rows, total = _added(local, _summary_text(summary, bad))
    assert head.startswith("Ray nodes (this invocation; sent") and "replaced" not in head
    assert [r.split() for r in rows] == [["?", "1", "-", "-"], ["b", "2", "4", "5"]]
    # a column with a figure missing has no total: "-", never the sum of the others
    assert total.split() == ["total", "3", "-", "-"]


def _ray_run(cache: Path) -> RunReport:
    (stored,) = load_runs(cache, [])
    return dataclasses.replace(stored, summary={**stored.summary, "backend": RAY})


def _md_table(md: str, title_part: str) -> list[list[str]]:
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("### ") and title_part in line)
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows


def test_the_report_shows_the_node_table_in_the_run_section(run: tuple[Path, dict]) -> None:
    cache, summary = run
    ray_run = _ray_run(cache)
    report = build_report([ray_run])
    md = render_markdown(report)
    title = f"{ray_run.label} per Ray node (last invocation; workers replaced 1, requests handed again 1)"
    assert f"### {title}" in md
    assert md.index(f"### {ray_run.label} per task") < md.index(title) < md.index("## Endpoints")
    header, _, *rows, total = _md_table(md, "per Ray node")
    assert header == ["node", "ip", "workers", "answered", "sent", "lost"]
    assert [r[5] for r in rows] == ["", "lost"]
    figures = [_numbers(r[2:5]) for r in rows]
    assert figures == [[n["workers"], n["requests"], n["sent"]] for n in NODES]
    assert total[:2] == ["total", ""]
    assert _numbers(total[2:5]) == [sum(column) for column in zip(*figures)]
    assert _numbers(total[3:4]) == [summary["samples"]["answered"]]

    html = render_html(report, [ray_run])
    table = re.search(rf'<table id="nodes-run-{ray_run.run_id}">(.*?)</table>', html)
    assert table is not None
    cells = [re.findall(r"<t[dh]>(.*?)</t[dh]>", r) for r in re.findall(r"<tr>(.*?)</tr>", table.group(1))]
    assert cells[1:] == [*rows, total] and cells[0] == header  # the same table as the Markdown's

    out = io.StringIO()
    print_tables(report, Console(file=out, width=200, no_color=True, force_terminal=False))
    text = out.getvalue()
    assert title in " ".join(text.split())  # the table's title may wrap
    (lost_row,) = [line for line in text.splitlines() if NODES[1]["node"] in line]
    assert [c.strip() for c in lost_row.strip("│ ").split("│")] == rows[1]
    assert json.loads(render_json(report))["runs"][0]["backend"]["nodes"] == NODES


def test_a_local_run_s_report_has_no_node_table(run: tuple[Path, dict]) -> None:
    cache, _ = run
    runs = load_runs(cache, [])
    report = build_report(runs)
    assert "per Ray node" not in render_markdown(report)
    assert "nodes-run-" not in render_html(report, runs)
