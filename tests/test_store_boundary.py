"""The store is the only place that speaks SQL: every statement on the cache file is a
named method of `store.cache`, `store.runs` or `store.batches`, so the schema can change
in one package. Read from the source (ast), not by running it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "asyncbench"
STORE = PACKAGE / "store"
SQL = re.compile(r"^\s*(SELECT\b.*\bFROM|INSERT( OR \w+)? INTO|UPDATE \w+ SET|DELETE FROM|(CREATE|ALTER|DROP) TABLE|COPY )",
                 re.S)
CONNECTION_CALLS = {"execute", "executemany", "fetchone", "fetchall", "fetchmany", "sql", "table", "cursor"}


def _outside_store() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if STORE not in p.parents)


def _violations(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "duckdb" for a in node.names):
            found.append(f"{where} imports duckdb")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "duckdb":
            found.append(f"{where} imports from duckdb")
        elif isinstance(node, ast.Attribute) and node.attr in ("con", "_con"):
            found.append(f"{where} reaches a store's connection (.{node.attr})")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in CONNECTION_CALLS and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and SQL.match(node.args[0].value)):
            found.append(f"{where} runs SQL ({node.func.attr})")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.match(node.value):
            found.append(f"{where} holds an SQL statement")
    return found


def test_no_module_outside_the_store_runs_sql() -> None:
    outside = _outside_store()
    assert len(outside) > 50  # the walk found the package
    found = [v for path in outside for v in _violations(path)]
    assert found == [], "\n".join(found)


def test_the_check_sees_sql_where_it_is(tmp_path: Path) -> None:
    """The scan is not vacuous: each way of running SQL it looks for is caught."""
    src = tmp_path / "bad.py"
    src.write_text("import duckdb\n"
                   "def f(store):\n"
                   "    store.con.execute('SELECT key FROM responses')\n"
                   "    q = 'DELETE FROM responses'\n", encoding="utf-8")
    kinds = {v.split(" ", 1)[1] for v in _violations(src, tmp_path)}
    assert kinds == {"imports duckdb", "reaches a store's connection (.con)", "runs SQL (execute)",
                     "holds an SQL statement"}
    inside = [v for p in sorted(STORE.glob("*.py")) for v in _violations(p)]
    assert any("runs SQL" in v for v in inside)  # the store itself does, and is allowed to

