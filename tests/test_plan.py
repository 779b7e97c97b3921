"""Plan, then execute: planning reads the RunConfig once and returns a frozen RunPlan;
nothing below planning receives the config; run.json is RunSummary's serialisation,
key for key, and reads back; the terminal summary knows no benchmark by name."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import anyio
import pytest

from asyncbench.cli import main as cli_main
from asyncbench.config import RunConfig
from asyncbench.run.plan import RunPlan, plan
from asyncbench.run_summary import RunSummary

PACKAGE = Path(__file__).resolve().parents[1] / "asyncbench"
# below planning: none of these may import RunConfig or take it as a parameter
BELOW_PLANNING = ["run/execute.py", "run/generate.py", "run_summary.py", "run/record.py", "run/prompting.py", "run/dry_run.py",
                  "client.py", "run/resolve.py",
                  "ledger.py", "store", "runners", "report/summary.py", "report/score_lines.py"]


def _files(names: list[str]) -> list[Path]:
    out: list[Path] = []
    for name in names:
        path = PACKAGE / name
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def test_nothing_below_planning_imports_or_receives_a_run_config() -> None:
    found = []
    for path in _files(BELOW_PLANNING):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name == "RunConfig" for a in node.names):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} imports RunConfig")
            if isinstance(node, ast.arg) and node.annotation is not None and "RunConfig" in ast.unparse(node.annotation):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} takes {node.arg}: RunConfig")
    assert not found, found


def test_the_summary_names_no_benchmark() -> None:
    """print_summary names no benchmark: what is particular to one comes from its score
    type, through report/score_lines.py. (Probing a benchmark with hasattr/getattr is
    tests/test_architecture.py's rule.)"""
    text = (PACKAGE / "report" / "summary.py").read_text().lower()
    for word in ("longbench", "bamboo", "anchor", "longscore", "estimate"):
        assert word not in text, word


def test_plan_is_frozen_and_run_json_is_the_summary_key_for_key(tmp_path: Path, start_sim) -> None:
    sim = start_sim()
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Question {i}?", "answers": [f"a{i}"],
                                        "max_tokens": 4}) + "\n" for i in range(5)))
    cache, out = tmp_path / "c.duckdb", tmp_path / "o"
    cfg = RunConfig.build(f"jsonl:{data}", "openai-compat:sim", {"base_urls": [sim.base_url + "/v1"], "cache": str(cache),
                                                                 "out": str(out), "progress": False})

    async def planned() -> RunPlan:
        p = await plan(cfg)
        await p.aclose()
        return p

    p = anyio.run(planned)
    assert dataclasses.is_dataclass(p)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.run_id = "other"  # type: ignore[misc]
    assert p.samples.listed is None and p.samples.stream is not None  # jsonl streams its file
    assert cli_main(["run", f"jsonl:{data}", "--model", "openai-compat:sim", "--base-url", sim.base_url + "/v1",
                     "--cache", str(cache), "--out", str(out), "--no-progress"]) == 0
    text = (out / "run.json").read_text()
    stored = json.loads(text)
    assert stored["run_id"] == p.run_id  # the plan's id is the run's
    back = RunSummary.from_json(text)
    assert back.complete and back.samples["answered"] == 5 and back.this_invocation["requests"] == 5
    assert list(back.to_json()) == list(stored) and back.to_json() == stored  # same keys, order and values
