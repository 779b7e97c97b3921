"""The Runner seam (issue 26 item 4): a protocol of at most three members, the engine as
the store's only writer (the batch runner's records come to it as events), and a
ModelClient that the engine and planning ask instead of reaching into its provider."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import anyio

from asyncbench.run.generate import CacheFirst
from asyncbench.runners.base import BatchLookup, BatchRecord, BatchState, BatchStep
from asyncbench.runners.local import LocalRunner
from asyncbench.scheduler import Budget
from asyncbench.store import Store
from asyncbench.store.journal import Journal

PACKAGE = Path(__file__).resolve().parents[1] / "asyncbench"
# Where a ModelClient's provider may be touched: the client itself, the runners that send
# through it and the providers.
MAY_TOUCH_PROVIDER = ("client.py", "runners/", "providers/")
# Planning hands the provider to the resolvers that ask the server for its context length
# and tokenizer (resolve.py, LongBench's official models): being moved into plan.py.
PLANNING_RESOLVERS = {"official_model", "prompt_budget", "truncation_tokenizer", "newline_stop"}
CLIENT_NAMES = {"client", "judge", "target"}


def _client_provider_uses(tree: ast.AST) -> list[int]:
    """Lines reading `<client>.provider` (a ModelClient's), except as an argument of a
    planning resolver."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PLANNING_RESOLVERS:
            allowed.update(id(a) for a in node.args)
    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr == "provider") or id(node) in allowed:
            continue
        base = node.value
        name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
        if name in CLIENT_NAMES or name.endswith("client"):
            lines.append(node.lineno)
    return sorted(lines)


def test_nothing_outside_the_client_runners_and_providers_reaches_into_a_provider() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(MAY_TOUCH_PROVIDER):
            continue
        if lines := _client_provider_uses(ast.parse(path.read_text(encoding="utf-8"))):
            found[rel] = lines
    assert found == {}


def test_the_scan_finds_a_reach_into_the_provider() -> None:
    """The check above can fail: it sees the reaches this seam removed."""
    code = "client.provider.aclose()\nx = self.client.provider.batch_limits\nprompt_budget(cfg, client.provider)\n"
    assert _client_provider_uses(ast.parse(code)) == [1, 2]


def test_runners_write_no_store() -> None:
    """The engine is the store's only writer: no runner names the store or its batch
    journal (the seam's protocol size and typed signatures are tests/test_architecture.py's
    rules)."""
    for path in sorted((PACKAGE / "runners").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for word in ("Store", "put_batch", "update_batch", "BatchJournal", ".bind("):
            assert word not in text, f"{path.name} names {word}"


def test_the_engine_writes_batch_records_and_answers_from_them(tmp_path: Path) -> None:
    """A batch's journal steps, its record and its states, handed to the engine as events,
    are on disk and in the store; a lookup after them sees them (real DuckDB file)."""
    store = Store(tmp_path / "cache.duckdb", True)
    engine = CacheFirst(store, "run-1", 1, False, Budget(None), LocalRunner(5.0, 1), Journal(store.path, "run-1"))

    async def scenario() -> tuple[BatchLookup, BatchLookup, list[str]]:
        engine.on_batch_event(BatchStep("intent", "i-1", {"run_id": "run-1", "provider": "openai", "model": "m",
                                                          "endpoint": "ep", "base_url": "http://h", "keys": ["a", "b"],
                                                          "at": 1.0}))
        engine.on_batch_event(BatchStep("created", "i-1", {"batch_id": "batch-1"}))
        journal = engine.batch_journal
        assert journal is not None
        before = [json.loads(line)["event"] for line in journal.path.read_text().splitlines()]
        engine.on_batch_event(BatchRecord("batch-1", "run-1", "openai", "m", "ep", "http://h", ["a", "b"], 1.0,
                                          intent="i-1"))
        first = BatchLookup("openai", "ep", ["a", "z"])
        engine.on_batch_event(first)
        await engine.flush()
        assert first.answered.is_set()
        engine.on_batch_event(BatchState("batch-1", "ended", {"completed": 2}, collected=True))
        second = BatchLookup("openai", "ep", ["a", "b"])
        engine.on_batch_event(second)
        await engine.flush()
        steps = [json.loads(line)["event"] for line in journal.path.read_text().splitlines()]
        journal.close()
        assert not journal.path.exists()  # every submission in it recorded
        return first, second, before + ["|"] + steps

    with store:
        first, second, steps = anyio.run(scenario)
        assert steps == ["intent", "created", "|", "intent", "created", "recorded"]
        assert first.run_id == "run-1" and "batch-1" in first.known
        assert first.open == [("batch-1", "http://h", 1.0, ["a"])]
        assert second.open == []  # collected
        assert [(b.batch_id, b.state, b.collected) for b in store.batches.rows()] == [("batch-1", "ended", True)]
