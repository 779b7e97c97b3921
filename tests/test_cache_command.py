"""`asyncbench cache clear|stats|runs` on a real DuckDB file: what each deletes and keeps
(the response cache and the run record are separate parts of the store)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from asyncbench.commands import cache as command
from asyncbench.errors import UserError
from asyncbench.ledger import InvocationEntry, RequestEntry
from asyncbench.store import Store


def _args(path: Path, action: str, **over: object) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args([action, "--cache", str(path)])
    for name, value in over.items():
        setattr(args, name, value)
    return args


def _filled(path: Path) -> None:
    with Store(path) as store:
        store.cache.put_responses([{"key": f"k{i}", "provider": "p", "model": f"m{i % 2}", "endpoint": "e",
                                    "request_json": "{}", "text": "a", "finish_reason": "stop", "prompt_tokens": 1,
                                    "completion_tokens": 1, "cached_prompt_tokens": 0, "latency_ms": 1.0,
                                    "cost_usd": 0.25, "served_by": "x", "created_at": 0.0, "cache_write_tokens": 0}
                                   for i in range(4)])
        store.runs.start_run("r1", "jsonl:x", "p:m0", {"a": 1})
        store.runs.put_ledger_requests("r1", [RequestEntry(1, "eval", "t", "sent", "k0", "s0", 1, 1, 0, 0.25)])
        store.runs.put_invocation("r1", InvocationEntry(1, 0.0, 1.0, 1, finished=True, complete=True))
        store.runs.finish_run("r1", "complete", {"scores": {"overall": 50.0}})


def test_clear_keeps_the_run_record_unless_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.duckdb"
    _filled(path)
    with pytest.raises(UserError, match="add --yes"):
        command.main(_args(path, "clear"))
    assert command.main(_args(path, "clear", yes=True, model="p:m1")) == 0
    assert "deleted 2 cached responses" in capsys.readouterr().out
    command.main(_args(path, "stats"))
    stats = json.loads(capsys.readouterr().out)
    assert stats["responses"] == 2 and stats["runs"] == 1 and list(stats["by_model"]) == ["p:m0"]
    command.main(_args(path, "runs"))
    line = capsys.readouterr().out
    assert line.startswith("r1  complete") and "cost=$0.2500" in line and "overall=50.00" in line
    command.main(_args(path, "clear", yes=True, runs=True))
    assert "deleted 2 cached responses" in capsys.readouterr().out
    with Store(path) as store:
        assert store.runs.runs() == [] and store.runs.ledger("r1").requests == []
        assert store.cache.stats()["responses"] == 0
