"""The package's shape: every command in asyncbench/commands/, library modules free of
argparse (so they can be used from Python and by the API without a CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "asyncbench"


def test_only_commands_import_argparse() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("commands/") or rel == "cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] == "argparse" for n in names):
                offenders.append(rel)
    assert offenders == []


def test_every_cli_command_lives_in_commands() -> None:
    from asyncbench.cli import COMMANDS

    modules = [m for v in COMMANDS.values() for m in ([v] if isinstance(v, str) else v.values())]
    assert modules and all(str(m).startswith("asyncbench.commands.") for m in modules)
