"""The field's habits, run by `make test`: mypy --strict on the package, ruff, the
import-linter contracts (layers, providers independent), and no import cycles."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name if (BIN / name).exists() else shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return str(path)


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]


@pytest.mark.slow  # a minute or two on a fresh machine (no mypy cache)
def test_mypy_strict() -> None:
    _tool("mypy")
    _run([sys.executable, "-m", "mypy"])


def test_ruff() -> None:
    _run([_tool("ruff"), "check", "asyncbench", "tests", "bench", "examples"])


def test_import_contracts() -> None:
    _run([_tool("lint-imports")])


def test_no_import_cycles() -> None:
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("asyncbench")
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for m in modules:
        if m not in index:
            visit(m)
    assert cycles == []
